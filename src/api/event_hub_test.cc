// api/event_hub and api/status_mapping with synthetic events.
#include "api/event_hub.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/status_mapping.h"
#include "testing/status_matchers.h"

namespace migd::api {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using Wait = EventHub::Wait;

constexpr std::chrono::milliseconds kNoWait{0};
constexpr std::chrono::milliseconds kLong{30000};

engine::InstanceEvent Ev(uint64_t seq) {
  engine::InstanceEvent e;
  e.sequence = seq;
  e.to = engine::InstanceState::kActive;
  e.instance.mig_uuid = MigUuid("MIG-" + std::to_string(seq));
  return e;
}

TEST(EventHubTest, EverySubscriberGetsEveryEventInOrder) {
  EventHub hub;
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, hub.Subscribe());
  MIGD_ASSERT_OK_AND_ASSIGN(auto b, hub.Subscribe());
  EXPECT_EQ(hub.subscriber_count(), 2u);
  for (uint64_t s = 1; s <= 5; ++s) hub.OnInstanceEvent(Ev(s));
  EXPECT_EQ(hub.last_sequence(), 5u);
  for (auto* sub : {a.get(), b.get()}) {
    engine::InstanceEvent e;
    for (uint64_t s = 1; s <= 5; ++s) {
      ASSERT_EQ(sub->Next(&e, kNoWait), Wait::kEvent);
      EXPECT_EQ(e.sequence, s);
      EXPECT_EQ(e.instance.mig_uuid, MigUuid("MIG-" + std::to_string(s)));
    }
    EXPECT_EQ(sub->Next(&e, kNoWait), Wait::kTimeout);
  }
  a.reset();
  EXPECT_EQ(hub.subscriber_count(), 1u);
  EXPECT_TRUE(hub.WaitForSubscribers(1, kNoWait));
  EXPECT_FALSE(hub.WaitForSubscribers(2, kNoWait));
}

TEST(EventHubTest, LateSubscriberSeesOnlyLaterEvents) {
  EventHub hub;
  hub.OnInstanceEvent(Ev(1));
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, hub.Subscribe());
  hub.OnInstanceEvent(Ev(2));
  engine::InstanceEvent e;
  ASSERT_EQ(a->Next(&e, kNoWait), Wait::kEvent);
  EXPECT_EQ(e.sequence, 2u);
}

TEST(EventHubTest, WaiterWakesOnEvent) {
  EventHub hub;
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, hub.Subscribe());
  std::thread producer([&] { hub.OnInstanceEvent(Ev(9)); });
  engine::InstanceEvent e;
  EXPECT_EQ(a->Next(&e, kLong), Wait::kEvent);
  EXPECT_EQ(e.sequence, 9u);
  producer.join();
}

TEST(EventHubTest, OverflowMarksOnlyTheSlowSubscriberLost) {
  EventHub hub;
  MIGD_ASSERT_OK_AND_ASSIGN(auto slow, hub.Subscribe());
  MIGD_ASSERT_OK_AND_ASSIGN(auto fast, hub.Subscribe());
  engine::InstanceEvent e;
  for (uint64_t s = 1; s <= EventHub::kQueueLimit; ++s) {
    hub.OnInstanceEvent(Ev(s));
    ASSERT_EQ(fast->Next(&e, kNoWait), Wait::kEvent);
  }
  // Exactly kQueueLimit queued: not lost yet.
  ASSERT_EQ(slow->Next(&e, kNoWait), Wait::kEvent);
  EXPECT_EQ(e.sequence, 1u);
  hub.OnInstanceEvent(Ev(EventHub::kQueueLimit + 1));  // 1024 queued again: fits
  hub.OnInstanceEvent(Ev(EventHub::kQueueLimit + 2));  // 1025th: lost
  EXPECT_EQ(slow->Next(&e, kNoWait), Wait::kLost);
  EXPECT_EQ(slow->Next(&e, kLong), Wait::kLost);  // sticky, returns at once
  for (uint64_t s = EventHub::kQueueLimit + 1; s <= EventHub::kQueueLimit + 2; ++s) {
    ASSERT_EQ(fast->Next(&e, kNoWait), Wait::kEvent);
    EXPECT_EQ(e.sequence, s);
  }
  EXPECT_THAT(EventHub::LostStatus(),
              StatusIs(StatusCode::kResourceExhausted,
                       "watch fell more than 1024 events behind; reconnect and resync with List"));
}

TEST(EventHubTest, SixtyFifthSubscriberRefused) {
  EventHub hub;
  std::vector<std::unique_ptr<EventHub::Subscription>> subs;
  for (size_t i = 0; i < EventHub::kMaxSubscribers; ++i) {
    MIGD_ASSERT_OK_AND_ASSIGN(auto s, hub.Subscribe());
    subs.push_back(std::move(s));
  }
  EXPECT_THAT(hub.Subscribe(), StatusIs(StatusCode::kResourceExhausted,
                                        ::testing::HasSubstr("too many Watch streams (at most 64)")));
  subs.pop_back();
  EXPECT_THAT(hub.Subscribe(), IsOk());
}

TEST(EventHubTest, CloseWakesWaitersAndRefusesNewSubscribers) {
  EventHub hub;
  MIGD_ASSERT_OK_AND_ASSIGN(auto a, hub.Subscribe());
  Wait got = Wait::kEvent;
  std::thread waiter([&] {
    engine::InstanceEvent e;
    got = a->Next(&e, kLong);
  });
  hub.Close();
  waiter.join();
  EXPECT_EQ(got, Wait::kClosed);
  hub.Close();  // idempotent
  hub.OnInstanceEvent(Ev(1));  // ignored after close
  engine::InstanceEvent e;
  EXPECT_EQ(a->Next(&e, kNoWait), Wait::kClosed);
  EXPECT_THAT(hub.Subscribe(), StatusIs(StatusCode::kUnavailable, ::testing::HasSubstr("shutting down")));
}

TEST(StatusMappingTest, CodesAndMessagesRoundTrip) {
  for (int c = 1; c <= 16; ++c) {
    const Status s(static_cast<StatusCode>(c), "msg " + std::to_string(c));
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(g.error_message(), "msg " + std::to_string(c));
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
  EXPECT_TRUE(ToGrpcStatus(OkStatus()).ok());
  EXPECT_THAT(FromGrpcStatus(grpc::Status::OK), IsOk());
  EXPECT_THAT(FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(30), "odd")),
              StatusIs(StatusCode::kUnknown, "gRPC status 30: odd"));
}

}  // namespace
}  // namespace migd::api
