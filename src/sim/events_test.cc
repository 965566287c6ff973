// The simulator's events: spec parsing (sim/events.h), the event log the
// Machine keeps (sim/machine.h "Events") and its place in the state file.
#include "sim/events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "driver/nvml/nvml_abi.h"
#include "sim/config.h"
#include "sim/machine.h"
#include "sim/state.h"
#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

namespace abi = ::migd::nvml_abi;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

const mig::Catalog& Cat() { return mig::Catalog::Default(); }

SimState NewState(std::string_view gpus) {
  StatusOr<std::vector<GpuSpec>> specs = ParseGpuSpecs(gpus);
  EXPECT_TRUE(specs.ok()) << specs.status();
  MachineOptions options;
  options.gpus = *specs;
  options.nonce = 7;
  StatusOr<SimState> state = NewMachineState(options, Cat());
  EXPECT_TRUE(state.ok()) << state.status();
  return *state;
}

EventSpec Xid(uint32_t gpu, uint64_t xid, std::optional<uint32_t> gi = std::nullopt,
              std::optional<uint32_t> ci = std::nullopt) {
  EventSpec e;
  e.gpu = gpu;
  e.xid = xid;
  e.gi = gi;
  e.ci = ci;
  return e;
}

EventSpec Lost(uint32_t gpu) {
  EventSpec e;
  e.kind = EventSpecKind::kGpuLost;
  e.gpu = gpu;
  return e;
}

SimEvent Change(uint64_t seq, uint32_t gpu, uint64_t type = abi::kEventMigConfigChange) {
  return SimEvent{seq, gpu, type, 0, abi::kInvalidInstanceId, abi::kInvalidInstanceId};
}

TEST(EventSpecTest, ParsesEveryKind) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<EventSpec> specs,
                            ParseEventSpecs("xid=79@0, xid=31@1/2/0 ,mig-config@1,gpu-lost@0+20",
                                            /*allow_delay=*/true));
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0], (EventSpec{EventSpecKind::kXid, 0, 79, std::nullopt, std::nullopt, 0}));
  EXPECT_EQ(specs[1], (EventSpec{EventSpecKind::kXid, 1, 31, 2u, 0u, 0}));
  EXPECT_EQ(specs[2].kind, EventSpecKind::kMigConfigChange);
  EXPECT_EQ(specs[2].gpu, 1u);
  EXPECT_EQ(specs[3].kind, EventSpecKind::kGpuLost);
  EXPECT_EQ(specs[3].delay_ms, 20u);
}

TEST(EventSpecTest, RejectsBadEntriesNamingThem) {
  EXPECT_THAT(ParseEventSpecs("", false), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no event")));
  EXPECT_THAT(ParseEventSpecs("xid=79", false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'xid=79': no @<gpu>")));
  EXPECT_THAT(ParseEventSpecs("xid=x@0", false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("decimal")));
  EXPECT_THAT(ParseEventSpecs("mig-config@0/1", false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad <gpu>")));
  EXPECT_THAT(ParseEventSpecs("xid=79@0/4294967295", false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad <gpu>")));
  EXPECT_THAT(ParseEventSpecs("reset@0", false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown event kind")));
  EXPECT_THAT(ParseEventSpecs("xid=79@0+5", /*allow_delay=*/false),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("only accepted in MIGD_SIM_EVENTS")));
}

TEST(EventSpecTest, SupportedTypesFollowTheHeaderOfTheLibrary) {
  const uint64_t current = DefaultSupportedEventTypes(true, /*legacy=*/false);
  EXPECT_NE(current & abi::kEventTypeXidCriticalError, 0u);
  EXPECT_NE(current & abi::kEventMigConfigChange, 0u);
  EXPECT_NE(current & abi::kEventTypeGpuUnavailableError, 0u);
  const uint64_t legacy = DefaultSupportedEventTypes(true, /*legacy=*/true);
  EXPECT_EQ(legacy & abi::kEventTypeGpuUnavailableError, 0u);
  EXPECT_EQ(legacy & ~KnownEventTypes(true), 0u);
  EXPECT_EQ(DefaultSupportedEventTypes(false, false) & abi::kEventMigConfigChange, 0u);
}

TEST(MachineEventsTest, EveryCreateAndDestroyRecordsAMigConfigChange) {
  SimState s = NewState("a100-40gb:2");
  Machine m(s, Cat());
  SimOr<SimGi> gi = m.CreateGi(GpuIndex(1), GiProfileId(0), std::nullopt);
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  SimOr<SimCi> ci = m.CreateCi(GpuIndex(1), gi->id, CiProfileId(0), std::nullopt);
  ASSERT_TRUE(ci.ok()) << ci.status().ToString();
  ASSERT_TRUE(m.DestroyCi(GpuIndex(1), gi->id, ci->id).ok());
  ASSERT_TRUE(m.DestroyGi(GpuIndex(1), gi->id).ok());
  // A failed call records nothing.
  EXPECT_FALSE(m.DestroyGi(GpuIndex(1), gi->id).ok());
  ASSERT_EQ(s.events.size(), 4u);
  for (size_t i = 0; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i].seq, i + 1);
    EXPECT_EQ(s.events[i].gpu, 1u);
    EXPECT_EQ(s.events[i].type, abi::kEventMigConfigChange);
    EXPECT_EQ(s.events[i].data, 0u);
    EXPECT_EQ(s.events[i].gi, abi::kInvalidInstanceId);
  }
  EXPECT_EQ(s.event_seq, 4u);
}

TEST(MachineEventsTest, InjectsAttributedAndUnattributedXidsAndALostGpu) {
  SimState s = NewState("h100-80gb:2");
  Machine m(s, Cat());
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<EventSpec> specs,
                            ParseEventSpecs("xid=79@0,xid=43@1/3/0,gpu-lost@1", false));
  for (const EventSpec& spec : specs) ASSERT_TRUE(m.InjectEvent(spec).ok());
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events[0], (SimEvent{1, 0, abi::kEventTypeXidCriticalError, 79,
                                   abi::kInvalidInstanceId, abi::kInvalidInstanceId}));
  EXPECT_EQ(s.events[1], (SimEvent{2, 1, abi::kEventTypeXidCriticalError, 43, 3, 0}));
  EXPECT_EQ(s.events[2].type, abi::kEventTypeGpuUnavailableError);
  EXPECT_TRUE(s.gpus[1].lost);
  // A lost GPU takes no more events; a reset brings it back.
  EXPECT_EQ(m.InjectEvent(specs[1]).code(), NVML_ERROR_GPU_IS_LOST);
  m.Reboot();
  EXPECT_FALSE(s.gpus[1].lost);
  EXPECT_EQ(m.InjectEvent(Xid(9, 79)).code(),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST(MachineEventsTest, ALostGpuComesBackWithItsInstancesOrAfterAResetWithout) {
  SimState s = NewState("a100-40gb:2");
  Machine m(s, Cat());
  ASSERT_TRUE(m.CreateGi(GpuIndex(0), GiProfileId(9), std::nullopt).ok());
  ASSERT_TRUE(m.CreateGi(GpuIndex(1), GiProfileId(9), std::nullopt).ok());
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<EventSpec> specs,
                            ParseEventSpecs("gpu-lost@0,gpu-lost@1,gpu-back@0,gpu-reset@1", false));
  EXPECT_EQ(specs[2].kind, EventSpecKind::kGpuBack);
  EXPECT_EQ(specs[3].kind, EventSpecKind::kGpuReset);
  // Only a lost GPU comes back.
  EXPECT_EQ(m.InjectEvent(specs[2]).code(), NVML_ERROR_INVALID_ARGUMENT);
  for (const EventSpec& spec : specs) ASSERT_TRUE(m.InjectEvent(spec).ok());
  EXPECT_FALSE(s.gpus[0].lost);
  EXPECT_FALSE(s.gpus[1].lost);
  EXPECT_EQ(s.gpus[0].gpu_instances.size(), 1u);  // back as it was
  EXPECT_TRUE(s.gpus[1].gpu_instances.empty());   // a reset destroys every GI
  // Neither records an event: nvml.h defines none for a GPU that returns.
  EXPECT_EQ(s.events.back().type, abi::kEventTypeGpuUnavailableError);
}

TEST(MachineEventsTest, AttributionNeedsMigOn) {
  SimState s = NewState("a100-40gb:1:mig-off");
  Machine m(s, Cat());
  EXPECT_EQ(m.InjectEvent(Xid(0, 79, 1u)).code(),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(m.InjectEvent(Xid(0, 79)).ok());
}

TEST(MachineEventsTest, TheLogKeepsTheNewestEntries) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  for (size_t i = 0; i < kMaxEvents + 10; ++i) m.RecordMigConfigChange(GpuIndex(0));
  ASSERT_EQ(s.events.size(), kMaxEvents);
  EXPECT_EQ(s.events.front().seq, 11u);
  EXPECT_EQ(s.events.back().seq, kMaxEvents + 10);
}

TEST(StateEventsTest, TheLogAndTheLostMarkRoundTrip) {
  SimState s = NewState("a100-40gb:2");
  Machine m(s, Cat());
  ASSERT_TRUE(m.InjectEvent(Xid(0, 79, 2u, 1u)).ok());
  ASSERT_TRUE(m.InjectEvent(Lost(1)).ok());
  MIGD_ASSERT_OK_AND_ASSIGN(SimState back, ParseState(SerializeState(s), Cat()));
  EXPECT_EQ(back, s);
  // A state without events has neither field (older files read the same).
  const std::string plain = SerializeState(NewState("a100-40gb:1"));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("\"events\"")));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("\"lost\"")));
}

TEST(StateEventsTest, ValidationNamesTheBadEntry) {
  SimState s = NewState("a100-40gb:1");
  s.event_seq = 2;
  s.events = {Change(2, 0), Change(1, 0)};
  EXPECT_THAT(ValidateState(s, Cat()),
              StatusIs(StatusCode::kDataLoss, HasSubstr("/events/1/seq")));
  s.events = {Change(1, 3)};
  EXPECT_THAT(ValidateState(s, Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr("/events/0/gpu")));
  s.events = {Change(1, 0, 0x3)};
  EXPECT_THAT(ValidateState(s, Cat()), StatusIs(StatusCode::kDataLoss, HasSubstr("/events/0/type")));
}

TEST(SimConfigEventsTest, ReadsTheEventKnobs) {
  std::map<std::string, std::string> env = {{"MIGD_SIM_EVENT_WAIT_ZERO", "forever"},
                                            {"MIGD_SIM_EVENT_COALESCE", "last"},
                                            {"MIGD_SIM_GPU_LOST", "wait-error"},
                                            {"MIGD_SIM_UNSUPPORTED_EVENTS", "xid, mig-config"}};
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  MIGD_ASSERT_OK_AND_ASSIGN(SimConfig c, SimConfigFromEnv(Cat(), get));
  EXPECT_EQ(c.event_wait_zero, EventWaitZero::kForever);
  EXPECT_EQ(c.event_coalesce, EventCoalesce::kLast);
  EXPECT_EQ(c.gpu_lost, GpuLostReport::kWaitError);
  EXPECT_EQ(c.unsupported_event_types,
            abi::kEventTypeXidCriticalError | abi::kEventMigConfigChange);
  env["MIGD_SIM_UNSUPPORTED_EVENTS"] = "ecc";
  EXPECT_THAT(SimConfigFromEnv(Cat(), get),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("MIGD_SIM_UNSUPPORTED_EVENTS")));
}

}  // namespace
}  // namespace migd::sim
