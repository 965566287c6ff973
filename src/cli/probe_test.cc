#include "cli/probe.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/fault_injecting_driver.h"
#include "testing/status_matchers.h"

namespace migd::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Method = driver::FaultInjectingDriver::Method;

// Two GPUs: an A100-40GB with MIG on (profiles straight from the catalogue,
// one 3g GI with its CI and one 1g GI without CI) and one with MIG off.
class TwoGpuDriver : public driver::GpuDriver {
 public:
  StatusOr<driver::DriverVersions> GetVersions() override {
    return driver::DriverVersions{"580.95.05", "13.580.95.05"};
  }
  StatusOr<std::vector<driver::GpuInfo>> ListGpus() override {
    driver::GpuInfo a;
    a.index = GpuIndex(0);
    a.uuid = GpuUuid("GPU-aaaaaaaa-0000-0000-0000-000000000000");
    a.name = "NVIDIA A100-SXM4-40GB";
    a.minor = 0;
    a.pci_bus_id = "00000000:17:00.0";
    a.pci_device_id = 0x20B010DE;
    a.memory_total_mib = 40960;
    a.mig = {true, driver::MigMode::kEnabled, driver::MigMode::kEnabled};
    driver::GpuInfo b = a;
    b.index = GpuIndex(1);
    b.uuid = GpuUuid("GPU-bbbbbbbb-0000-0000-0000-000000000000");
    b.minor = 1;
    b.mig = {true, driver::MigMode::kDisabled, driver::MigMode::kEnabled};
    return std::vector<driver::GpuInfo>{a, b};
  }
  StatusOr<driver::MigModeInfo> GetMigMode(GpuIndex) override { return driver::MigModeInfo{}; }
  StatusOr<std::vector<driver::GiProfileInfo>> GetGiProfiles(GpuIndex gpu) override {
    if (gpu != GpuIndex(0)) return FailedPreconditionError("MIG mode is disabled on GPU 1");
    std::vector<driver::GiProfileInfo> out;
    for (const mig::GiProfile& p : mig::Catalog::Default().FindModel("a100-40gb")->gi_profiles) {
      driver::GiProfileInfo i;
      i.index = p.index;
      i.id = p.id;
      i.name = p.name;
      i.slice_count = p.slice_count;
      i.instance_count = p.instance_count;
      i.memory_mib = p.memory_mib;
      i.multiprocessor_count = p.sm_count;
      i.copy_engines = p.engines.copy_engines;
      i.info_version = 3;
      i.placements = p.placements;
      out.push_back(i);
    }
    return out;
  }
  StatusOr<std::vector<mig::Placement>> GetGiPossiblePlacements(GpuIndex, GiProfileId) override {
    return std::vector<mig::Placement>{};
  }
  StatusOr<driver::GpuInstanceInfo> CreateGi(GpuIndex, GiProfileId,
                                             const mig::Placement&) override {
    return InternalError("probe must not create");
  }
  StatusOr<driver::ComputeInstanceInfo> CreateCi(GpuIndex, NvmlGiId) override {
    return InternalError("probe must not create");
  }
  Status DestroyCi(GpuIndex, NvmlGiId, NvmlCiId) override {
    return InternalError("probe must not destroy");
  }
  Status DestroyGi(GpuIndex, NvmlGiId) override { return InternalError("probe must not destroy"); }
  StatusOr<std::vector<driver::GpuInstanceInfo>> ListGpuInstances(GpuIndex gpu) override {
    if (gpu != GpuIndex(0)) return FailedPreconditionError("MIG mode is disabled on GPU 1");
    driver::GpuInstanceInfo three;
    three.id = NvmlGiId(1);
    three.profile_id = GiProfileId(9);
    three.placement = {4, 4};
    driver::ComputeInstanceInfo ci;
    ci.id = NvmlCiId(0);
    ci.profile_id = CiProfileId(2);
    ci.placement = {0, 3};
    ci.mig_uuid = MigUuid("MIG-11111111-2222-5333-4444-555555555555");
    three.compute_instances.push_back(ci);
    driver::GpuInstanceInfo one;
    one.id = NvmlGiId(7);
    one.profile_id = GiProfileId(19);
    one.placement = {0, 1};
    return std::vector<driver::GpuInstanceInfo>{three, one};
  }
  StatusOr<std::vector<driver::ProcessInfo>> ListProcesses(GpuIndex, NvmlGiId,
                                                           NvmlCiId) override {
    return std::vector<driver::ProcessInfo>{};
  }
};

class ProbeTest : public ::testing::Test {
 protected:
  TwoGpuDriver fake_;
  driver::FaultInjectingDriver counted_{&fake_};
};

TEST_F(ProbeTest, CollectsReadOnly) {
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport report, CollectProbe(counted_, nullptr));
  EXPECT_EQ(counted_.CallCount(Method::kCreateGi), 0);
  EXPECT_EQ(counted_.CallCount(Method::kCreateCi), 0);
  EXPECT_EQ(counted_.CallCount(Method::kDestroyCi), 0);
  EXPECT_EQ(counted_.CallCount(Method::kDestroyGi), 0);
  EXPECT_EQ(counted_.CallCount(Method::kListGpus), 1);
  // MIG-off GPU: no profile or instance calls at all.
  EXPECT_EQ(counted_.CallCount(Method::kGetGiProfiles), 1);
  EXPECT_EQ(counted_.CallCount(Method::kListGpuInstances), 1);
  ASSERT_EQ(report.gpus.size(), 2u);
  EXPECT_EQ(report.gpus[0].profiles.size(), 7u);
  EXPECT_EQ(report.gpus[0].instances.size(), 2u);
  EXPECT_THAT(report.gpus[1].profiles, IsEmpty());
  EXPECT_THAT(report.gpus[1].instances_status,
              migd::testing::StatusIs(StatusCode::kFailedPrecondition,
                                      HasSubstr("MIG mode is disabled (pending: enabled)")));
}

TEST_F(ProbeTest, FailsOnlyWhenGpusCannotBeListed) {
  counted_.FailAlways(Method::kListGpus, UnavailableError("NVML_ERROR_DRIVER_NOT_LOADED"));
  EXPECT_THAT(CollectProbe(counted_, nullptr),
              migd::testing::StatusIs(StatusCode::kUnavailable, HasSubstr("DRIVER_NOT_LOADED")));
  counted_.ClearAll();
  counted_.FailAlways(Method::kGetGiProfiles, PermissionDeniedError("NVML_ERROR_NO_PERMISSION"));
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport report, CollectProbe(counted_, nullptr));
  EXPECT_FALSE(report.gpus[0].profiles_status.ok());
  EXPECT_EQ(report.gpus[0].instances.size(), 2u);
}

TEST_F(ProbeTest, JsonHasStableFieldNames) {
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport report, CollectProbe(counted_, nullptr));
  report.library_path = "libnvidia-ml.so.1";
  report.bindings = {{"nvmlInit_v2", "nvmlInit_v2", true},
                     {"nvmlDeviceGetGpuInstanceProfileInfoV",
                      "nvmlDeviceGetGpuInstanceProfileInfo", true},
                     {"nvmlDeviceGetGpuInstanceProfileInfoByIdV", "", false}};
  ASSERT_FALSE(CompareReportWithCatalog(mig::Catalog::Default(), &report));
  const nlohmann::json j = ProbeToJson(report);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["library"], "libnvidia-ml.so.1");
  EXPECT_EQ(j["driver_version"], "580.95.05");
  EXPECT_EQ(j["nvml_version"], "13.580.95.05");
  EXPECT_EQ(j["symbols"][1]["bound"], "nvmlDeviceGetGpuInstanceProfileInfo");
  EXPECT_EQ(j["symbols"][1]["fallback"], true);
  EXPECT_TRUE(j["symbols"][2]["bound"].is_null());
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["index"], 0);
  EXPECT_EQ(g["uuid"], "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(g["pci_device_id"], "0x20B010DE");
  EXPECT_EQ(g["pci_bus_id"], "00000000:17:00.0");
  EXPECT_EQ(g["memory_total_mib"], 40960);
  EXPECT_EQ(g["mig"]["current"], "enabled");
  const auto& p = g["profiles"][0];
  for (const char* key : {"name", "index", "id", "slices", "instances", "memory_mib", "sms",
                          "engines", "p2p", "gfx", "info_version", "placements",
                          "placements_text"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  EXPECT_EQ(p["name"], "1g.5gb");
  EXPECT_EQ(p["placements_text"], "{0,1,2,3,4,5,6}:1");
  EXPECT_EQ(p["placements"][1]["start"], 1);
  EXPECT_TRUE(g["profiles_error"].is_null());
  EXPECT_EQ(g["instances"][0]["gi_id"], 1);
  EXPECT_EQ(g["instances"][0]["profile_name"], "3g.20gb");
  EXPECT_EQ(g["instances"][0]["placement"]["start"], 4);
  EXPECT_EQ(g["instances"][0]["compute_instances"][0]["mig_uuid"],
            "MIG-11111111-2222-5333-4444-555555555555");
  EXPECT_THAT(g["instances"][1]["compute_instances"], IsEmpty());
  EXPECT_EQ(g["catalog"]["model"], "a100-40gb");
  EXPECT_EQ(g["catalog"]["identical"], true);
  const auto& off = j["gpus"][1];
  EXPECT_EQ(off["mig"]["current"], "disabled");
  EXPECT_EQ(off["instances_error"]["code"], "FAILED_PRECONDITION");
  EXPECT_EQ(off["catalog"]["identical"], false);
  EXPECT_THAT(off["catalog"]["differences"][0].get<std::string>(), HasSubstr("cannot compare"));
}

TEST_F(ProbeTest, TableForHumans) {
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport report, CollectProbe(counted_, nullptr));
  CompareReportWithCatalog(mig::Catalog::Default(), &report);
  const std::string t = ProbeToTable(report);
  EXPECT_THAT(t, HasSubstr("Driver version: 580.95.05"));
  EXPECT_THAT(t, HasSubstr("GPU 0  GPU-aaaaaaaa-0000-0000-0000-000000000000  NVIDIA A100-SXM4-40GB"));
  EXPECT_THAT(t, HasSubstr("MIG mode: current enabled, pending enabled"));
  EXPECT_THAT(t, HasSubstr("{0,4}:4"));
  EXPECT_THAT(t, HasSubstr("MIG-11111111-2222-5333-4444-555555555555"));
  EXPECT_THAT(t, HasSubstr("(no compute instance)"));
  EXPECT_THAT(t, HasSubstr("Catalogue: a100-40gb (matched by pci_device_id): identical"));
  EXPECT_THAT(t, HasSubstr("MIG mode: current disabled, pending enabled"));
  EXPECT_THAT(t, HasSubstr("Instances: unavailable: FAILED_PRECONDITION"));
}

TEST_F(ProbeTest, HardwareCheckSectionInJsonAndTable) {
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport report, CollectProbe(counted_, nullptr));
  driver::MigDeviceObservations o;
  o.gpu_uuid = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
  o.max_mig_devices = 2;
  o.walk = {{0, "SUCCESS", 1, 0, "MIG-11111111-2222-5333-4444-555555555555"},
            {1, "ERROR_NOT_FOUND", std::nullopt, std::nullopt, ""}};
  o.second_walk_identical = true;
  o.parent_gpu_instance_id = "ERROR_NOT_SUPPORTED";
  o.parent_compute_instance_id = "ERROR_NOT_SUPPORTED";
  driver::CiObservation c;
  c.gi_id = 1;
  c.ci_id = 0;
  c.mig_uuid = "MIG-11111111-2222-5333-4444-555555555555";
  c.walk_hits = 1;
  c.ci_info_device_uuid = o.gpu_uuid;
  c.gi_info_device_uuid = o.gpu_uuid;
  c.handle_by_uuid = "SUCCESS";
  c.handle_by_uuid_matches = true;
  c.handle_by_legacy_uuid = "ERROR_NOT_FOUND";
  o.compute_instances = {c};
  report.gpus[0].mig_devices = o;
  report.gpus[1].mig_devices_status = FailedPreconditionError("MIG mode is disabled");
  const nlohmann::json j = ProbeToJson(report);
  const auto& hw = j["gpus"][0]["hardware_check"];
  EXPECT_EQ(hw["max_mig_device_count"], 2);
  EXPECT_EQ(hw["walk"][0]["gi_id"], 1);
  EXPECT_TRUE(hw["walk"][1]["gi_id"].is_null());
  EXPECT_EQ(hw["walk"][1]["result"], "ERROR_NOT_FOUND");
  EXPECT_EQ(hw["compute_instances"][0]["ci_info_device_is_parent"], true);
  EXPECT_EQ(hw["compute_instances"][0]["handle_by_legacy_uuid"], "ERROR_NOT_FOUND");
  EXPECT_EQ(hw["parent_gpu_instance_id"], "ERROR_NOT_SUPPORTED");
  EXPECT_EQ(j["gpus"][1]["hardware_check"]["error"]["code"], "FAILED_PRECONDITION");
  const std::string t = ProbeToTable(report);
  EXPECT_THAT(t, HasSubstr("Hardware check: 2 MIG device indices, a second walk saw the same"));
  EXPECT_THAT(t, HasSubstr("ERROR_NOT_FOUND"));
  // Without --hardware-check there is no such section.
  MIGD_ASSERT_OK_AND_ASSIGN(ProbeReport plain, CollectProbe(counted_, nullptr));
  EXPECT_FALSE(ProbeToJson(plain)["gpus"][0].contains("hardware_check"));
}

TEST(RunProbeTest, MissingLibraryIsExit2WithFix) {
  std::ostringstream out, err;
  EXPECT_EQ(RunProbe({.nvml_library = "/nonexistent/libnvidia-ml.so.1"}, out, err),
            kExitNvmlUnavailable);
  EXPECT_THAT(err.str(), HasSubstr("NVML unavailable"));
  EXPECT_THAT(err.str(), HasSubstr("install the NVIDIA driver or pass --nvml-library"));
  EXPECT_EQ(out.str(), "");
}

#ifdef MIGD_TEST_TOO_OLD_NVML
TEST(RunProbeTest, TooOldLibraryIsExit2NamingTheSymbol) {
  std::ostringstream out, err;
  EXPECT_EQ(RunProbe({.nvml_library = MIGD_TEST_TOO_OLD_NVML, .output = "json"}, out, err),
            kExitNvmlUnavailable);
  EXPECT_THAT(err.str(), HasSubstr("nvmlDeviceCreateGpuInstanceWithPlacement"));
  EXPECT_THAT(err.str(), HasSubstr("450.80.02"));
}
#endif

TEST(RunProbeTest, UnknownOutputIsUsageError) {
  std::ostringstream out, err;
  EXPECT_EQ(RunProbe({.nvml_library = "", .output = "yaml"}, out, err), kExitUsage);
}

}  // namespace
}  // namespace migd::cli
