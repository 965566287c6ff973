#include "store/record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "testing/status_matchers.h"

namespace migd::store {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kGpu[] = "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1";
constexpr char kMig[] = "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d";
constexpr char kBoot[] = "0f5c7f0e-3c54-4c6b-9c1a-2b8e4f6a7d90";

Clock::TimePoint At(int64_t unix_seconds) {
  return Clock::TimePoint(std::chrono::seconds(unix_seconds));
}

RecordKey Key() { return {GpuUuid(kGpu), GiProfileId(19), {.start = 2, .size = 1}}; }

Record Committed() {
  Record r;
  r.key = Key();
  r.phase = RecordPhase::kCommitted;
  r.state = RecordState::kActive;
  r.profile_name = "1g.10gb";
  r.gi_id = NvmlGiId(9);
  r.ci_id = NvmlCiId(0);
  r.mig_uuid = MigUuid(kMig);
  r.owner = Owner::Pod("ml", "trainer-0", PodUid("6d8f0a4e-1111-2222-3333-444455556666"), "main");
  r.request_id = "req-42";
  r.boot_id = kBoot;
  r.created_at = At(1767225600);
  r.updated_at = At(1767225700);
  r.last_used_at = At(1767225650);
  r.generation = 7;
  return r;
}

Record Intent() {
  Record r;
  r.key = Key();
  r.phase = RecordPhase::kIntent;
  r.state = RecordState::kCreating;
  r.profile_name = "1g.10gb";
  r.boot_id = kBoot;
  r.created_at = At(1767225600);
  r.updated_at = At(1767225600);
  r.generation = 1;
  return r;
}

Json EncodeToJson(const Record& r) { return Json::parse(EncodeRecord(r)); }

TEST(RecordNameTest, NamesAndParsesPhasesAndStates) {
  for (RecordPhase p : {RecordPhase::kIntent, RecordPhase::kCommitted}) {
    EXPECT_EQ(ParseRecordPhase(RecordPhaseName(p)), p);
  }
  for (RecordState s : {RecordState::kCreating, RecordState::kActive, RecordState::kIdle,
                        RecordState::kReclaiming, RecordState::kDeleting, RecordState::kError}) {
    EXPECT_EQ(ParseRecordState(RecordStateName(s)), s);
  }
  EXPECT_EQ(RecordStateName(RecordState::kReclaiming), "Reclaiming");
  EXPECT_EQ(RecordPhaseName(RecordPhase::kCommitted), "committed");
  EXPECT_EQ(ParseRecordState("active"), std::nullopt);
  EXPECT_EQ(ParseRecordPhase("Intent"), std::nullopt);
  EXPECT_EQ(OwnerKindName(Owner::Kind::kNone), "none");
  EXPECT_EQ(OwnerKindName(Owner::Kind::kPod), "pod");
  EXPECT_EQ(OwnerKindName(Owner::Kind::kOpaque), "opaque");
}

TEST(RecordIdentityTest, IdentityOfARecordHasItsKeyAndRuntimeNames) {
  const InstanceIdentity id = IdentityOf(Committed());
  EXPECT_EQ(id.key(), Key());
  EXPECT_EQ(id.gi_id, NvmlGiId(9));
  EXPECT_EQ(id.ci_id, NvmlCiId(0));
  EXPECT_EQ(id.mig_uuid, MigUuid(kMig));
  const InstanceIdentity intent = IdentityOf(Intent());
  EXPECT_EQ(intent.key(), Key());
  EXPECT_EQ(intent.gi_id, NvmlGiId(0));
  EXPECT_TRUE(intent.mig_uuid.value().empty());
}

TEST(RecordKeyTest, ToStringUsesLogKeys) {
  EXPECT_EQ(Key().ToString(), std::string("gpu=") + kGpu + " profile=19 placement=2:1");
}

TEST(RecordFileNameTest, DerivedFromKeyOnly) {
  StatusOr<std::string> name = RecordFileName(Key());
  ASSERT_THAT(name, IsOk());
  EXPECT_EQ(*name, std::string(kGpu) + "_p19_2-1.json");
}

TEST(RecordFileNameTest, RejectsGpuUuidsThatAreNotUuids) {
  for (const char* bad :
       {"", "../x", "GPU-../../../etc/passwd", "/etc/passwd",
        "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1/../../x",
        "GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a", "MIG-0b6a1c3e-2f4d-5a6b-8c9d-0e1f2a3b4c5d"}) {
    RecordKey key = Key();
    key.gpu_uuid = GpuUuid(bad);
    EXPECT_THAT(RecordFileName(key), StatusIs(StatusCode::kInvalidArgument, HasSubstr("GPU UUID")))
        << bad;
  }
}

TEST(RecordFileNameTest, RejectsImpossiblePlacements) {
  for (mig::Placement p :
       {mig::Placement{.start = 0, .size = 0}, mig::Placement{.start = 31, .size = 2},
        mig::Placement{.start = 0xffffffffu, .size = 2},
        mig::Placement{.start = 1, .size = 0xffffffffu}}) {
    RecordKey key = Key();
    key.placement = p;
    EXPECT_THAT(RecordFileName(key), StatusIs(StatusCode::kInvalidArgument, HasSubstr("placement")))
        << p;
  }
  RecordKey key = Key();
  key.placement = {.start = 0, .size = 32};
  EXPECT_THAT(RecordFileName(key), IsOk());
}

TEST(RecordCodecTest, RoundTripsEveryFieldOfACommittedRecord) {
  const Record r = Committed();
  StatusOr<Record> back = DecodeRecord(EncodeRecord(r), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, r);
}

TEST(RecordCodecTest, RoundTripsTheHealthMark) {
  Record r = Committed();
  r.unhealthy = "xid 94";
  EXPECT_EQ(EncodeToJson(r)["unhealthy"], "xid 94");
  StatusOr<Record> back = DecodeRecord(EncodeRecord(r), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, r);
}

// Records written before the field existed load as healthy; a healthy
// record is written without it (files stay as they were).
TEST(RecordCodecTest, ARecordWithoutTheHealthFieldIsHealthy) {
  const Record r = Committed();
  EXPECT_FALSE(EncodeToJson(r).contains("unhealthy"));
  StatusOr<Record> back = DecodeRecord(EncodeRecord(r), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->unhealthy, std::nullopt);
}

TEST(RecordCodecTest, AHealthMarkThatIsNotAStringIsDataLoss) {
  Json doc = EncodeToJson(Committed());
  doc["unhealthy"] = 94;
  EXPECT_EQ(DecodeRecord(doc.dump(), "x.json").status().code(), StatusCode::kDataLoss);
}

TEST(RecordCodecTest, RoundTripsOpaqueOwnerAndIntentWithoutIds) {
  Record r = Committed();
  r.owner = Owner::Opaque("client-7");
  StatusOr<Record> back = DecodeRecord(EncodeRecord(r), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, r);

  const Record intent = Intent();
  back = DecodeRecord(EncodeRecord(intent), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, intent);
  EXPECT_FALSE(back->gi_id.has_value());
  EXPECT_FALSE(back->mig_uuid.has_value());
  EXPECT_FALSE(back->last_used_at.has_value());
}

TEST(RecordCodecTest, UsesHamiFieldNamesAndBothTimeForms) {
  const Json j = EncodeToJson(Committed());
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("migUUID"), kMig);
  EXPECT_EQ(j.at("parentGPUUUID"), kGpu);
  EXPECT_EQ(j.at("profile"), "1g.10gb");
  EXPECT_EQ(j.at("profileID"), 19);
  EXPECT_EQ(j.at("placement"), Json({{"start", 2}, {"size", 1}}));
  EXPECT_EQ(j.at("gpuInstanceID"), 9);
  EXPECT_EQ(j.at("computeInstanceID"), 0);
  EXPECT_EQ(j.at("phase"), "committed");
  EXPECT_EQ(j.at("state"), "Active");
  EXPECT_EQ(j.at("owner").at("kind"), "pod");
  EXPECT_EQ(j.at("owner").at("uid"), "6d8f0a4e-1111-2222-3333-444455556666");
  EXPECT_EQ(j.at("createdAt"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(j.at("createdAtUnix"), 1767225600);
  EXPECT_EQ(j.at("lastUsedAtUnix"), 1767225650);
  EXPECT_EQ(j.at("generation"), 7);
  EXPECT_EQ(EncodeRecord(Committed()).back(), '\n');

  const Json intent = EncodeToJson(Intent());
  EXPECT_FALSE(intent.contains("migUUID"));
  EXPECT_FALSE(intent.contains("gpuInstanceID"));
  EXPECT_FALSE(intent.contains("owner"));
  EXPECT_FALSE(intent.contains("lastUsedAt"));
}

TEST(RecordCodecTest, IgnoresUnknownFieldsAndNullOwner) {
  Json j = EncodeToJson(Intent());
  j["futureField"] = {{"x", 1}};
  j["owner"] = nullptr;
  StatusOr<Record> back = DecodeRecord(j.dump(), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, Intent());

  j["owner"] = {{"kind", "none"}};
  back = DecodeRecord(j.dump(), "x.json");
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(back->owner.empty());
}

TEST(RecordCodecTest, InvalidJsonIsDataLossNamingTheFile) {
  for (const char* text : {"", "{", "{\"version\": 1,}", "nul", "\xff\xfe"}) {
    EXPECT_THAT(DecodeRecord(text, "a.json"),
                StatusIs(StatusCode::kDataLoss, HasSubstr("a.json: not valid JSON")))
        << text;
  }
  EXPECT_THAT(DecodeRecord("[1, 2]", "a.json"),
              StatusIs(StatusCode::kDataLoss,
                       HasSubstr("a.json: the document: expected an object, got an array")));
}

TEST(RecordCodecTest, SchemaVersionChecks) {
  Json j = EncodeToJson(Committed());
  j.erase("version");
  EXPECT_THAT(
      DecodeRecord(j.dump(), "a.json"),
      StatusIs(
          StatusCode::kDataLoss,
          HasSubstr("a.json: /version: expected an integer, got nothing (the member is missing)")));
  j["version"] = "1";
  EXPECT_THAT(DecodeRecord(j.dump(), "a.json"),
              StatusIs(StatusCode::kDataLoss,
                       HasSubstr("a.json: /version: expected an integer, got \"1\"")));
  for (const Json& v : {Json(2), Json(0), Json(-1), Json(1ull << 40)}) {
    j["version"] = v;
    EXPECT_THAT(DecodeRecord(j.dump(), "a.json"),
                StatusIs(StatusCode::kUnimplemented,
                         HasSubstr("schema version " + v.dump() + " is not supported")));
  }
  // A record of another schema is refused before its other fields are read.
  Json other = {{"version", 2}, {"completely", "different"}};
  EXPECT_THAT(DecodeRecord(other.dump(), "a.json"),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("a.json")));
}

class MissingFieldTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MissingFieldTest, IsDataLossNamingTheField) {
  Json j = EncodeToJson(Committed());
  const std::string field = GetParam();
  const size_t dot = field.find('.');
  if (dot == std::string::npos) {
    j.erase(field);
  } else {
    j.at(field.substr(0, dot)).erase(field.substr(dot + 1));
  }
  std::string pointer = "/" + field;
  if (dot != std::string::npos) pointer[dot + 1] = '/';
  EXPECT_THAT(
      DecodeRecord(j.dump(), "a.json"),
      StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr("a.json: " + pointer + ": expected "),
                                            HasSubstr(", got nothing (the member is missing)"))));
}

INSTANTIATE_TEST_SUITE_P(RequiredFields, MissingFieldTest,
                         ::testing::Values("phase", "state", "parentGPUUUID", "profileID",
                                           "profile", "placement", "placement.start",
                                           "placement.size", "bootID", "createdAtUnix",
                                           "updatedAtUnix", "generation", "owner.kind",
                                           "owner.namespace", "owner.name", "owner.uid"));

struct BadField {
  const char* field;
  Json value;
  const char* message;
};

class BadFieldTest : public ::testing::TestWithParam<BadField> {};

TEST_P(BadFieldTest, IsDataLoss) {
  Json j = EncodeToJson(Committed());
  const std::string field = GetParam().field;
  const size_t dot = field.find('.');
  if (dot == std::string::npos) {
    j[field] = GetParam().value;
  } else {
    j[field.substr(0, dot)][field.substr(dot + 1)] = GetParam().value;
  }
  EXPECT_THAT(DecodeRecord(j.dump(), "a.json"),
              StatusIs(StatusCode::kDataLoss, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadFieldTest,
    ::testing::Values(
        BadField{"phase", "done",
                 "a.json: /phase: expected one of intent, committed, got \"done\""},
        BadField{"phase", 1, "a.json: /phase: expected one of intent, committed, got 1"},
        BadField{"state", "Running",
                 "a.json: /state: expected one of Creating, Active, Idle, Reclaiming, Deleting, "
                 "Error, got \"Running\""},
        BadField{"parentGPUUUID", 5, "a.json: /parentGPUUUID: expected a string, got 5"},
        BadField{
            "profileID", -1,
            "a.json: /profileID: expected a non-negative integer of at most 4294967295, got -1"},
        BadField{
            "profileID", 1.5,
            "a.json: /profileID: expected a non-negative integer of at most 4294967295, got 1.5"},
        BadField{"profileID", 1ull << 33,
                 "a.json: /profileID: expected a non-negative integer of at most 4294967295, got "
                 "8589934592"},
        BadField{"profileID", "19",
                 "a.json: /profileID: expected a non-negative integer of at most 4294967295, got "
                 "\"19\""},
        BadField{"placement", "0:1", "a.json: /placement: expected an object, got \"0:1\""},
        BadField{"placement.size", -2,
                 "a.json: /placement/size: expected a non-negative integer of at most 4294967295, "
                 "got -2"},
        BadField{"gpuInstanceID", -1,
                 "a.json: /gpuInstanceID: expected a non-negative integer of at most 4294967295, "
                 "got -1"},
        BadField{"computeInstanceID", "0",
                 "a.json: /computeInstanceID: expected a non-negative integer of at most "
                 "4294967295, got \"0\""},
        BadField{"migUUID", 3, "a.json: /migUUID: expected a string, got 3"},
        BadField{"owner", "pod", "a.json: /owner: expected an object, got \"pod\""},
        BadField{"owner.kind", "node",
                 "a.json: /owner/kind: expected one of none, pod, opaque, got \"node\""},
        BadField{"owner.container", 1, "a.json: /owner/container: expected a string, got 1"},
        BadField{"requestID", Json::array(), "a.json: /requestID: expected a string, got an array"},
        BadField{"createdAtUnix", -5,
                 "a.json: /createdAtUnix: expected an integer in [0, 9000000000], got -5"},
        BadField{"createdAtUnix", 9'000'000'001ll,
                 "a.json: /createdAtUnix: expected an integer in [0, 9000000000], got 9000000001"},
        BadField{"createdAtUnix", "now",
                 "a.json: /createdAtUnix: expected an integer in [0, 9000000000], got \"now\""},
        BadField{"createdAt", 5, "a.json: /createdAt: expected a string, got 5"},
        BadField{"lastUsedAtUnix", 1.25,
                 "a.json: /lastUsedAtUnix: expected an integer in [0, 9000000000], got 1.25"},
        BadField{"generation", -1,
                 "a.json: /generation: expected a non-negative integer, got -1"}));

TEST(RecordCodecTest, OpaqueOwnerNeedsAnId) {
  Json j = EncodeToJson(Committed());
  j["owner"] = {{"kind", "opaque"}};
  EXPECT_THAT(
      DecodeRecord(j.dump(), "a.json"),
      StatusIs(
          StatusCode::kDataLoss,
          HasSubstr("a.json: /owner/id: expected a string, got nothing (the member is missing)")));
}

TEST(ValidateRecordTest, AcceptsWellFormedRecords) {
  EXPECT_THAT(ValidateRecord(Committed()), IsOk());
  EXPECT_THAT(ValidateRecord(Intent()), IsOk());
  Record idle = Committed();
  idle.state = RecordState::kIdle;
  idle.owner = Owner();
  EXPECT_THAT(ValidateRecord(idle), IsOk());
  Record error_intent = Intent();
  error_intent.state = RecordState::kError;
  error_intent.gi_id = NvmlGiId(3);
  EXPECT_THAT(ValidateRecord(error_intent), IsOk());
  Record no_boot = Intent();
  no_boot.boot_id.clear();
  EXPECT_THAT(ValidateRecord(no_boot), IsOk());
  Record utf8 = Committed();
  utf8.request_id = "r\xc3\xa9q-\xe2\x82\xac-\xf0\x9f\x98\x80";
  EXPECT_THAT(ValidateRecord(utf8), IsOk());
}

struct InvalidCase {
  const char* name;
  void (*mutate)(Record&);
  const char* message;
};

class InvalidRecordTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidRecordTest, IsInvalidArgument) {
  Record r = Committed();
  GetParam().mutate(r);
  EXPECT_THAT(ValidateRecord(r),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InvalidRecordTest,
    ::testing::Values(
        InvalidCase{"SchemaVersion", [](Record& r) { r.schema_version = 2; }, "schema version 2"},
        InvalidCase{"GpuUuid", [](Record& r) { r.key.gpu_uuid = GpuUuid("../x"); }, "GPU UUID"},
        InvalidCase{"Placement", [](Record& r) { r.key.placement.size = 0; }, "placement"},
        InvalidCase{"ProfileName", [](Record& r) { r.profile_name.clear(); },
                    "profile name is empty"},
        InvalidCase{"MigUuidTraversal", [](Record& r) { r.mig_uuid = MigUuid("../x"); },
                    "MIG UUID"},
        InvalidCase{"MigUuidIsTheParentGpuUuid", [](Record& r) { r.mig_uuid = MigUuid(kGpu); },
                    "MIG UUID 'GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1' is the UUID of its "
                    "parent GPU 'GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1'"},
        InvalidCase{
            "MigUuidOfAnotherGpuForm",
            [](Record& r) { r.mig_uuid = MigUuid("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"); },
            "MIG UUID 'GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee' of an instance of GPU "
            "'GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1' does not start with MIG-"},
        InvalidCase{"MigUuidLegacyForm",
                    [](Record& r) {
                      r.mig_uuid = MigUuid("MIG-GPU-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1/9/0");
                    },
                    "is not of the form MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"},
        InvalidCase{"CommittedNoGi", [](Record& r) { r.gi_id.reset(); }, "committed record needs"},
        InvalidCase{"CommittedNoCi", [](Record& r) { r.ci_id.reset(); }, "committed record needs"},
        InvalidCase{"CommittedNoUuid", [](Record& r) { r.mig_uuid.reset(); },
                    "committed record needs"},
        InvalidCase{"IntentActive", [](Record& r) { r.phase = RecordPhase::kIntent; },
                    "intent record cannot be in state Active"},
        InvalidCase{"IntentIdle",
                    [](Record& r) {
                      r.phase = RecordPhase::kIntent;
                      r.state = RecordState::kIdle;
                      r.owner = Owner();
                    },
                    "intent record cannot be in state Idle"},
        InvalidCase{"IdleWithOwner", [](Record& r) { r.state = RecordState::kIdle; },
                    "Idle record has an owner"},
        InvalidCase{"ActiveWithoutOwner", [](Record& r) { r.owner = Owner(); },
                    "Active record has no owner"},
        InvalidCase{"PodWithoutUid", [](Record& r) { r.owner.pod_uid = PodUid(""); },
                    "pod owner needs namespace, name and uid"},
        InvalidCase{"PodWithoutName", [](Record& r) { r.owner.pod_name.clear(); },
                    "pod owner needs"},
        InvalidCase{"PodWithOpaqueId", [](Record& r) { r.owner.opaque_id = "x"; },
                    "pod owner carries an opaque id"},
        InvalidCase{"OpaqueWithoutId", [](Record& r) { r.owner = Owner::Opaque(""); },
                    "opaque owner needs an id"},
        InvalidCase{"OpaqueWithPodFields",
                    [](Record& r) {
                      r.owner = Owner::Opaque("c");
                      r.owner.pod_name = "p";
                    },
                    "opaque owner carries pod fields"},
        InvalidCase{"NoneWithFields",
                    [](Record& r) {
                      r.state = RecordState::kIdle;
                      r.owner = Owner();
                      r.owner.container = "c";
                    },
                    "owner of kind none carries owner fields"},
        InvalidCase{"OwnerControlChar", [](Record& r) { r.owner.container = "a\nb"; },
                    "owner.container contains a control character"},
        InvalidCase{"OpaqueTooLong",
                    [](Record& r) { r.owner = Owner::Opaque(std::string(257, 'x')); },
                    "owner.id is longer than 256 bytes"},
        InvalidCase{"RequestIdTooLong", [](Record& r) { r.request_id = std::string(257, 'r'); },
                    "request id is longer than 256 bytes"},
        InvalidCase{"RequestIdDel", [](Record& r) { r.request_id = "a\x7f"; },
                    "request id contains a control character"},
        InvalidCase{"RequestIdBadUtf8", [](Record& r) { r.request_id = "a\xc3"; },
                    "request id is not UTF-8"},
        InvalidCase{"RequestIdOverlongUtf8", [](Record& r) { r.request_id = "\xc0\xaf"; },
                    "request id is not UTF-8"},
        InvalidCase{"RequestIdSurrogate", [](Record& r) { r.request_id = "\xed\xa0\x80"; },
                    "request id is not UTF-8"},
        InvalidCase{"RequestIdContinuation", [](Record& r) { r.request_id = "\x80"; },
                    "request id is not UTF-8"},
        InvalidCase{"BootIdControl", [](Record& r) { r.boot_id = "x\ty"; },
                    "boot id contains a control character"},
        InvalidCase{"ProfileNameNul", [](Record& r) { r.profile_name = std::string("1g\0x", 4); },
                    "profile name contains a control character"},
        InvalidCase{"CreatedBeforeEpoch", [](Record& r) { r.created_at = At(-1); },
                    "created_at is out of range"},
        InvalidCase{"UpdatedTooLate", [](Record& r) { r.updated_at = At(kMaxUnixSeconds + 1); },
                    "updated_at is out of range"},
        InvalidCase{"LastUsedBeforeEpoch", [](Record& r) { r.last_used_at = At(-100); },
                    "last_used_at is out of range"}),
    [](const ::testing::TestParamInfo<InvalidCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace migd::store
