#include "cli/status_view.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace migd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

migd::v1::Gpu* AddGpu(migd::v1::ListResponse& list, uint32_t index, bool mig, uint32_t slices) {
  migd::v1::Gpu* g = list.add_gpus();
  g->set_index(index);
  g->set_uuid("GPU-" + std::to_string(index));
  g->set_name("NVIDIA H100 80GB HBM3");
  g->set_mig_enabled(mig);
  g->set_memory_slices(slices);
  g->set_memory_total_mib(81559);
  return g;
}

migd::v1::Instance* AddInstance(migd::v1::ListResponse& list, uint32_t gpu, uint32_t start,
                                uint32_t size, const std::string& profile,
                                migd::v1::InstanceState state, const std::string& owner = "") {
  migd::v1::Instance* i = list.add_instances();
  i->set_gpu_index(gpu);
  i->set_profile(profile);
  i->mutable_placement()->set_start(start);
  i->mutable_placement()->set_size(size);
  i->set_state(state);
  i->set_mig_uuid("MIG-" + profile + "-" + std::to_string(start));
  if (!owner.empty()) i->mutable_owner()->set_opaque_id(owner);
  return i;
}

// One H100 (8 slices): 3g.40gb Active at 0:4... see the picture in Renders.
struct Node {
  migd::v1::ListResponse list;
  migd::v1::GetStatusResponse status;
};

Node SampleNode() {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddInstance(n.list, 0, 0, 4, "3g.40gb", migd::v1::INSTANCE_STATE_ACTIVE, "job-7");
  AddInstance(n.list, 0, 4, 1, "1g.10gb", migd::v1::INSTANCE_STATE_IDLE);
  migd::v1::ForeignInstance* f = n.list.add_foreign();
  f->set_gpu_index(0);
  f->set_profile("2g.20gb");
  f->mutable_placement()->set_start(6);
  f->mutable_placement()->set_size(2);
  f->set_gi_id(5);
  AddGpu(n.list, 1, false, 8);
  n.status.set_version("0.1.0");
  n.status.set_driver_version("550.54.15");
  n.status.set_simulated(true);
  migd::v1::GpuStatus* gs = n.status.add_gpus();
  *gs->mutable_gpu() = n.list.gpus(0);
  gs->set_free_slices(1);
  gs->set_idle_slices(1);
  gs->set_active_slices(4);
  gs->set_foreign_slices(2);
  gs->set_fragmentation(0.25);
  n.status.set_instances_active(1);
  n.status.set_instances_idle(1);
  n.status.set_instances_foreign(1);
  return n;
}

// Columns of '+' in a border line.
std::vector<size_t> Corners(const std::string& line) {
  std::vector<size_t> out;
  for (size_t c = 0; c < line.size(); ++c) {
    if (line[c] == '+') out.push_back(c);
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

// Index of the first line that starts with `prefix`, or -1.
int Find(const std::vector<std::string>& lines, const std::string& prefix) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
  }
  return -1;
}

TEST(StatusViewTest, ExactPictureWithoutColour) {
  const Node n = SampleNode();
  const std::string want =
      "migd 0.1.0  driver 550.54.15  simulated  2 GPUs\n"
      "\n"
      "GPU 0  NVIDIA H100 80GB HBM3  GPU-0  MIG enabled  8 slices  81559 MiB\n"
      "   0        1        2        3        4        5        6        7\n"
      "  +-----------------------------------+--------+--------+-----------------+\n"
      "  |3g.40gb                            |1g.10gb |free    |2g.20gb          |\n"
      "  |Active                             |Idle    |        |foreign          |\n"
      "  |job-7                              |        |        |gi 5             |\n"
      "  +-----------------------------------+--------+--------+-----------------+\n"
      "  slices: 1 free, 1 idle, 4 active, 2 foreign; fragmentation 0.25\n"
      "\n"
      "GPU 1  NVIDIA H100 80GB HBM3  GPU-1  MIG disabled\n"
      "  no instances here; to use it: `nvidia-smi -i 1 -mig 1`, reset the GPU, restart migd\n"
      "\n"
      "node: 1 free, 1 idle, 4 active, 2 foreign slices on 1 MIG-enabled GPU; instances: 1 "
      "active, 1 idle, 0 error, 1 foreign\n"
      "legend: Active: in use by its owner  Idle: released, kept for reuse\n"
      "        Creating/Reclaiming/Deleting: changing  Error: destroy failed, retried\n"
      "        foreign: not created by migd, preserved  free: no instance\n";
  EXPECT_EQ(RenderStatus(n.list, n.status, {.color = false, .width = 80}), want);
}

// The block borders sit exactly at slice boundaries 0, 4, 5, 6, 8 and the
// ruler numbers right after each slice's border column, for any width.
class StatusViewWidthTest : public ::testing::TestWithParam<int> {};

TEST_P(StatusViewWidthTest, BlockBoundariesAtSlicePositions) {
  const Node n = SampleNode();
  const int width = GetParam();
  const std::vector<std::string> lines =
      Lines(RenderStatus(n.list, n.status, {.color = false, .width = width}));
  const int gpu0 = Find(lines, "GPU 0");
  ASSERT_GE(gpu0, 0);
  const std::string& ruler = lines[gpu0 + 1];
  const std::string& top = lines[gpu0 + 2];
  const std::string& bottom = lines[gpu0 + 6];
  const size_t cell = std::clamp<size_t>((static_cast<size_t>(width) - 3) / 8, 5, 16);
  const std::vector<size_t> want = {2, 2 + 4 * cell, 2 + 5 * cell, 2 + 6 * cell, 2 + 8 * cell};
  EXPECT_EQ(Corners(top), want) << top;
  EXPECT_EQ(bottom, top);
  for (int row = 3; row <= 5; ++row) {
    const std::string& label = lines[gpu0 + row];
    ASSERT_EQ(label.size(), top.size()) << label;
    for (size_t c : want) EXPECT_EQ(label[c], '|') << "row " << row << " col " << c;
  }
  for (uint32_t s = 0; s < 8; ++s) {
    const size_t col = 2 + s * cell + 1;
    ASSERT_GT(ruler.size(), col);
    EXPECT_EQ(ruler[col], static_cast<char>('0' + s)) << ruler;
  }
  // Labels start right after the block's left border (cut to narrow cells).
  auto label_at = [&](int row, size_t slice, const std::string& text) {
    const std::string want_text = FitLabel(text, slice == 4 || slice == 5 ? cell - 1 : 99);
    return lines[gpu0 + row].substr(2 + slice * cell + 1, want_text.size()) == want_text;
  };
  EXPECT_TRUE(label_at(3, 0, "3g.40gb")) << lines[gpu0 + 3];
  EXPECT_TRUE(label_at(3, 4, "1g.10gb")) << lines[gpu0 + 3];
  EXPECT_TRUE(label_at(3, 5, "free")) << lines[gpu0 + 3];
  EXPECT_TRUE(label_at(4, 6, "foreign")) << lines[gpu0 + 4];
}

INSTANTIATE_TEST_SUITE_P(Widths, StatusViewWidthTest, ::testing::Values(20, 60, 80, 100, 200));

TEST(StatusViewTest, NoEscapeCodesWithoutColour) {
  const Node n = SampleNode();
  EXPECT_THAT(RenderStatus(n.list, n.status, {.color = false, .width = 100}),
              Not(HasSubstr("\x1b")));
}

TEST(StatusViewTest, ColoursEachStateWhenAsked) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddInstance(n.list, 0, 0, 1, "1g.10gb", migd::v1::INSTANCE_STATE_ACTIVE, "a");
  AddInstance(n.list, 0, 1, 1, "1g.10gb", migd::v1::INSTANCE_STATE_IDLE);
  AddInstance(n.list, 0, 2, 1, "1g.10gb", migd::v1::INSTANCE_STATE_ERROR);
  AddInstance(n.list, 0, 3, 1, "1g.10gb", migd::v1::INSTANCE_STATE_CREATING, "b");
  const std::vector<std::string> lines =
      Lines(RenderStatus(n.list, n.status, {.color = true, .width = 80}));
  const int gpu0 = Find(lines, "GPU 0");
  ASSERT_GE(gpu0, 0);
  // cell 9: each block's 8 content columns wrapped in its SGR code and a reset.
  EXPECT_EQ(lines[gpu0 + 4],
            "  |\x1b[30;42mActive  \x1b[0m|\x1b[97;44mIdle    \x1b[0m|\x1b[97;41mError   \x1b[0m"
            "|\x1b[30;43mCreating\x1b[0m|\x1b[2m        \x1b[0m|\x1b[2m        \x1b[0m"
            "|\x1b[2m        \x1b[0m|\x1b[2m        \x1b[0m|");
  // Borders and the ruler stay uncoloured.
  EXPECT_THAT(lines[gpu0 + 1], Not(HasSubstr("\x1b")));
  EXPECT_THAT(lines[gpu0 + 2], Not(HasSubstr("\x1b")));
  // The legend shows a swatch per state.
  const int legend = Find(lines, "legend:");
  ASSERT_GE(legend, 0);
  EXPECT_EQ(lines[legend],
            "legend: \x1b[30;42m  \x1b[0m Active: in use by its owner  \x1b[97;44m  \x1b[0m Idle: "
            "released, kept for reuse");
  EXPECT_THAT(lines[legend + 1], HasSubstr("\x1b[30;43m  \x1b[0m Creating/Reclaiming/Deleting"));
  EXPECT_THAT(lines[legend + 1], HasSubstr("\x1b[97;41m  \x1b[0m Error"));
  EXPECT_THAT(lines[legend + 2], HasSubstr("\x1b[97;45m  \x1b[0m foreign"));
  EXPECT_THAT(lines[legend + 2], HasSubstr("\x1b[2m  \x1b[0m free"));
}

TEST(StatusViewTest, ReclaimingAndDeletingAreTransitionColoured) {
  Node n;
  AddGpu(n.list, 0, true, 4);
  AddInstance(n.list, 0, 0, 2, "2g.20gb", migd::v1::INSTANCE_STATE_RECLAIMING);
  AddInstance(n.list, 0, 2, 2, "2g.20gb", migd::v1::INSTANCE_STATE_DELETING);
  const std::string out = RenderStatus(n.list, n.status, {.color = true, .width = 80});
  EXPECT_THAT(out, HasSubstr("\x1b[30;43mReclaiming"));
  EXPECT_THAT(out, HasSubstr("\x1b[30;43mDeleting"));
}

TEST(StatusViewTest, CutsLabelsThatDoNotFit) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  migd::v1::Instance* i =
      AddInstance(n.list, 0, 0, 1, "1g.10gb+me", migd::v1::INSTANCE_STATE_ACTIVE);
  migd::v1::PodOwner* pod = i->mutable_owner()->mutable_pod();
  pod->set_namespace_("team-a");
  pod->set_name("trainer-0");
  pod->set_uid("uid-1");
  const std::vector<std::string> lines =
      Lines(RenderStatus(n.list, n.status, {.color = false, .width = 80}));
  const int gpu0 = Find(lines, "GPU 0");
  ASSERT_GE(gpu0, 0);
  // 8 content columns: 7 characters and the cut marker.
  EXPECT_EQ(lines[gpu0 + 3].substr(2, 10), "|1g.10gb~|");
  EXPECT_EQ(lines[gpu0 + 5].substr(2, 10), "|team-a/~|");
}

TEST(StatusViewTest, ListsWhatCannotBeDrawn) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddInstance(n.list, 0, 0, 4, "3g.40gb", migd::v1::INSTANCE_STATE_ACTIVE, "a");
  AddInstance(n.list, 0, 2, 2, "2g.20gb", migd::v1::INSTANCE_STATE_IDLE);
  AddInstance(n.list, 0, 7, 2, "2g.20gb", migd::v1::INSTANCE_STATE_ERROR);
  const std::string out = RenderStatus(n.list, n.status, {.color = false, .width = 80});
  EXPECT_THAT(out, HasSubstr("  not drawn: 2g.20gb Idle MIG-2g.20gb-2 at 2:2 (overlaps another "
                             "instance)\n"));
  EXPECT_THAT(out, HasSubstr("  not drawn: 2g.20gb Error MIG-2g.20gb-7 at 7:2 (outside the "
                             "8-slice table)\n"));
  // Counted from the drawn blocks: 4 active, 4 free.
  EXPECT_THAT(out, HasSubstr("  slices: 4 free, 0 idle, 4 active, 0 foreign\n"));
}

TEST(StatusViewTest, CountsTotalsWhenGetStatusLacksTheGpu) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddGpu(n.list, 1, true, 4);
  AddInstance(n.list, 0, 0, 4, "3g.40gb", migd::v1::INSTANCE_STATE_ACTIVE, "a");
  AddInstance(n.list, 0, 4, 2, "2g.20gb", migd::v1::INSTANCE_STATE_IDLE);
  AddInstance(n.list, 1, 0, 1, "1g.6gb", migd::v1::INSTANCE_STATE_DELETING);
  migd::v1::GpuStatus* gs = n.status.add_gpus();
  gs->mutable_gpu()->set_index(1);
  gs->set_free_slices(3);
  gs->set_active_slices(1);
  gs->set_fragmentation(0.5);
  const std::string out = RenderStatus(n.list, n.status, {.color = false, .width = 80});
  // GPU 0 counted from the picture, without a fragmentation score.
  EXPECT_THAT(out, HasSubstr("  slices: 2 free, 2 idle, 4 active, 0 foreign\n"));
  // GPU 1 from GetStatus.
  EXPECT_THAT(out, HasSubstr("  slices: 3 free, 0 idle, 1 active, 0 foreign; fragmentation "
                             "0.50\n"));
  EXPECT_THAT(out, HasSubstr("node: 5 free, 2 idle, 5 active, 0 foreign slices on 2 MIG-enabled "
                             "GPUs;"));
}

TEST(StatusViewTest, MigDisabledGpuHasNoRow) {
  Node n;
  AddGpu(n.list, 3, false, 8);
  const std::string out = RenderStatus(n.list, n.status, {.color = false, .width = 80});
  EXPECT_THAT(out, HasSubstr("GPU 3  NVIDIA H100 80GB HBM3  GPU-3  MIG disabled\n"));
  EXPECT_THAT(out, HasSubstr("`nvidia-smi -i 3 -mig 1`"));
  EXPECT_THAT(out, Not(HasSubstr("+--")));
  EXPECT_THAT(out, HasSubstr("on 0 MIG-enabled GPUs"));
}

TEST(StatusViewTest, MarksUnhealthyGpusAndInstances) {
  Node n;
  migd::v1::Gpu* g = AddGpu(n.list, 0, true, 8);
  g->set_unhealthy(true);
  g->set_health_reason("GPU 0: gpu lost");
  AddInstance(n.list, 0, 0, 4, "4g.20gb", migd::v1::INSTANCE_STATE_IDLE)->set_unhealthy(true);
  AddInstance(n.list, 0, 4, 1, "1g.5gb", migd::v1::INSTANCE_STATE_IDLE);
  const std::string out = RenderStatus(n.list, n.status, {.color = false, .width = 120});
  EXPECT_THAT(out, HasSubstr("\n  UNHEALTHY: GPU 0: gpu lost; no new allocation on this GPU"));
  const std::vector<std::string> lines = Lines(out);
  const int state = Find(lines, "  |4g.20gb") + 1;
  ASSERT_GT(state, 0);
  EXPECT_THAT(lines[state], HasSubstr("|Idle UNHEALTHY"));
  EXPECT_THAT(lines[state], HasSubstr("|Idle "));  // the healthy one
  EXPECT_EQ(lines[state].find("UNHEALTHY"), lines[state].rfind("UNHEALTHY"));
}

TEST(StatusViewTest, NoGpus) {
  const std::string out = RenderStatus({}, {}, {.color = false, .width = 80});
  EXPECT_THAT(out, HasSubstr("migd ?  0 GPUs\n"));
  EXPECT_THAT(out, HasSubstr("legend:"));
}

TEST(StatusViewTest, GpuWithoutSliceTable) {
  Node n;
  AddGpu(n.list, 0, true, 0);
  EXPECT_THAT(RenderStatus(n.list, n.status, {.color = false, .width = 80}),
              HasSubstr("no memory-slice table reported"));
}

TEST(StatusViewTest, ListsInstancesOfUnlistedGpus) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddInstance(n.list, 2, 0, 1, "1g.10gb", migd::v1::INSTANCE_STATE_IDLE);
  EXPECT_THAT(RenderStatus(n.list, n.status, {.color = false, .width = 80}),
              HasSubstr("\ninstances on GPUs not listed:\n  GPU 2 1g.10gb Idle at 0:1 "
                        "MIG-1g.10gb-0\n"));
  Node clean = SampleNode();
  EXPECT_THAT(RenderStatus(clean.list, clean.status, {.color = false, .width = 80}),
              Not(HasSubstr("not listed")));
}

TEST(StatusViewTest, IdleBlocksShowTheirAgeWhenGivenNow) {
  Node n;
  AddGpu(n.list, 0, true, 8);
  AddInstance(n.list, 0, 0, 1, "1g.10gb", migd::v1::INSTANCE_STATE_IDLE)
      ->set_last_used_unix_ms(1000000);
  AddInstance(n.list, 0, 1, 1, "1g.10gb", migd::v1::INSTANCE_STATE_IDLE);  // never used
  const std::vector<std::string> lines = Lines(RenderStatus(
      n.list, n.status, {.color = false, .width = 80, .now_unix_ms = 1000000 + 12 * 60000}));
  const int gpu0 = Find(lines, "GPU 0");
  ASSERT_GE(gpu0, 0);
  EXPECT_EQ(lines[gpu0 + 5].substr(2, 19), "|idle 12m|        |");
  // Without now: no age.
  EXPECT_THAT(RenderStatus(n.list, n.status, {.color = false, .width = 80}),
              Not(HasSubstr("idle ")));
}

TEST(StatusViewTest, ShortAges) {
  EXPECT_EQ(ShortAge(-5), "0s");
  EXPECT_EQ(ShortAge(59999), "59s");
  EXPECT_EQ(ShortAge(60000), "1m");
  EXPECT_EQ(ShortAge(3600000 - 1), "59m");
  EXPECT_EQ(ShortAge(3600000), "1h");
  EXPECT_EQ(ShortAge(47 * 3600000LL), "47h");
  EXPECT_EQ(ShortAge(49 * 3600000LL), "2d");
}

TEST(StatusViewTest, OwnerLabels) {
  migd::v1::Owner owner;
  EXPECT_EQ(OwnerLabel(owner), "");
  owner.set_opaque_id("job-7");
  EXPECT_EQ(OwnerLabel(owner), "job-7");
  owner.mutable_pod()->set_namespace_("ns");
  owner.mutable_pod()->set_name("pod");
  owner.mutable_pod()->set_container("c");
  EXPECT_EQ(OwnerLabel(owner), "ns/pod");
}

TEST(StatusViewTest, StateLabels) {
  EXPECT_EQ(StateLabel(migd::v1::INSTANCE_STATE_ACTIVE), "Active");
  EXPECT_EQ(StateLabel(migd::v1::INSTANCE_STATE_RECLAIMING), "Reclaiming");
  EXPECT_EQ(StateLabel(migd::v1::INSTANCE_STATE_UNSPECIFIED), "?");
}

TEST(StatusViewTest, FitLabelCountsCodePointsAndStripsControls) {
  EXPECT_EQ(FitLabel("job-7", 5), "job-7");
  EXPECT_EQ(FitLabel("job-77", 5), "job-~");
  EXPECT_EQ(FitLabel("\xc3\xb1" "and\xc3\xba-job", 4), "\xc3\xb1" "an~");
  EXPECT_EQ(FitLabel("\xc3\xb1" "and\xc3\xba", 5), "\xc3\xb1" "and\xc3\xba");
  EXPECT_EQ(FitLabel("a\x1b[31mb", 10), "a?[31mb");
  EXPECT_EQ(FitLabel("abc", 0), "");
}

}  // namespace
}  // namespace migd::cli
