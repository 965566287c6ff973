#include "api/event_hub.h"

#include <string>
#include <utility>

namespace migd::api {

EventHub::~EventHub() { Close(); }

StatusOr<std::unique_ptr<EventHub::Subscription>> EventHub::Subscribe() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return UnavailableError("migd is shutting down; reconnect when it is back");
  if (queues_.size() >= kMaxSubscribers) {
    return ResourceExhaustedError("too many Watch streams (at most " +
                                  std::to_string(kMaxSubscribers) +
                                  "); close idle watchers and retry");
  }
  const uint64_t id = next_id_++;
  queues_.emplace(id, std::make_unique<Queue>());
  count_cv_.notify_all();
  return std::unique_ptr<Subscription>(new Subscription(this, id));
}

void EventHub::Unsubscribe(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  queues_.erase(id);
  count_cv_.notify_all();
}

bool EventHub::WaitForSubscribers(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return count_cv_.wait_for(lock, timeout, [&] { return queues_.size() == n; });
}

void EventHub::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (auto& [id, q] : queues_) q->cv.notify_all();
}

size_t EventHub::subscriber_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queues_.size();
}

uint64_t EventHub::last_sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_sequence_;
}

Status EventHub::LostStatus() {
  return ResourceExhaustedError("watch fell more than " + std::to_string(kQueueLimit) +
                                " events behind; reconnect and resync with List");
}

void EventHub::OnInstanceEvent(const engine::InstanceEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
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
    q->cv.notify_one();
  }
}

EventHub::Subscription::~Subscription() { hub_->Unsubscribe(id_); }

EventHub::Wait EventHub::Subscription::Next(engine::InstanceEvent* out,
                                            std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(hub_->mu_);
  auto it = hub_->queues_.find(id_);
  if (it == hub_->queues_.end()) return Wait::kClosed;  // not reachable: we unsubscribe last
  Queue& q = *it->second;
  // The queue object is stable (unique_ptr) while this subscription lives.
  q.cv.wait_for(lock, timeout, [&] { return hub_->closed_ || q.lost || !q.events.empty(); });
  if (hub_->closed_) return Wait::kClosed;
  if (q.lost) return Wait::kLost;
  if (q.events.empty()) return Wait::kTimeout;
  *out = std::move(q.events.front());
  q.events.pop_front();
  return Wait::kEvent;
}

}  // namespace migd::api
