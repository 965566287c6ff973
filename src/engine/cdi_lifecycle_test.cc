// The CDI lifecycle (docs/engine.md, "CDI publication") through the real
// stack: Manager + CdiObserver + cdi::Publisher over NvmlDriver on
// libnvidia-ml-sim.so, whose fake /proc tree (MIGD_SIM_PROC_ROOT) supplies
// the capability minors. A spec file exists exactly while its instance is
// Active, Idle or Error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_util.h"
#include "cdi/fake_host_reader.h"
#include "cdi/names.h"
#include "engine/cdi_observer.h"
#include "engine/manager_testing.h"
#include "testing/status_matchers.h"

namespace migd::engine {
namespace {

using ::testing::HasSubstr;

constexpr char kDevRoot[] = "/fake-dev";

class CdiLifecycleTest : public testing::SimHardwareTest {
 protected:
  void Init(const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = env;
    all["MIGD_SIM_PROC_ROOT"] = dir_->Join("proc");
    SimHardwareTest::Init(MIGD_SIM_LIBRARY, "a100-40gb:1", all);
    std::filesystem::create_directories(spec_dir());
    const std::string dev = kDevRoot;
    reader_.AddNode(dev + "/nvidia0", {'c', 195, 0, 0666});
    reader_.AddNode(dev + "/nvidiactl", {'c', 195, 255, 0666});
    reader_.AddNode(dev + "/nvidia-uvm", {'c', 511, 0, 0666});
    reader_.AddNode(dev + "/nvidia-uvm-tools", {'c', 511, 1, 0666});
    cdi::Options o;
    o.spec_dir = spec_dir();
    o.proc_root = dir_->Join("proc");
    o.dev_root = kDevRoot;
    o.sync = false;
    publisher_ = std::make_unique<cdi::Publisher>(o, &reader_);
    cdi_ = std::make_unique<CdiObserver>(publisher_.get());
    observer_ = cdi_.get();
  }
  std::string spec_dir() const { return dir_->Join("cdi"); }
  std::string SpecPath(const MigUuid& uuid) const {
    return spec_dir() + "/" + cdi::SpecFileName(cdi::Kind(), uuid.value());
  }
  bool HasSpec(const MigUuid& uuid) const {
    struct stat st {};
    return ::lstat(SpecPath(uuid).c_str(), &st) == 0;
  }
  static AllocateRequest Req(const std::string& id, const std::string& profile) {
    return testing::Req(id, {testing::Spec(profile)});
  }

  cdi::testing::FakeHostReader reader_;
  std::unique_ptr<cdi::Publisher> publisher_;
  std::unique_ptr<CdiObserver> cdi_;
};

TEST_F(CdiLifecycleTest, SpecWrittenBeforeAllocateReturnsKeptWhileIdleRemovedAfterDestroy) {
  Init();
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", "3g.20gb")));
  const InstanceView& inst = a.instances[0];
  ASSERT_TRUE(HasSpec(inst.mig_uuid));

  // The capability nodes carry the minors of the driver's table:
  // gpu0/gi<G>/access = 3 + 9·G, ci<C> = that + 1 + C.
  MIGD_ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(SpecPath(inst.mig_uuid)));
  const nlohmann::json spec = nlohmann::json::parse(text);
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "hami.io/mig");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], inst.mig_uuid.value());
  const uint32_t gi_minor = 3 + 9 * inst.gi_id.value();
  const uint32_t ci_minor = gi_minor + 1 + inst.ci_id.value();
  std::set<std::string> paths;
  for (const auto& n : spec["devices"][0]["containerEdits"]["deviceNodes"]) {
    paths.insert(n["path"].get<std::string>());
  }
  EXPECT_TRUE(paths.count("/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_minor))) << text;
  EXPECT_TRUE(paths.count("/dev/nvidia-caps/nvidia-cap" + std::to_string(ci_minor))) << text;
  ASSERT_TRUE(cdi_->SpecOf(inst.mig_uuid).has_value());

  MIGD_ASSERT_OK(mgr_->Release("a"));
  EXPECT_TRUE(HasSpec(inst.mig_uuid)) << "an Idle instance keeps its spec";

  // Reuse: the file is verified; a tampered file is rewritten.
  MIGD_ASSERT_OK(AtomicWriteFile(SpecPath(inst.mig_uuid), "{}", {.mode = 0644, .sync = false}));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("b", "3g.20gb")));
  EXPECT_EQ(b.instances[0].mig_uuid, inst.mig_uuid);
  MIGD_ASSERT_OK_AND_ASSIGN(std::string again, ReadFileToString(SpecPath(inst.mig_uuid)));
  EXPECT_EQ(again, text);

  MIGD_ASSERT_OK(mgr_->Release("b"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  ASSERT_EQ(r.destroyed.size(), 1u);
  EXPECT_FALSE(HasSpec(inst.mig_uuid)) << "removed after the GI/CI was destroyed";
  EXPECT_FALSE(cdi_->SpecOf(inst.mig_uuid).has_value());
}

TEST_F(CdiLifecycleTest, ErrorInstanceKeepsItsSpecUntilTheDestroySucceeds) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Init({{"MIGD_SIM_FAULTS", "nvmlGpuInstanceDestroy=IN_USE@1"}});
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", "2g.10gb")));
  const MigUuid uuid = a.instances[0].mig_uuid;
  MIGD_ASSERT_OK(mgr_->Release("a"));
  MIGD_ASSERT_OK_AND_ASSIGN(ReclaimResult r, mgr_->Reclaim({}));
  ASSERT_EQ(r.failed.size(), 1u);
  InstanceState state = InstanceState::kNone;
  for (const InstanceView& v : mgr_->List().instances) {
    if (v.mig_uuid == uuid) state = v.state;
  }
  EXPECT_EQ(state, InstanceState::kError);
  EXPECT_TRUE(HasSpec(uuid)) << "Error keeps the file until the hardware destroy succeeds";
  MIGD_ASSERT_OK(mgr_->ReconcileOnce().status());
  EXPECT_FALSE(HasSpec(uuid));
}

TEST_F(CdiLifecycleTest, StartupRemovesStraySpecsAndRewritesMissingOnes) {
  Init();
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", "1g.5gb")));
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("b", "1g.5gb")));
  MIGD_ASSERT_OK(mgr_->Release("b"));
  mgr_.reset();

  const MigUuid stray("MIG-11111111-2222-5333-8444-555555555555");
  MIGD_ASSERT_OK(AtomicWriteFile(SpecPath(stray), "{\"cdiVersion\":\"0.5.0\"}",
                                 {.mode = 0644, .sync = false}));
  MIGD_ASSERT_OK(RemoveFile(SpecPath(b.instances[0].mig_uuid)));
  const std::string foreign = spec_dir() + "/nvidia.yaml";
  MIGD_ASSERT_OK(AtomicWriteFile(foreign, "cdiVersion: 0.5.0\n", {.mode = 0644, .sync = false}));

  Start();
  EXPECT_FALSE(HasSpec(stray)) << "a spec of ours with no tracked instance is removed";
  EXPECT_TRUE(HasSpec(a.instances[0].mig_uuid));
  EXPECT_TRUE(HasSpec(b.instances[0].mig_uuid)) << "the Idle instance's spec is rewritten";
  EXPECT_TRUE(std::filesystem::exists(foreign)) << "other vendors' specs are left alone";
}

TEST_F(CdiLifecycleTest, APublishFailureFailsTheAllocationAndRollsItBack) {
  Init();
  Start();
  reader_.RemoveNode(std::string(kDevRoot) + "/nvidiactl");
  EXPECT_THAT(mgr_->Allocate(Req("a", "1g.5gb")).status(),
              migd::testing::StatusIs(StatusCode::kNotFound, HasSubstr("nvidiactl")));
  EXPECT_EQ(sim_->GiCount(), 0) << "the created instance was rolled back";
  EXPECT_TRUE(std::filesystem::is_empty(spec_dir()));
}

TEST_F(CdiLifecycleTest, ReuseVerifiesTheCachedSpecWithoutReadingHostFiles) {
  Init();
  Start();
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation a, mgr_->Allocate(Req("a", "3g.20gb")));
  const MigUuid uuid = a.instances[0].mig_uuid;
  MIGD_ASSERT_OK_AND_ASSIGN(std::string before, ReadFileToString(SpecPath(uuid)));
  MIGD_ASSERT_OK(mgr_->Release("a"));
  // A rebuild would now fail (the node is gone); the reuse must not need one.
  reader_.RemoveNode(std::string(kDevRoot) + "/nvidia-uvm");
  ASSERT_EQ(::unlink(SpecPath(uuid).c_str()), 0);
  MIGD_ASSERT_OK_AND_ASSIGN(Allocation b, mgr_->Allocate(Req("b", "3g.20gb")));
  ASSERT_EQ(b.instances[0].mig_uuid, uuid);
  // The deleted file was rewritten from the cached spec, byte for byte.
  MIGD_ASSERT_OK_AND_ASSIGN(std::string after, ReadFileToString(SpecPath(uuid)));
  EXPECT_EQ(after, before);
  // A new instance still builds from the host files, so it sees the loss.
  EXPECT_FALSE(mgr_->Allocate(Req("c", "1g.5gb")).ok());
}

}  // namespace
}  // namespace migd::engine
