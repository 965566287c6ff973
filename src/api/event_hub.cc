#include "api/event_hub.h"

#include <string>
#include <utility>

namespace migd::api {

EventHub::~EventHub() { Close(); }

StatusOr<std::unique_ptr<EventHub::Subscription>> EventHub::Subscribe() {
  MutexLock lock(&mu_);
  if (closed_) return UnavailableError("migd is shutting down; reconnect when it is back");
  if (queues_.size() >= kMaxSubscribers) {
    return ResourceExhaustedError("too many Watch streams (at most " +
                                  std::to_string(kMaxSubscribers) +
                                  "); close idle watchers and retry");
  }
  const uint64_t id = next_id_++;
  queues_.emplace(id, std::make_unique<Queue>());
  count_cv_.SignalAll();
  return std::unique_ptr<Subscription>(new Subscription(this, id));
}

void EventHub::Unsubscribe(uint64_t id) {
  MutexLock lock(&mu_);
  queues_.erase(id);
  count_cv_.SignalAll();
}

bool EventHub::WaitForSubscribers(size_t n, std::chrono::milliseconds timeout) const {
  MutexLock lock(&mu_);
  return count_cv_.WaitFor(
      &mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queues_.size() == n; });
}

void EventHub::Close() {
  MutexLock lock(&mu_);
  closed_ = true;
  for (auto& [id, q] : queues_) q->cv.SignalAll();
}

size_t EventHub::subscriber_count() const {
  MutexLock lock(&mu_);
  return queues_.size();
}

uint64_t EventHub::last_sequence() const {
  MutexLock lock(&mu_);
  return last_sequence_;
}

Status EventHub::LostStatus() {
  return ResourceExhaustedError("watch fell more than " + std::to_string(kQueueLimit) +
                                " events behind; reconnect and resync with List");
}

void EventHub::OnInstanceEvent(const engine::InstanceEvent& event) {
  MutexLock lock(&mu_);
  last_sequence_ = event.sequence;
  if (closed_) return;
  for (auto& [id, q] : queues_) {
    if (q->lost) continue;
    if (q->events.size() >= kQueueLimit) {
      // Dropping the backlog bounds memory; the stream ends at its next read.
      q->lost = true;
      q->events.clear();
    } else {
      q->events.push_back(event);
    }
    q->cv.Signal();
  }
}

EventHub::Subscription::~Subscription() { hub_->Unsubscribe(id_); }

EventHub::Wait EventHub::Subscription::Next(engine::InstanceEvent* out,
                                            std::chrono::milliseconds timeout) {
  MutexLock lock(&hub_->mu_);
  auto it = hub_->queues_.find(id_);
  if (it == hub_->queues_.end()) return Wait::kClosed;  // not reachable: we unsubscribe last
  Queue& q = *it->second;
  // The queue object is stable (unique_ptr) while this subscription lives.
  q.cv.WaitFor(&hub_->mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hub_->mu_) {
    return hub_->closed_ || q.lost || !q.events.empty();
  });
  if (hub_->closed_) return Wait::kClosed;
  if (q.lost) return Wait::kLost;
  if (q.events.empty()) return Wait::kTimeout;
  *out = std::move(q.events.front());
  q.events.pop_front();
  return Wait::kEvent;
}

}  // namespace migd::api
