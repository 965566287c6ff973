#include "sim/state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/config.h"
#include "sim/machine.h"
#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

const mig::Catalog& Cat() { return mig::Catalog::Default(); }

// A state with a GI, a CI, a process and counters on an H100 and an A30.
SimState Populated() {
  MachineOptions o;
  o.gpus = {{"h100-80gb", 1}, {"a30-24gb", 1, /*mig_enabled=*/false, /*permission=*/false}};
  o.gi_id_policy = {GiIdMode::kShuffle, 99};
  o.nonce = 0xfeedface;
  o.proc_root = "/tmp/proc";
  SimState s = *NewMachineState(o, Cat());
  Machine m(s, Cat());
  SimOr<SimGi> gi = m.CreateGi(GpuIndex(0), GiProfileId(9), mig::Placement{4, 4});
  SimOr<SimCi> ci = m.CreateCi(GpuIndex(0), gi->id, CiProfileId(2), std::nullopt);
  EXPECT_TRUE(m.AttachProcess(ci->uuid.value(), 1234, 1ull << 33).ok());
  EXPECT_TRUE(m.SetMigMode(GpuIndex(0), false).ok());
  m.CountCall("nvmlInit_v2", "SUCCESS");
  m.CountCall("nvmlGpuInstanceDestroy", "ERROR_IN_USE");
  return s;
}

TEST(StateTest, RoundTripsThroughJson) {
  const SimState s = Populated();
  const std::string text = SerializeState(s);
  StatusOr<SimState> back = ParseState(text, Cat());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(SerializeState(*back), text);
}

TEST(StateTest, DocumentedFieldNames) {
  const nlohmann::json j = nlohmann::json::parse(SerializeState(Populated()));
  EXPECT_EQ(j["schemaVersion"], 1);
  EXPECT_EQ(j["driverVersion"], "580.95.05");
  EXPECT_EQ(j["nvmlVersion"], "13.580.95.05");
  EXPECT_EQ(j["giIdPolicy"], "shuffle");
  EXPECT_EQ(j["giIdSeed"], 99);
  EXPECT_EQ(j["nonce"], "00000000feedface");
  EXPECT_EQ(j["bootCount"], 0);
  EXPECT_EQ(j["procRoot"], "/tmp/proc");
  const auto& gpu = j["gpus"][0];
  EXPECT_EQ(gpu["model"], "h100-80gb");
  EXPECT_EQ(gpu["minor"], 0);
  EXPECT_EQ(gpu["pciBusId"], "00000000:17:00.0");
  EXPECT_EQ(gpu["migMode"]["current"], "enabled");
  EXPECT_EQ(gpu["migMode"]["pending"], "disabled");
  EXPECT_EQ(gpu["permission"], true);
  EXPECT_EQ(j["gpus"][1]["permission"], false);
  const auto& gi = gpu["gpuInstances"][0];
  EXPECT_TRUE(gi["id"] == 1 || gi["id"] == 2);  // shuffle policy: either id of the 4-unit range
  EXPECT_EQ(gi["profileId"], 9);
  EXPECT_EQ(gi["placement"]["start"], 4);
  EXPECT_EQ(gi["placement"]["size"], 4);
  EXPECT_TRUE(gi["serial"].is_number_unsigned());
  const auto& ci = gi["computeInstances"][0];
  EXPECT_EQ(ci["id"], 0);
  EXPECT_EQ(ci["profileId"], 2);
  EXPECT_EQ(ci["placement"]["size"], 3);
  EXPECT_TRUE(ci["uuid"].get<std::string>().starts_with("MIG-"));
  EXPECT_EQ(ci["processes"][0]["pid"], 1234);
  EXPECT_EQ(ci["processes"][0]["usedGpuMemory"], 1ull << 33);
  EXPECT_EQ(j["counters"]["nvmlGpuInstanceDestroy"]["ERROR_IN_USE"], 1);
}

// Edits the serialised populated state and expects a kDataLoss naming `what`.
void ExpectCorrupt(const std::function<void(nlohmann::json&)>& edit, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(SerializeState(Populated()));
  edit(j);
  EXPECT_THAT(ParseState(j.dump(), Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr(what)));
}

TEST(StateTest, RejectsCorruptDocuments) {
  EXPECT_THAT(ParseState("", Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseState("{\"schemaVersion\": 1", Cat()),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseState("[]", Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr("object")));
  ExpectCorrupt([](auto& j) { j["schemaVersion"] = 2; },
                "/schemaVersion: expected schema version 1");
  ExpectCorrupt([](auto& j) { j.erase("serial"); },
                "the simulator state: /serial: expected a non-negative integer, got nothing");
  ExpectCorrupt([](auto& j) { j["extra"] = 1; }, "/extra: unknown member");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["minor"] = "zero"; }, "/gpus/0/minor: expected");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["model"] = "z100"; },
                "the simulator state: /gpus/0/model: unknown model");
  ExpectCorrupt([](auto& j) { j["giIdPolicy"] = "random"; },
                "/giIdPolicy: expected one of deterministic, shuffle");
  ExpectCorrupt([](auto& j) { j["nonce"] = "xyz"; },
                "/nonce: expected 1 to 16 lower-case hex digits");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["migMode"]["current"] = "on"; },
                "/gpus/0/migMode/current: expected one of");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["gpuInstances"][0]["profileId"] = 47; }, "profileId");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["gpuInstances"][0]["placement"]["start"] = 1; },
                "illegal layout");
  ExpectCorrupt([](auto& j) { j["gpus"][0]["gpuInstances"][0]["id"] = 15; }, "out of range");
  ExpectCorrupt([](auto& j) { j["serial"] = 1; }, "serial");
  ExpectCorrupt(
      [](auto& j) { j["gpus"][0]["gpuInstances"][0]["computeInstances"][0]["uuid"] = "MIG-1"; },
      "uuid");
  ExpectCorrupt(
      [](auto& j) {
        j["gpus"][0]["gpuInstances"][0]["computeInstances"][0]["placement"]["start"] = 1;
      },
      "not listed");
  ExpectCorrupt([](auto& j) { j["gpus"][1]["gpuInstances"] = j["gpus"][0]["gpuInstances"]; },
                "MIG mode is disabled");
  ExpectCorrupt([](auto& j) { j["counters"]["nvmlInit_v2"]["SUCCESS"] = -1; },
                "/counters/nvmlInit_v2/SUCCESS: expected");
  ExpectCorrupt([](auto& j) { j["gpus"][1]["uuid"] = j["gpus"][0]["uuid"]; }, "duplicate");
}

TEST(StateTest, OverlappingGisAreRejected) {
  SimState s = Populated();
  SimGi copy = s.gpus[0].gpu_instances[0];
  copy.id = NvmlGiId(14);
  copy.compute_instances.clear();
  s.gpus[0].gpu_instances.push_back(copy);
  EXPECT_THAT(ValidateState(s, Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr("illegal")));
}

}  // namespace
}  // namespace migd::sim
