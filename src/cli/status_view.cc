#include "cli/status_view.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

namespace migd::cli {
namespace {

using migd::v1::InstanceState;

constexpr int kMargin = 2;  // columns before a row's first border
constexpr size_t kMinCell = 5;
constexpr size_t kMaxCell = 16;
constexpr int kLabelLines = 3;  // profile, state, owner

constexpr std::string_view kReset = "\x1b[0m";

enum class Kind { kActive, kIdle, kError, kTransition, kForeign, kFree, kOther };

std::string_view Sgr(Kind kind) {
  switch (kind) {
    case Kind::kActive:
      return "\x1b[30;42m";  // black on green
    case Kind::kIdle:
      return "\x1b[97;44m";  // white on blue
    case Kind::kError:
      return "\x1b[97;41m";  // white on red
    case Kind::kTransition:
      return "\x1b[30;43m";  // black on yellow
    case Kind::kForeign:
      return "\x1b[97;45m";  // white on magenta
    case Kind::kFree:
      return "\x1b[2m";  // dim
    case Kind::kOther:
      return "";
  }
  return "";
}

Kind KindOf(InstanceState state) {
  switch (state) {
    case migd::v1::INSTANCE_STATE_ACTIVE:
      return Kind::kActive;
    case migd::v1::INSTANCE_STATE_IDLE:
      return Kind::kIdle;
    case migd::v1::INSTANCE_STATE_ERROR:
      return Kind::kError;
    case migd::v1::INSTANCE_STATE_CREATING:
    case migd::v1::INSTANCE_STATE_RECLAIMING:
    case migd::v1::INSTANCE_STATE_DELETING:
      return Kind::kTransition;
    default:
      return Kind::kOther;
  }
}

struct Block {
  uint32_t start = 0;
  uint32_t size = 0;
  Kind kind = Kind::kFree;
  std::string lines[kLabelLines];
};

struct Totals {
  uint64_t free = 0, idle = 0, active = 0, foreign = 0;
};

// Code points of UTF-8 text (continuation bytes do not count).
size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// Replaces control bytes so a label can never inject terminal escapes.
std::string Printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

std::string Pad(std::string_view text, size_t width) {
  std::string out = FitLabel(text, width);
  const size_t n = CodePoints(out);
  if (n < width) out.append(width - n, ' ');
  return out;
}

std::string PlacementText(uint32_t start, uint32_t size) {
  return std::to_string(start) + ":" + std::to_string(size);
}

std::string Fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// Draws one GPU's row: border, three label lines, border.
void DrawRow(const std::vector<Block>& blocks, uint32_t slices, size_t cell, bool color,
             std::string& out) {
  const std::string margin(kMargin, ' ');
  std::string ruler = margin;
  for (uint32_t s = 0; s < slices; ++s) {
    std::string num = " " + std::to_string(s);
    if (num.size() > cell) num.resize(cell);
    ruler += num + std::string(cell - num.size(), ' ');
  }
  while (!ruler.empty() && ruler.back() == ' ') ruler.pop_back();
  out += ruler + "\n";

  std::string border = margin;
  for (const Block& b : blocks) border += "+" + std::string(b.size * cell - 1, '-');
  border += "+\n";
  out += border;
  for (int line = 0; line < kLabelLines; ++line) {
    out += margin;
    for (const Block& b : blocks) {
      out += '|';
      const std::string text = Pad(b.lines[line], b.size * cell - 1);
      const std::string_view sgr = color ? Sgr(b.kind) : std::string_view();
      if (!sgr.empty()) {
        out += std::string(sgr) + text + std::string(kReset);
      } else {
        out += text;
      }
    }
    out += "|\n";
  }
  out += border;
}

}  // namespace

std::string_view StateLabel(InstanceState state) {
  switch (state) {
    case migd::v1::INSTANCE_STATE_CREATING:
      return "Creating";
    case migd::v1::INSTANCE_STATE_ACTIVE:
      return "Active";
    case migd::v1::INSTANCE_STATE_IDLE:
      return "Idle";
    case migd::v1::INSTANCE_STATE_RECLAIMING:
      return "Reclaiming";
    case migd::v1::INSTANCE_STATE_DELETING:
      return "Deleting";
    case migd::v1::INSTANCE_STATE_ERROR:
      return "Error";
    case migd::v1::INSTANCE_STATE_DESTROYED:
      return "Destroyed";
    default:
      return "?";
  }
}

std::string ShortAge(int64_t ms) {
  const int64_t s = ms > 0 ? ms / 1000 : 0;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 48 * 3600) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string OwnerLabel(const migd::v1::Owner& owner) {
  switch (owner.kind_case()) {
    case migd::v1::Owner::kPod:
      return owner.pod().namespace_() + "/" + owner.pod().name();
    case migd::v1::Owner::kOpaqueId:
      return owner.opaque_id();
    default:
      return "";
  }
}

std::string FitLabel(std::string_view text, size_t width) {
  const std::string clean = Printable(text);
  if (CodePoints(clean) <= width) return clean;
  if (width == 0) return "";
  // Keep width - 1 code points, then the cut marker.
  std::string out;
  size_t points = 0;
  for (size_t i = 0; i < clean.size(); ++i) {
    const auto c = static_cast<unsigned char>(clean[i]);
    if ((c & 0xC0) != 0x80) {
      if (points == width - 1) break;
      ++points;
    }
    out += clean[i];
  }
  return out + "~";
}

namespace {

// One GPU's row of slices: blocks placed in list order (instances, then
// foreign ones) if they fit the table and overlap no block placed before;
// what cannot be drawn becomes a note. Free slices fill the rest.
class SliceRow {
 public:
  explicit SliceRow(uint32_t slices) : slices_(slices), covered_(slices, false) {}

  // True if `b` was placed; otherwise a note names `what`.
  bool Place(Block b, const std::string& what) {
    if (b.size == 0 || b.start >= slices_ || b.size > slices_ - b.start) {
      notes_.push_back(what + " at " + PlacementText(b.start, b.size) + " (outside the " +
                       std::to_string(slices_) + "-slice table)");
      return false;
    }
    for (uint32_t s = b.start; s < b.start + b.size; ++s) {
      if (covered_[s]) {
        notes_.push_back(what + " at " + PlacementText(b.start, b.size) +
                         " (overlaps another instance)");
        return false;
      }
    }
    for (uint32_t s = b.start; s < b.start + b.size; ++s) covered_[s] = true;
    blocks_.push_back(std::move(b));
    return true;
  }

  // Fills every uncovered slice with a free block; returns how many.
  uint64_t FillFree() {
    uint64_t n = 0;
    for (uint32_t s = 0; s < slices_; ++s) {
      if (covered_[s]) continue;
      Block b;
      b.start = s;
      b.size = 1;
      b.kind = Kind::kFree;
      b.lines[0] = "free";
      blocks_.push_back(std::move(b));
      ++n;
    }
    std::sort(blocks_.begin(), blocks_.end(),
              [](const Block& a, const Block& b) { return a.start < b.start; });
    return n;
  }

  const std::vector<Block>& blocks() const { return blocks_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  const uint32_t slices_;
  std::vector<bool> covered_;
  std::vector<Block> blocks_;
  std::vector<std::string> notes_;
};

Block InstanceBlock(const migd::v1::Instance& inst, const RenderOptions& options) {
  Block b;
  b.start = inst.placement().start();
  b.size = inst.placement().size();
  b.kind = KindOf(inst.state());
  b.lines[0] = inst.profile();
  b.lines[1] = std::string(StateLabel(inst.state()));
  // Marked by the health monitor: never handed out again (docs/health.md).
  if (inst.unhealthy()) b.lines[1] += " UNHEALTHY";
  b.lines[2] = OwnerLabel(inst.owner());
  if (inst.state() == migd::v1::INSTANCE_STATE_IDLE && options.now_unix_ms > 0 &&
      inst.last_used_unix_ms() > 0) {
    b.lines[2] = "idle " + ShortAge(options.now_unix_ms - inst.last_used_unix_ms());
  }
  return b;
}

Block ForeignBlock(const migd::v1::ForeignInstance& f) {
  Block b;
  b.start = f.placement().start();
  b.size = f.placement().size();
  b.kind = Kind::kForeign;
  b.lines[0] = f.profile();
  b.lines[1] = "foreign";
  b.lines[2] = "gi " + std::to_string(f.gi_id());
  return b;
}

// The blocks of `gpu` and the totals counted from what was drawn.
Totals PlaceBlocks(const migd::v1::Gpu& gpu, const migd::v1::ListResponse& list,
                   const RenderOptions& options, SliceRow* row) {
  Totals counted;
  for (const migd::v1::Instance& inst : list.instances()) {
    if (inst.gpu_index() != gpu.index()) continue;
    Block b = InstanceBlock(inst, options);
    const std::string what =
        inst.profile() + " " + b.lines[1] + (inst.mig_uuid().empty() ? "" : " " + inst.mig_uuid());
    const Kind kind = b.kind;
    const uint32_t size = b.size;
    if (row->Place(std::move(b), what))
      (kind == Kind::kIdle ? counted.idle : counted.active) += size;
  }
  for (const migd::v1::ForeignInstance& f : list.foreign()) {
    if (f.gpu_index() != gpu.index()) continue;
    const uint32_t size = f.placement().size();
    if (row->Place(ForeignBlock(f), f.profile() + " foreign gi " + std::to_string(f.gi_id()))) {
      counted.foreign += size;
    }
  }
  counted.free = row->FillFree();
  return counted;
}

std::string RenderHeader(const migd::v1::ListResponse& list,
                         const migd::v1::GetStatusResponse& status) {
  std::string out =
      "migd " + (status.version().empty() ? std::string("?") : Printable(status.version()));
  if (!status.driver_version().empty()) out += "  driver " + Printable(status.driver_version());
  if (status.simulated()) out += "  simulated";
  out += "  " + std::to_string(list.gpus_size()) + (list.gpus_size() == 1 ? " GPU" : " GPUs") +
         "\n";
  if (!status.cdi_common_edits().empty()) {
    out += "CDI driver edits: " + Printable(status.cdi_common_edits()) + "\n";
  }
  for (const std::string& w : status.warnings()) out += "WARNING: " + Printable(w) + "\n";
  return out;
}

// One GPU's section; adds its totals to `node` (MIG-enabled GPUs only).
std::string RenderGpu(const migd::v1::Gpu& gpu, const migd::v1::ListResponse& list,
                      const migd::v1::GpuStatus* gs, const RenderOptions& options, Totals* node) {
  std::string out = "\nGPU " + std::to_string(gpu.index()) + "  " + Printable(gpu.name()) + "  " +
                    Printable(gpu.uuid());
  if (!gpu.mig_enabled()) {
    return out + "  MIG disabled\n  no instances here; to use it: `nvidia-smi -i " +
           std::to_string(gpu.index()) + " -mig 1`, reset the GPU, restart migd\n";
  }
  const uint32_t slices = gpu.memory_slices();
  out += "  MIG enabled  " + std::to_string(slices) + " slices  " +
         std::to_string(gpu.memory_total_mib()) + " MiB\n";
  if (gpu.unhealthy()) {
    out += "  UNHEALTHY: " + Printable(gpu.health_reason()) +
           "; no new allocation on this GPU (docs/health.md)\n";
  }
  if (slices == 0) return out + "  no memory-slice table reported for this GPU\n";
  const size_t usable =
      options.width > kMargin + 1 ? static_cast<size_t>(options.width) - kMargin - 1 : 0;
  const size_t cell = std::clamp<size_t>(usable / slices, kMinCell, kMaxCell);
  SliceRow row(slices);
  Totals t = PlaceBlocks(gpu, list, options, &row);
  DrawRow(row.blocks(), slices, cell, options.color, out);
  std::optional<double> frag;
  if (gs != nullptr) {
    t = Totals{gs->free_slices(), gs->idle_slices(), gs->active_slices(), gs->foreign_slices()};
    frag = gs->fragmentation();
  }
  out += "  slices: " + std::to_string(t.free) + " free, " + std::to_string(t.idle) + " idle, " +
         std::to_string(t.active) + " active, " + std::to_string(t.foreign) + " foreign";
  out += frag ? "; fragmentation " + Fixed2(*frag) + "\n" : "\n";
  for (const std::string& note : row.notes()) out += "  not drawn: " + Printable(note) + "\n";
  node->free += t.free;
  node->idle += t.idle;
  node->active += t.active;
  node->foreign += t.foreign;
  return out;
}

// Instances on a GPU the list does not describe (it vanished, or a filter
// mismatch) are still shown.
std::string RenderOrphans(const migd::v1::ListResponse& list) {
  auto known = [&](uint32_t index) {
    for (const migd::v1::Gpu& g : list.gpus()) {
      if (g.index() == index) return true;
    }
    return false;
  };
  std::string orphans;
  for (const migd::v1::Instance& inst : list.instances()) {
    if (known(inst.gpu_index())) continue;
    orphans += "  GPU " + std::to_string(inst.gpu_index()) + " " + Printable(inst.profile()) + " " +
               std::string(StateLabel(inst.state())) + " at " +
               PlacementText(inst.placement().start(), inst.placement().size()) +
               (inst.mig_uuid().empty() ? "" : " " + Printable(inst.mig_uuid())) + "\n";
  }
  return orphans.empty() ? "" : "\ninstances on GPUs not listed:\n" + orphans;
}

std::string RenderLegend(bool color) {
  struct Entry {
    Kind kind;
    std::string_view text;
  };
  static constexpr Entry kLegend[] = {
      {Kind::kActive, "Active: in use by its owner"},
      {Kind::kIdle, "Idle: released, kept for reuse"},
      {Kind::kTransition, "Creating/Reclaiming/Deleting: changing"},
      {Kind::kError, "Error: destroy failed, retried"},
      {Kind::kForeign, "foreign: not created by migd, preserved"},
      {Kind::kFree, "free: no instance"},
  };
  std::string out = "legend:";
  for (size_t i = 0; i < std::size(kLegend); ++i) {
    const Entry& e = kLegend[i];
    out += i == 0 ? " " : i % 2 == 0 ? "\n        " : "  ";
    if (color) out += std::string(Sgr(e.kind)) + "  " + std::string(kReset) + " ";
    out += e.text;
  }
  return out + "\n";
}

}  // namespace

std::string RenderStatus(const migd::v1::ListResponse& list,
                         const migd::v1::GetStatusResponse& status, const RenderOptions& options) {
  std::string out = RenderHeader(list, status);
  std::map<uint32_t, const migd::v1::GpuStatus*> by_index;
  for (const migd::v1::GpuStatus& gs : status.gpus()) by_index[gs.gpu().index()] = &gs;
  Totals node;
  int mig_gpus = 0;
  for (const migd::v1::Gpu& gpu : list.gpus()) {
    const auto it = by_index.find(gpu.index());
    out += RenderGpu(gpu, list, it == by_index.end() ? nullptr : it->second, options, &node);
    if (gpu.mig_enabled()) ++mig_gpus;
  }
  out += RenderOrphans(list);
  out += "\nnode: " + std::to_string(node.free) + " free, " + std::to_string(node.idle) +
         " idle, " + std::to_string(node.active) + " active, " + std::to_string(node.foreign) +
         " foreign slices on " + std::to_string(mig_gpus) + " MIG-enabled GPU" +
         (mig_gpus == 1 ? "" : "s") + "; instances: " + std::to_string(status.instances_active()) +
         " active, " + std::to_string(status.instances_idle()) + " idle, " +
         std::to_string(status.instances_error()) + " error, " +
         std::to_string(status.instances_foreign()) + " foreign\n";
  return out + RenderLegend(options.color);
}

}  // namespace migd::cli
