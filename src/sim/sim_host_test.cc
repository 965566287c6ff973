#include "sim/sim_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "base/file_util.h"
#include "sim/proc_files.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::sim {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

bool Exists(const std::string& p) { return std::filesystem::exists(p); }

class SimHostTest : public ::testing::Test {
 protected:
  SimConfig Config(bool with_gpus = true) const {
    SimConfig c;
    c.state_path = dir_.Join("state.json");
    if (with_gpus) c.gpus = std::vector<GpuSpec>{{"h100-80gb", 1}, {"a30-24gb", 1}};
    c.proc_root = dir_.Join("proc");
    c.nonce = 9;
    c.fsync = false;
    return c;
  }
  std::string CapDir() const { return dir_.Join("proc/driver/nvidia/capabilities"); }
  migd::testing::TempDir dir_;
};

TEST_F(SimHostTest, OpenNeedsAStatePath) {
  SimConfig c;
  EXPECT_THAT(SimHost::Open(c),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIGD_SIM_STATE")));
}

TEST_F(SimHostTest, OpenNeedsGpusToCreate) {
  EXPECT_THAT(SimHost::Open(Config(/*with_gpus=*/false)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIGD_SIM_GPUS")));
  EXPECT_FALSE(Exists(dir_.Join("state.json")));
}

TEST_F(SimHostTest, CreatesTheMachineAndItsProcTreeOnce) {
  StatusOr<std::unique_ptr<SimHost>> host = SimHost::Open(Config());
  ASSERT_TRUE(host.ok()) << host.status();
  StatusOr<SimState> s = (*host)->Snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->proc_root, dir_.Join("proc"));
  EXPECT_TRUE(Exists(dir_.Join("proc/devices")));
  EXPECT_TRUE(Exists(dir_.Join("proc/driver/nvidia-caps/mig-minors")));
  EXPECT_TRUE(Exists(CapDir() + "/mig/config"));
  // A second open with other machine-shaping knobs keeps the file's machine.
  SimConfig other = Config();
  other.gpus = std::vector<GpuSpec>{{"b200-180gb", 4}};
  StatusOr<std::unique_ptr<SimHost>> again = SimHost::Open(other);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Snapshot()->gpus.size(), 2u);
  // And no GPUs needed once the file exists.
  EXPECT_THAT(SimHost::Open(Config(/*with_gpus=*/false)), IsOk());
}

TEST_F(SimHostTest, InstanceFilesFollowTransactionsAndReboot) {
  std::unique_ptr<SimHost> host = *SimHost::Open(Config());
  MigUuid uuid;
  ASSERT_THAT(host->Transact([&](Machine& m) {
    SimOr<SimGi> gi = m.CreateGi(GpuIndex(1), GiProfileId(5), mig::Placement{2, 2});  // GI 2
    EXPECT_TRUE(gi.ok());
    SimOr<SimCi> ci = m.CreateCi(GpuIndex(1), gi->id, CiProfileId(1), std::nullopt);
    EXPECT_TRUE(ci.ok());
    uuid = ci->uuid;
    return Commit::kDurable;
  }),
              IsOk());
  const std::string gi_dir = CapDir() + "/gpu1/mig/gi2";
  EXPECT_EQ(*ReadFileToString(gi_dir + "/access"),
            CapabilityFileContent(GiAccessMinor(1, 2), 292, 1));
  EXPECT_EQ(*ReadFileToString(gi_dir + "/ci0/access"),
            CapabilityFileContent(CiAccessMinor(1, 2, 0), 292, 1));

  // Processes: attach, then destroy is IN_USE, detach, destroy works.
  ASSERT_THAT(host->AttachProcess(uuid, 77, 1 << 20), IsOk());
  EXPECT_EQ(host->Snapshot()->gpus[1].gpu_instances[0].compute_instances[0].processes.size(), 1u);
  EXPECT_THAT(host->AttachProcess(MigUuid("MIG-00000000-0000-5000-8000-000000000000"), 1, 1),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(host->DetachProcess(uuid, 78), StatusIs(StatusCode::kNotFound, ::testing::_));
  ASSERT_THAT(host->DetachProcess(uuid, 77), IsOk());

  // A stale tree (e.g. after a crash between the two writes) is repaired on open.
  std::filesystem::remove_all(gi_dir);
  std::filesystem::create_directories(CapDir() + "/gpu1/mig/gi9/ci3");
  ASSERT_THAT(SimHost::Open(Config()), IsOk());
  EXPECT_TRUE(Exists(gi_dir + "/ci0/access"));
  EXPECT_FALSE(Exists(CapDir() + "/gpu1/mig/gi9"));

  ASSERT_THAT(host->Reboot(), IsOk());
  EXPECT_FALSE(Exists(gi_dir));
  StatusOr<SimState> s = host->Snapshot();
  EXPECT_EQ(s->boot_count, 1u);
  EXPECT_TRUE(s->gpus[1].gpu_instances.empty());
  EXPECT_TRUE(s->gpus[1].mig_current);
}

TEST_F(SimHostTest, CorruptStateFailsToOpen) {
  ASSERT_THAT(SimHost::Open(Config()), IsOk());
  AtomicWriteOptions w;
  w.sync = false;
  ASSERT_THAT(AtomicWriteFile(dir_.Join("state.json"), "{}", w), IsOk());
  EXPECT_THAT(SimHost::Open(Config()), StatusIs(StatusCode::kDataLoss, HasSubstr("corrupt")));
  EXPECT_EQ(*ReadFileToString(dir_.Join("state.json")), "{}");
}

}  // namespace
}  // namespace migd::sim
