// NvmlDriver against the simulator's NVML C ABI (libnvidia-ml-sim.so), loaded
// by path exactly like the real libnvidia-ml.so.1: profiles compared with the
// catalogue, every maximal layout created and destroyed with explicit
// placements, NVML error codes and names, IN_USE with attached processes,
// persistence across processes (migctl as a child), injected faults, the
// v3 -> v2 profile-info fallback, the R470 library through the v1 fallbacks,
// and the exact NVML call counts of one create and one destroy.
//
// Each test uses its own state file in a temp dir; the simulator reads its
// MIGD_SIM_* variables at every nvmlInit that takes its reference count from
// 0 to 1, so they are set before the session opens and the session is closed
// after each test. Tests whose faults count calls ("@N", numbered per
// process) run in a process of their own (MIGD_RUN_IN_FRESH_PROCESS).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <absl/strings/ascii.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "mig/catalog.h"
#include "mig/layout.h"
#include "sim/config.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::driver {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

const GpuIndex kGpu0(0);

using ::migd::driver::sim_testing::ClearSimEnv;
using ::migd::driver::sim_testing::Delta;
using ::migd::driver::sim_testing::Get;
using ::migd::driver::sim_testing::ToCallCounts;
// Call counters (ours or the simulator's): (function, result) -> count.
using Counts = ::migd::driver::sim_testing::CallCounts;

using ChildResult = ::migd::testing::CommandResult;

// migctl with this process's environment, output captured in `dir`.
ChildResult RunChild(const std::vector<std::string>& argv, const migd::testing::TempDir& dir) {
  return ::migd::testing::RunCommand(argv, dir.path());
}

class NvmlSimTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearSimEnv(); }
  void TearDown() override {
    Stop();
    ClearSimEnv();
  }

  // Creates the simulated machine `gpus` (on first use of the state file) and
  // opens a session on `library`.
  void Start(const std::string& gpus, const char* library = MIGD_SIM_LIBRARY,
             const std::map<std::string, std::string>& extra_env = {}) {
    setenv("MIGD_SIM_STATE", state_path().c_str(), 1);
    setenv("MIGD_SIM_GPUS", gpus.c_str(), 1);
    setenv("MIGD_SIM_FSYNC", "0", 1);
    for (const auto& [k, v] : extra_env) setenv(k.c_str(), v.c_str(), 1);
    Open(library);
  }
  void Open(const char* library = MIGD_SIM_LIBRARY) {
    auto lib = NvmlLibrary::Load(library);
    ASSERT_TRUE(lib.ok()) << lib.status();
    session_ = std::make_shared<NvmlSession>(*lib);
    ASSERT_THAT(session_->Open(), IsOk());
    driver_ = std::make_unique<NvmlDriver>(session_);
  }
  // Closes the session and unloads the library.
  void Stop() {
    driver_.reset();
    if (session_ != nullptr) {
      EXPECT_THAT(session_->Close(), IsOk());
    }
    session_.reset();
  }

  std::string state_path() const { return dir_.Join("state.json"); }

  // The simulator's own counters ("counters" of the state file).
  Counts SimCounts() const {
    Counts c;
    auto text = ReadFileToString(state_path());
    if (!text.ok()) return c;
    const nlohmann::json doc = nlohmann::json::parse(*text);
    for (const auto& [fn, results] : doc.at("counters").items()) {
      for (const auto& [res, n] : results.items()) c[{fn, res}] = n.get<uint64_t>();
    }
    return c;
  }
  Counts OurCounts() const { return ToCallCounts(driver_->CallCounts()); }

  // Calls an exported migdSim* control of the loaded simulator library.
  nvmlReturn_t AttachProcess(const MigUuid& mig, unsigned int pid, unsigned long long bytes,
                             const char* library = MIGD_SIM_LIBRARY) {
    return sim_testing::AttachProcess(library, mig.value(), pid, bytes);
  }
  nvmlReturn_t DetachProcess(const MigUuid& mig, unsigned int pid) {
    return sim_testing::DetachProcess(MIGD_SIM_LIBRARY, mig.value(), pid);
  }

  // Creates a GI and its default CI.
  std::pair<GpuInstanceInfo, ComputeInstanceInfo> CreatePair(GiProfileId profile,
                                                             mig::Placement placement) {
    auto gi = driver_->CreateGi(kGpu0, profile, placement);
    EXPECT_TRUE(gi.ok()) << gi.status();
    if (!gi.ok()) return {};
    auto ci = driver_->CreateCi(kGpu0, gi->id);
    EXPECT_TRUE(ci.ok()) << ci.status();
    if (!ci.ok()) return {*gi, {}};
    return {*gi, *ci};
  }

  migd::testing::TempDir dir_;
  std::shared_ptr<NvmlSession> session_;
  std::unique_ptr<NvmlDriver> driver_;
};

// ---- Per-model tests -------------------------------------------------------

class NvmlSimModelTest : public NvmlSimTest, public ::testing::WithParamInterface<std::string> {
 protected:
  const mig::GpuModel& model() const {
    const mig::GpuModel* m = mig::Catalog::Default().FindModel(GetParam());
    EXPECT_NE(m, nullptr) << GetParam();
    return *m;
  }
};

TEST_P(NvmlSimModelTest, ListsGpuAndProfilesLikeTheCatalogue) {
  Start(GetParam() + ":1");
  const mig::GpuModel& m = model();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 1u);
  const GpuInfo& g = gpus[0];
  EXPECT_TRUE(IsValidGpuUuid(g.uuid.value())) << g.uuid;
  EXPECT_THAT(m.names, ::testing::Contains(g.name));
  EXPECT_THAT(m.pci_device_ids, ::testing::Contains(g.pci_device_id));
  EXPECT_FALSE(g.pci_bus_id.empty());
  EXPECT_EQ(g.memory_total_mib, m.memory_mib);
  EXPECT_TRUE(g.mig.supported);
  EXPECT_EQ(g.mig.current, MigMode::kEnabled);

  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(kGpu0));
  ASSERT_EQ(profiles.size(), m.gi_profiles.size());
  for (const GiProfileInfo& p : profiles) {
    SCOPED_TRACE(p.name);
    const mig::GiProfile* k = m.FindProfileById(p.id);
    ASSERT_NE(k, nullptr) << "profile id " << p.id;
    EXPECT_EQ(p.index, k->index);
    EXPECT_EQ(m.FindProfileByName(p.name), k);  // name or alias, "MIG " stripped
    EXPECT_EQ(p.slice_count, k->slice_count);
    EXPECT_EQ(p.instance_count, k->instance_count);
    EXPECT_EQ(p.memory_mib, k->memory_mib);
    EXPECT_EQ(p.multiprocessor_count, k->sm_count);
    EXPECT_EQ(p.copy_engines, k->engines.copy_engines);
    EXPECT_EQ(p.decoders, k->engines.decoders);
    EXPECT_EQ(p.encoders, k->engines.encoders);
    EXPECT_EQ(p.jpeg, k->engines.jpeg);
    EXPECT_EQ(p.ofa, k->engines.ofa);
    EXPECT_EQ(p.gfx_capable, k->variant == mig::Variant::kGfx);
    EXPECT_EQ(p.info_version, 3);
    EXPECT_EQ(p.placements, k->placements);
    MIGD_ASSERT_OK_AND_ASSIGN(auto placements, driver_->GetGiPossiblePlacements(kGpu0, p.id));
    EXPECT_EQ(placements, k->placements);
  }
  MIGD_ASSERT_OK_AND_ASSIGN(auto none, driver_->ListGpuInstances(kGpu0));
  EXPECT_THAT(none, IsEmpty());
}

TEST_P(NvmlSimModelTest, CreatesAndDestroysEveryMaximalLayout) {
  Start(GetParam() + ":1");
  const mig::GpuModel& m = model();
  const auto base = mig::ProfilesOfVariants(m, {mig::Variant::kBase});
  std::vector<mig::Layout> maximal;
  for (mig::Layout& l : mig::EnumerateLayouts(m, base)) {
    if (!l.instances().empty() && l.IsMaximal(base)) maximal.push_back(std::move(l));
  }
  // mig-hardware.md §4: 19 maximal layouts on 8-unit GPUs, 5 on A30/RTX PRO.
  EXPECT_EQ(maximal.size(), m.memory_slices == 8 ? 19u : 5u);

  std::set<std::string> uuids_seen;
  for (const mig::Layout& layout : maximal) {
    SCOPED_TRACE(layout.ToString());
    using Key = std::pair<uint32_t, mig::Placement>;
    std::vector<Key> want;
    std::map<uint32_t, ComputeInstanceInfo> cis_by_gi;
    for (const mig::PlacedGi& pg : layout.instances()) {
      MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(kGpu0, pg.profile->id, pg.placement));
      EXPECT_EQ(gi.placement, pg.placement);
      EXPECT_EQ(gi.profile_id, pg.profile->id);
      MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(kGpu0, gi.id));
      if (const mig::CiProfile* def = pg.profile->DefaultCi()) {
        EXPECT_EQ(ci.profile_id, def->id);
      }
      EXPECT_EQ(ci.placement, (mig::Placement{0, pg.profile->slice_count}));
      EXPECT_TRUE(IsValidMigUuid(ci.mig_uuid.value())) << ci.mig_uuid;
      uuids_seen.insert(ci.mig_uuid.value());
      want.push_back({pg.profile->id.value(), pg.placement});
      cis_by_gi[gi.id.value()] = ci;
    }
    MIGD_ASSERT_OK_AND_ASSIGN(auto listed, driver_->ListGpuInstances(kGpu0));
    std::vector<Key> got;
    for (const GpuInstanceInfo& gi : listed) {
      got.push_back({gi.profile_id.value(), gi.placement});
      ASSERT_EQ(gi.compute_instances.size(), 1u) << "GI " << gi.id;
      EXPECT_EQ(gi.compute_instances[0].mig_uuid, cis_by_gi.at(gi.id.value()).mig_uuid);
      EXPECT_EQ(gi.compute_instances[0].id, cis_by_gi.at(gi.id.value()).id);
    }
    EXPECT_THAT(got, UnorderedElementsAreArray(want));
    EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end(),
                               [](const auto& a, const auto& b) { return a.id < b.id; }));
    for (const GpuInstanceInfo& gi : listed) {
      ASSERT_THAT(driver_->DestroyCi(kGpu0, gi.id, gi.compute_instances[0].id), IsOk());
      ASSERT_THAT(driver_->DestroyGi(kGpu0, gi.id), IsOk());
    }
    MIGD_ASSERT_OK_AND_ASSIGN(auto after, driver_->ListGpuInstances(kGpu0));
    EXPECT_THAT(after, IsEmpty());
  }
  EXPECT_GT(uuids_seen.size(), 1u);
}

std::string ModelName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, NvmlSimModelTest,
                         ::testing::Values("a100-40gb", "h100-80gb", "h200-141gb", "a30-24gb",
                                           "rtx-pro-6000-blackwell"),
                         ModelName);

// ---- Error codes -----------------------------------------------------------

TEST_F(NvmlSimTest, OverlapIsResourceExhausted) {
  Start("a100-40gb:1");
  CreatePair(GiProfileId(9), {4, 4});  // 3g@4
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(19), {5, 1}),
              StatusIs(StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("creating GI profile 19 at 5:1 on GPU 0"),
                             HasSubstr("NVML_ERROR_INSUFFICIENT_RESOURCES"))));
  // The instance cap: one 7g, one 4g.
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(5), {0, 4}), IsOk());
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(0), {0, 8}),
              StatusIs(StatusCode::kResourceExhausted,
                       HasSubstr("NVML_ERROR_INSUFFICIENT_RESOURCES")));
}

TEST_F(NvmlSimTest, UnlistedPlacementIsInvalidArgument) {
  Start("a100-40gb:1");
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(9), {2, 4}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("creating GI profile 9 at 2:4"),
                             HasSubstr("NVML_ERROR_INVALID_ARGUMENT"))));
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(19), {7, 1}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("NVML_ERROR_INVALID_ARGUMENT")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(kGpu0));
  EXPECT_THAT(gis, IsEmpty());
}

TEST_F(NvmlSimTest, MissingInstancesAreNotFound) {
  Start("a100-40gb:1");
  auto [gi, ci] = CreatePair(GiProfileId(19), {0, 1});
  EXPECT_THAT(driver_->DestroyGi(kGpu0, NvmlGiId(14)),
              StatusIs(StatusCode::kNotFound, HasSubstr("NVML_ERROR_NOT_FOUND")));
  EXPECT_THAT(driver_->DestroyCi(kGpu0, gi.id, NvmlCiId(5)),
              StatusIs(StatusCode::kNotFound, HasSubstr("looking up CI 5")));
  EXPECT_THAT(driver_->CreateCi(kGpu0, NvmlGiId(14)), StatusIs(StatusCode::kNotFound, ::testing::_));
  ASSERT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id), IsOk());
  EXPECT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id),
              StatusIs(StatusCode::kNotFound, ::testing::_));  // already gone
  ASSERT_THAT(driver_->DestroyGi(kGpu0, gi.id), IsOk());
  EXPECT_THAT(driver_->DestroyGi(kGpu0, gi.id), StatusIs(StatusCode::kNotFound, ::testing::_));
}

TEST_F(NvmlSimTest, DestroyWithProcessesKeepsInUse) {
  Start("h100-80gb:1");
  auto [gi, ci] = CreatePair(GiProfileId(14), {2, 2});
  ASSERT_EQ(AttachProcess(ci.mig_uuid, 4242, 3ull << 30), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(kGpu0, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 4242u);
  EXPECT_EQ(procs[0].used_gpu_memory_bytes, 3ull << 30);
  EXPECT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("destroying CI"), HasSubstr("NVML_ERROR_IN_USE"))));
  EXPECT_THAT(driver_->DestroyGi(kGpu0, gi.id),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_IN_USE")));
  ASSERT_EQ(DetachProcess(ci.mig_uuid, 4242), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto none, driver_->ListProcesses(kGpu0, gi.id, ci.id));
  EXPECT_THAT(none, IsEmpty());
  EXPECT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id), IsOk());
  EXPECT_THAT(driver_->DestroyGi(kGpu0, gi.id), IsOk());
}

TEST_F(NvmlSimTest, DoubleMemoryOneSliceGetsRev1ComputeInstance) {
  Start("h100-80gb:1");
  auto [gi, ci] = CreatePair(GiProfileId(15), {6, 2});
  EXPECT_EQ(ci.profile_id, CiProfileId(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(kGpu0, gi.id));
  EXPECT_THAT(cis, ::testing::Contains(::testing::Field(&CiProfileInfo::index,
                                                        CiProfileIndex(7))));
}

TEST_F(NvmlSimTest, MigOffGpuSaysSoAndStillListsProfiles) {
  Start("a100-40gb:1:mig-off");
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_TRUE(gpus[0].mig.supported);
  EXPECT_EQ(gpus[0].mig.current, MigMode::kDisabled);
  EXPECT_THAT(driver_->GetGiProfiles(kGpu0),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("MIG mode is disabled")));
  EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(19), {0, 1}),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("NVML_ERROR_NOT_SUPPORTED")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfilesWithoutMig(kGpu0));
  EXPECT_EQ(profiles.size(),
            mig::Catalog::Default().FindModel("a100-40gb")->gi_profiles.size());
}

// ---- Persistence -----------------------------------------------------------

TEST_F(NvmlSimTest, StateSurvivesANewSessionAndANewProcess) {
  Start("a100-40gb:1");
  auto [gi, ci] = CreatePair(GiProfileId(9), {0, 4});
  MIGD_ASSERT_OK_AND_ASSIGN(auto bare, driver_->CreateGi(kGpu0, GiProfileId(19), {5, 1}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto before, driver_->ListGpuInstances(kGpu0));
  Stop();

  // A new process: migctl probe, read-only.
  const ChildResult probe = RunChild(
      {MIGD_MIGCTL, "probe", "--nvml-library", MIGD_SIM_LIBRARY, "-o", "json",
       "--compare-catalog"},
      dir_);
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const nlohmann::json doc = nlohmann::json::parse(probe.out);
  ASSERT_EQ(doc["gpus"].size(), 1u);
  const auto& instances = doc["gpus"][0]["instances"];
  ASSERT_EQ(instances.size(), 2u);
  EXPECT_EQ(instances[0]["gi_id"], std::min(gi.id.value(), bare.id.value()));
  bool found_pair = false;
  for (const auto& i : instances) {
    if (i["gi_id"] == gi.id.value()) {
      EXPECT_EQ(i["placement"]["start"], 0);
      EXPECT_EQ(i["placement"]["size"], 4);
      EXPECT_EQ(i["profile_name"], "3g.20gb");
      ASSERT_EQ(i["compute_instances"].size(), 1u);
      EXPECT_EQ(i["compute_instances"][0]["mig_uuid"], ci.mig_uuid.value());
      found_pair = true;
    } else {
      EXPECT_EQ(i["gi_id"], bare.id.value());
      EXPECT_THAT(i["compute_instances"], IsEmpty());
    }
  }
  EXPECT_TRUE(found_pair);
  EXPECT_EQ(doc["gpus"][0]["catalog"]["identical"], true);

  // `migctl sim-stats` reads the counters the child and this process left.
  const ChildResult stats =
      RunChild({MIGD_MIGCTL, "sim-stats", "--state", state_path(), "-o", "json"}, dir_);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const nlohmann::json counters = nlohmann::json::parse(stats.out)["counters"];
  EXPECT_EQ(counters["nvmlDeviceCreateGpuInstanceWithPlacement"]["SUCCESS"], 2);
  EXPECT_EQ(counters["nvmlInit_v2"]["SUCCESS"], 2);  // this process + migctl probe
  EXPECT_EQ(counters["nvmlShutdown"]["SUCCESS"], 2);
  EXPECT_FALSE(counters.contains("nvmlDeviceSetMigMode"));
  EXPECT_FALSE(counters.contains("nvmlGpuInstanceDestroy"));  // probe is read-only

  // A fresh session in this process sees the same instances.
  Open();
  MIGD_ASSERT_OK_AND_ASSIGN(auto after, driver_->ListGpuInstances(kGpu0));
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].id, before[i].id);
    EXPECT_EQ(after[i].placement, before[i].placement);
    ASSERT_EQ(after[i].compute_instances.size(), before[i].compute_instances.size());
    if (!after[i].compute_instances.empty()) {
      EXPECT_EQ(after[i].compute_instances[0].mig_uuid, before[i].compute_instances[0].mig_uuid);
    }
  }
}

// What the simulator answers where nvml.h is silent, under the variant this
// suite runs in (tests/sim_variants sets the knobs; the fixture keeps them):
// the hardware check records exactly that answer.
struct HeaderOpenAnswers {
  std::string parent_instance_id;  // Get{Gpu,Compute}InstanceId of a GPU handle
  std::string legacy_uuid_lookup;  // GetHandleByUUID("MIG-GPU-<uuid>/<gi>/<ci>")
};
HeaderOpenAnswers ExpectedHeaderOpenAnswers() {
  const StatusOr<migd::sim::SimConfig> config =
      migd::sim::SimConfigFromEnv(mig::Catalog::Default());
  EXPECT_THAT(config.status(), IsOk());
  HeaderOpenAnswers a{"ERROR_NOT_SUPPORTED", "SUCCESS"};
  if (!config.ok()) return a;
  if (config->parent_instance_id == migd::sim::ParentInstanceIdAnswer::kInvalidArgument) {
    a.parent_instance_id = "ERROR_INVALID_ARGUMENT";
  }
  switch (config->legacy_mig_uuid) {
    case migd::sim::LegacyMigUuidLookup::kAccepted: break;
    case migd::sim::LegacyMigUuidLookup::kNotFound: a.legacy_uuid_lookup = "ERROR_NOT_FOUND"; break;
    case migd::sim::LegacyMigUuidLookup::kInvalidArgument:
      a.legacy_uuid_lookup = "ERROR_INVALID_ARGUMENT";
      break;
  }
  return a;
}

// scripts/hardware-check.sh against the simulator: it records the walk, the
// instance info's .device UUIDs and the UUID lookups (the answers of the
// simulator variant in effect), and mutates nothing (the simulator's
// counters of every mutating call stay as they were).
TEST_F(NvmlSimTest, HardwareCheckScriptMutatesNothing) {
  Start("h100-80gb:1,a30-24gb:1:mig-off");
  const HeaderOpenAnswers expected = ExpectedHeaderOpenAnswers();
  const ComputeInstanceInfo ci = CreatePair(GiProfileId(9), {0, 4}).second;
  const ComputeInstanceInfo ci2 = CreatePair(GiProfileId(19), {6, 1}).second;
  ASSERT_THAT(driver_->CreateGi(kGpu0, GiProfileId(19), {5, 1}).status(), IsOk());  // no CI
  ASSERT_EQ(AttachProcess(ci.mig_uuid, 4242, 1ull << 20), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gpus, driver_->ListGpus());
  const std::string gpu_uuid = gpus[0].uuid.value();
  Stop();
  const std::string state_before = *ReadFileToString(state_path());
  const Counts before = SimCounts();

  migd::testing::TempDir out;
  const ChildResult run = RunChild({"/bin/bash", MIGD_HARDWARE_CHECK, "--migctl", MIGD_MIGCTL,
                                    "--nvml-library", MIGD_SIM_LIBRARY, "--out", out.path()},
                                   dir_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string file = std::string(absl::StripTrailingAsciiWhitespace(run.out));
  EXPECT_EQ(std::filesystem::path(file).parent_path(), std::filesystem::path(out.path()));
  EXPECT_THAT(file, ::testing::EndsWith(".json"));
  EXPECT_THAT(file, HasSubstr("-580.95.05-"));  // the driver version in the name
  MIGD_ASSERT_OK_AND_ASSIGN(const std::string text, ReadFileToString(file));
  const nlohmann::json doc = nlohmann::json::parse(text);

  // Nothing changed: no mutating call, the same machine.
  const Counts delta = Delta(before, SimCounts());
  for (const char* fn :
       {"nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
        "nvmlGpuInstanceDestroy", "nvmlGpuInstanceCreateComputeInstance",
        "nvmlGpuInstanceCreateComputeInstanceWithPlacement", "nvmlComputeInstanceDestroy",
        "nvmlDeviceSetMigMode", "migdSimAttachProcess", "migdSimDetachProcess", "migdSimReboot"}) {
    for (const auto& [key, n] : delta) EXPECT_NE(key.first, fn) << n << " call(s)";
  }
  EXPECT_GT(Get(delta, "nvmlDeviceGetMigDeviceHandleByIndex", "SUCCESS"), 0u);  // it did run
  nlohmann::json state_after = nlohmann::json::parse(*ReadFileToString(state_path()));
  nlohmann::json state_was = nlohmann::json::parse(state_before);
  state_after.erase("counters");
  state_was.erase("counters");
  EXPECT_EQ(state_after, state_was);

  // What it recorded.
  ASSERT_EQ(doc["gpus"].size(), 2u);
  const nlohmann::json& hw = doc["gpus"][0]["hardware_check"];
  EXPECT_EQ(hw["max_mig_device_count"], 7);
  ASSERT_EQ(hw["walk"].size(), 7u);
  EXPECT_EQ(hw["second_walk_identical"], true);
  EXPECT_EQ(hw["parent_gpu_instance_id"], expected.parent_instance_id);
  int found = 0;
  for (const auto& w : hw["walk"]) found += w["result"] == "SUCCESS" ? 1 : 0;
  EXPECT_EQ(found, 2);
  ASSERT_EQ(hw["compute_instances"].size(), 2u);  // the bare GI has no MIG device
  std::set<std::string> uuids;
  for (const auto& c : hw["compute_instances"]) {
    EXPECT_EQ(c["walk_hits"], 1);
    EXPECT_EQ(c["ci_info_device_uuid"], gpu_uuid);  // "Parent device"
    EXPECT_EQ(c["ci_info_device_is_parent"], true);
    EXPECT_EQ(c["gi_info_device_is_parent"], true);
    EXPECT_EQ(c["handle_by_uuid"], "SUCCESS");
    EXPECT_EQ(c["handle_by_uuid_matches"], true);
    EXPECT_EQ(c["handle_by_legacy_uuid"], expected.legacy_uuid_lookup);
    uuids.insert(c["mig_uuid"].get<std::string>());
  }
  EXPECT_EQ(uuids, (std::set<std::string>{ci.mig_uuid.value(), ci2.mig_uuid.value()}));
  // The MIG-off GPU has no hardware_check section (no MIG devices to walk).
  EXPECT_FALSE(doc["gpus"][1].contains("hardware_check"));
}

// ---- Fault injection --------------------------------------------------------

// MIGD_SIM_FAULTS "@N" counts the calls of a function per process for as long
// as the simulator stays loaded, i.e. for the whole test binary (NvmlLibrary
// never unloads NVML, and a fork()ed child inherits the numbers). A test with
// an @N rule therefore runs again, alone, in a new process.
TEST_F(NvmlSimTest, InjectedFaultsSurfaceWithTheirNvmlName) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("a100-40gb:1", MIGD_SIM_LIBRARY,
        {{"MIGD_SIM_FAULTS", "nvmlGpuInstanceDestroy=IN_USE@2"}});
  auto [a, a_ci] = CreatePair(GiProfileId(19), {0, 1});
  auto [b, b_ci] = CreatePair(GiProfileId(19), {1, 1});
  ASSERT_THAT(driver_->DestroyCi(kGpu0, a.id, a_ci.id), IsOk());
  ASSERT_THAT(driver_->DestroyCi(kGpu0, b.id, b_ci.id), IsOk());
  EXPECT_THAT(driver_->DestroyGi(kGpu0, a.id), IsOk());  // 1st call
  EXPECT_THAT(driver_->DestroyGi(kGpu0, b.id),           // 2nd call: injected
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("destroying GI"),
                             HasSubstr("NVML_ERROR_IN_USE (In use by another client)"))));
  EXPECT_THAT(driver_->DestroyGi(kGpu0, b.id), IsOk());  // 3rd call
  EXPECT_EQ(Get(SimCounts(), "nvmlGpuInstanceDestroy", "ERROR_IN_USE"), 1u);
  EXPECT_EQ(Get(OurCounts(), "nvmlGpuInstanceDestroy", "ERROR_IN_USE"), 1u);
}

TEST_F(NvmlSimTest, FaultAfterCiCreationRollsTheCiBack) {
  MIGD_RUN_IN_FRESH_PROCESS();
  Start("h100-80gb:1", MIGD_SIM_LIBRARY,
        {{"MIGD_SIM_FAULTS", "nvmlComputeInstanceGetInfo_v2=GPU_IS_LOST@1"}});
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(kGpu0, GiProfileId(9), {4, 4}));
  EXPECT_THAT(driver_->CreateCi(kGpu0, gi.id),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("NVML_ERROR_GPU_IS_LOST"),
                             HasSubstr("the new CI was destroyed"))));
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(kGpu0));
  ASSERT_EQ(gis.size(), 1u);
  EXPECT_THAT(gis[0].compute_instances, IsEmpty());
  EXPECT_EQ(Get(SimCounts(), "nvmlComputeInstanceDestroy", "SUCCESS"), 1u);
  // A second try succeeds (the fault was @1 only).
  EXPECT_THAT(driver_->CreateCi(kGpu0, gi.id), IsOk());
}

TEST_F(NvmlSimTest, CreateFaultOnEveryCall) {
  Start("a100-40gb:1", MIGD_SIM_LIBRARY,
        {{"MIGD_SIM_FAULTS", "nvmlDeviceCreateGpuInstanceWithPlacement=NO_PERMISSION"}});
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(driver_->CreateGi(kGpu0, GiProfileId(0), {0, 8}),
                StatusIs(StatusCode::kPermissionDenied, HasSubstr("NVML_ERROR_NO_PERMISSION")));
  }
}

// ---- Struct and symbol fallbacks ---------------------------------------------

TEST_F(NvmlSimTest, ProfileInfoFallsBackFromV3ToV2) {
  Start("h100-80gb:1", MIGD_SIM_LIBRARY, {{"MIGD_SIM_PROFILE_INFO_MAX_VERSION", "2"}});
  const mig::GpuModel& m = *mig::Catalog::Default().FindModel("h100-80gb");
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(kGpu0));
  ASSERT_EQ(profiles.size(), m.gi_profiles.size());
  for (const GiProfileInfo& p : profiles) {
    SCOPED_TRACE(p.name);
    const mig::GiProfile* k = m.FindProfileById(p.id);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(p.info_version, 2);
    // Decoded with the v2 layout: a v3 decode would shift every field.
    EXPECT_EQ(m.FindProfileByName(p.name), k);
    EXPECT_EQ(p.slice_count, k->slice_count);
    EXPECT_EQ(p.instance_count, k->instance_count);
    EXPECT_EQ(p.memory_mib, k->memory_mib);
    EXPECT_EQ(p.multiprocessor_count, k->sm_count);
    EXPECT_EQ(p.ofa, k->engines.ofa);
  }
  // The v3 word was rejected once, then v2 was used for every index.
  const Counts ours = OurCounts();
  uint64_t rejected = 0;
  for (const auto& [key, n] : ours) {
    if (key.first == "nvmlDeviceGetGpuInstanceProfileInfoV" &&
        (key.second == "ERROR_INVALID_ARGUMENT" ||
         key.second == "ERROR_ARGUMENT_VERSION_MISMATCH")) {
      rejected += n;
    }
  }
  EXPECT_EQ(rejected, 2u);  // the v3 rejection + the end of the index walk
  // CI profile info falls back the same way; the default CIs are right.
  auto [gi, ci] = CreatePair(GiProfileId(15), {0, 2});
  EXPECT_EQ(ci.profile_id, CiProfileId(7));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(kGpu0, gi.id));
  for (const CiProfileInfo& c : cis) EXPECT_EQ(c.info_version, 2);
  auto [gi3, ci3] = CreatePair(GiProfileId(9), {4, 4});
  EXPECT_EQ(ci3.profile_id, CiProfileId(2));
  EXPECT_EQ(ci3.placement, (mig::Placement{0, 3}));
}

TEST_F(NvmlSimTest, LegacyR470LibraryWorksThroughV1Fallbacks) {
  Start("a100-40gb:1", MIGD_SIM_LEGACY_LIBRARY);
  std::map<std::string, std::string> bound;
  for (const NvmlBinding& b : driver_->Bindings()) bound[b.function] = b.bound;
  EXPECT_EQ(bound["nvmlDeviceGetGpuInstanceProfileInfoV"], "nvmlDeviceGetGpuInstanceProfileInfo");
  EXPECT_EQ(bound["nvmlGpuInstanceGetComputeInstanceProfileInfoV"],
            "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  EXPECT_EQ(bound["nvmlDeviceGetComputeRunningProcesses_v3"],
            "nvmlDeviceGetComputeRunningProcesses_v2");
  EXPECT_EQ(bound["nvmlDeviceCreateGpuInstanceWithPlacement"],
            "nvmlDeviceCreateGpuInstanceWithPlacement");
  MIGD_ASSERT_OK_AND_ASSIGN(auto versions, driver_->GetVersions());
  EXPECT_THAT(versions.driver, ::testing::StartsWith("470."));

  const mig::GpuModel& m = *mig::Catalog::Default().FindModel("a100-40gb");
  MIGD_ASSERT_OK_AND_ASSIGN(auto profiles, driver_->GetGiProfiles(kGpu0));
  // R470 (the NVML 11.4 header) knows profile indices 0..7 only.
  size_t known = 0;
  for (const mig::GiProfile& k : m.gi_profiles) known += k.index.value() <= 7 ? 1 : 0;
  ASSERT_EQ(profiles.size(), known);
  ASSERT_LT(known, m.gi_profiles.size());  // A100-40GB's 1g.10gb is index 9
  for (const GiProfileInfo& p : profiles) {
    const mig::GiProfile* k = m.FindProfileById(p.id);
    ASSERT_NE(k, nullptr);
    EXPECT_LE(p.index.value(), 7u);
    EXPECT_EQ(p.info_version, 1);
    EXPECT_EQ(p.name, "");  // the v1 struct has no name
    EXPECT_EQ(p.slice_count, k->slice_count);
    EXPECT_EQ(p.memory_mib, k->memory_mib);
    EXPECT_EQ(p.placements, k->placements);
  }
  auto [gi, ci] = CreatePair(GiProfileId(14), {2, 2});
  EXPECT_EQ(ci.profile_id, CiProfileId(1));
  EXPECT_TRUE(IsValidMigUuid(ci.mig_uuid.value()));
  MIGD_ASSERT_OK_AND_ASSIGN(auto cis, driver_->GetCiProfiles(kGpu0, gi.id));
  for (const CiProfileInfo& c : cis) EXPECT_EQ(c.info_version, 1);
  ASSERT_EQ(AttachProcess(ci.mig_uuid, 99, 1ull << 20, MIGD_SIM_LEGACY_LIBRARY), NVML_SUCCESS);
  MIGD_ASSERT_OK_AND_ASSIGN(auto procs, driver_->ListProcesses(kGpu0, gi.id, ci.id));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 99u);
  MIGD_ASSERT_OK_AND_ASSIGN(auto gis, driver_->ListGpuInstances(kGpu0));
  ASSERT_EQ(gis.size(), 1u);
  ASSERT_EQ(gis[0].compute_instances.size(), 1u);
  EXPECT_EQ(gis[0].compute_instances[0].mig_uuid, ci.mig_uuid);
  const Counts ours = OurCounts();
  EXPECT_EQ(Get(ours, "nvmlDeviceGetGpuInstanceProfileInfoV", "SUCCESS"), 0u);
  EXPECT_GT(Get(ours, "nvmlDeviceGetGpuInstanceProfileInfo", "SUCCESS"), 0u);
  EXPECT_GT(Get(ours, "nvmlDeviceGetComputeRunningProcesses_v2", "INSUFFICIENT_SIZE") +
                Get(ours, "nvmlDeviceGetComputeRunningProcesses_v2", "SUCCESS"),
            0u);
}

// ---- Exact call counts ----------------------------------------------------------

TEST_F(NvmlSimTest, ExactNvmlCallsForOneCreateAndOneDestroy) {
  // The budget of a CI the walk sees at once (other variants: see
  // tests/sim_variants).
  Start("h100-80gb:1", MIGD_SIM_LIBRARY, {{"MIGD_SIM_NEW_CI_VISIBILITY", "immediate"}});
  // Warm the GPU handle and the profile caches (GI and CI) of profile 9.
  ASSERT_THAT(driver_->GetGiProfiles(kGpu0), IsOk());
  auto [warm, warm_ci] = CreatePair(GiProfileId(9), {0, 4});

  Counts ours = OurCounts();
  Counts sim = SimCounts();
  const uint64_t total = driver_->TotalCalls();
  MIGD_ASSERT_OK_AND_ASSIGN(auto gi, driver_->CreateGi(kGpu0, GiProfileId(9), {4, 4}));
  MIGD_ASSERT_OK_AND_ASSIGN(auto ci, driver_->CreateCi(kGpu0, gi.id));
  const Counts create = {
      {{"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceGetInfo", "SUCCESS"}, 2},
      {{"nvmlDeviceGetGpuInstanceById", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceCreateComputeInstance", "SUCCESS"}, 1},
      {{"nvmlComputeInstanceGetInfo_v2", "SUCCESS"}, 1},
      // The MIG-device walk: H100's 7 indices, 2 of them MIG devices, whose
      // ids are read; then the new one's UUID.
      {{"nvmlDeviceGetMigDeviceHandleByIndex", "SUCCESS"}, 2},
      {{"nvmlDeviceGetMigDeviceHandleByIndex", "ERROR_NOT_FOUND"}, 5},
      {{"nvmlDeviceGetGpuInstanceId", "SUCCESS"}, 2},
      {{"nvmlDeviceGetComputeInstanceId", "SUCCESS"}, 2},
      {{"nvmlDeviceGetUUID", "SUCCESS"}, 1},
  };
  EXPECT_EQ(Delta(ours, OurCounts()), create);
  EXPECT_EQ(Delta(sim, SimCounts()), create);  // the simulator saw the same calls
  EXPECT_EQ(driver_->TotalCalls() - total, 18u);

  ours = OurCounts();
  sim = SimCounts();
  ASSERT_THAT(driver_->DestroyCi(kGpu0, gi.id, ci.id), IsOk());
  ASSERT_THAT(driver_->DestroyGi(kGpu0, gi.id), IsOk());
  const Counts destroy = {
      {{"nvmlDeviceGetGpuInstanceById", "SUCCESS"}, 2},
      {{"nvmlGpuInstanceGetComputeInstanceById", "SUCCESS"}, 1},
      {{"nvmlComputeInstanceDestroy", "SUCCESS"}, 1},
      {{"nvmlGpuInstanceDestroy", "SUCCESS"}, 1},
  };
  EXPECT_EQ(Delta(ours, OurCounts()), destroy);
  EXPECT_EQ(Delta(sim, SimCounts()), destroy);
}

TEST_F(NvmlSimTest, InitAndShutdownExactlyOncePerSession) {
  Start("a100-40gb:1");
  ASSERT_THAT(driver_->ListGpus(), IsOk());
  ASSERT_THAT(driver_->ListGpuInstances(kGpu0), IsOk());
  EXPECT_EQ(driver_->library().CallCount(NvmlSymbol::kInitV2, NVML_SUCCESS), 1u);
  EXPECT_EQ(driver_->library().CallCount(NvmlSymbol::kShutdown, NVML_SUCCESS), 0u);
  Stop();
  Counts sim = SimCounts();
  EXPECT_EQ(Get(sim, "nvmlInit_v2", "SUCCESS"), 1u);
  EXPECT_EQ(Get(sim, "nvmlShutdown", "SUCCESS"), 1u);
  EXPECT_EQ(Get(sim, "nvmlInit", "SUCCESS"), 0u);

  Open();
  ASSERT_THAT(driver_->ListGpus(), IsOk());
  Stop();
  sim = SimCounts();
  EXPECT_EQ(Get(sim, "nvmlInit_v2", "SUCCESS"), 2u);
  EXPECT_EQ(Get(sim, "nvmlShutdown", "SUCCESS"), 2u);
}

}  // namespace
}  // namespace migd::driver
