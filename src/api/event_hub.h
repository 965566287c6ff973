// File: api/event_hub.h
//
// EventHub: fans the Manager's instance events out to Watch streams. Each
// subscriber has its own bounded queue (kQueueLimit events). OnInstanceEvent
// runs with the Manager's registry lock held, so it only copies the event
// into every queue; it never blocks on a slow reader. A subscriber whose
// queue is full is marked lost (its queue is dropped) and its stream ends
// with RESOURCE_EXHAUSTED: the client must reconnect and resync with List.
//
// Example (one Watch stream):
//   MIGD_ASSIGN_OR_RETURN(std::unique_ptr<EventHub::Subscription> sub, hub.Subscribe());
//   engine::InstanceEvent ev;
//   while (true) {
//     switch (sub->Next(&ev, std::chrono::milliseconds(200))) {
//       case EventHub::Wait::kEvent: Send(ev); break;
//       case EventHub::Wait::kTimeout: if (cancelled()) return; break;
//       case EventHub::Wait::kLost: return EventHub::LostStatus();
//       case EventHub::Wait::kClosed: return shutting down;
//     }
//   }
//
// Thread-safety: all methods are thread-safe. A Subscription is used by one
// thread at a time (its stream's handler) and must be destroyed before the hub.
#ifndef MIGD_API_EVENT_HUB_H_
#define MIGD_API_EVENT_HUB_H_

#include <absl/base/thread_annotations.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "base/mutex.h"
#include "base/status.h"
#include "engine/events.h"

namespace migd::api {

class EventHub final : public engine::EngineListener {
 public:
  static constexpr size_t kQueueLimit = 1024;
  static constexpr size_t kMaxSubscribers = 64;

  enum class Wait {
    kEvent,    // *out holds the next event
    kTimeout,  // nothing arrived within the timeout
    kLost,     // the subscriber fell more than kQueueLimit events behind
    kClosed,   // the hub was closed (shutdown)
  };

  class Subscription {
   public:
    ~Subscription();  // unsubscribes
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    // Waits up to `timeout` for the next event. Lost and closed are sticky
    // and take precedence over queued events.
    Wait Next(engine::InstanceEvent* out, std::chrono::milliseconds timeout);

   private:
    friend class EventHub;
    Subscription(EventHub* hub, uint64_t id) : hub_(hub), id_(id) {}
    EventHub* const hub_;
    const uint64_t id_;
  };

  EventHub() = default;
  ~EventHub() override;
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // A new subscriber that receives every event from now on.
  // kResourceExhausted beyond kMaxSubscribers; kUnavailable after Close().
  StatusOr<std::unique_ptr<Subscription>> Subscribe();

  // Ends every subscription (kClosed) and refuses new ones. Idempotent.
  void Close();

  size_t subscriber_count() const;
  // Waits up to `timeout` until exactly `n` subscribers exist; false on
  // timeout. For tests and shutdown diagnostics.
  bool WaitForSubscribers(size_t n, std::chrono::milliseconds timeout) const;
  // The sequence of the last event received (0 if none).
  uint64_t last_sequence() const;

  // The status a lost subscriber's stream ends with.
  static Status LostStatus();

  // engine::EngineListener.
  void OnInstanceEvent(const engine::InstanceEvent& event) override;
  void OnAllocation(const engine::AllocationOutcome&) override {}
  void OnReclaim(engine::EventReason, const engine::InstanceView&) override {}

 private:
  // One subscriber's queue. Reached only through queues_, so guarded by
  // mu_ like it (the analysis cannot name an enclosing object's lock here).
  struct Queue {
    std::deque<engine::InstanceEvent> events;
    bool lost = false;
    CondVar cv;
  };
  void Unsubscribe(uint64_t id);

  mutable Mutex mu_;
  mutable CondVar count_cv_;  // subscriber count changed
  std::map<uint64_t, std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace migd::api

#endif  // MIGD_API_EVENT_HUB_H_
