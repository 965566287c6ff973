#include "bench/placement/sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <queue>
#include <utility>

#include "base/status_macros.h"
#include "mig/layout.h"

namespace migd::bench {
namespace {

bool Compatible(const GpuTable& t, int requested, int got) {
  if (requested == got) return true;
  return t.profile(got).compute >= t.profile(requested).compute &&
         t.profile(got).memory >= t.profile(requested).memory;
}

Instance* FindMutable(GpuState& g, int pair) {
  for (Instance& i : g.instances) {
    if (i.pair == pair) return &i;
  }
  return nullptr;
}

void InsertSorted(GpuState& g, const Instance& inst) {
  auto it = std::lower_bound(g.instances.begin(), g.instances.end(), inst.pair,
                             [](const Instance& a, int pair) { return a.pair < pair; });
  g.instances.insert(it, inst);
}

std::string OpWhere(const Op& op) {
  return "gpu " + std::to_string(op.gpu) + " pair " + std::to_string(op.pair);
}

uint64_t Fnv(uint64_t h, int64_t v) {
  if (h == 0) h = 1469598103934665603ull;
  for (int i = 0; i < 8; ++i) {
    h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xFF;
    h *= 1099511628211ull;
  }
  return h;
}

void Percentile(std::vector<double> v, double q, double* out) {
  if (v.empty()) {
    *out = 0;
    return;
  }
  std::sort(v.begin(), v.end());
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  *out = v[k];
}

}  // namespace

const Instance* GpuState::Find(int pair) const {
  for (const Instance& i : instances) {
    if (i.pair == pair) return &i;
  }
  return nullptr;
}

ClusterState EmptyCluster(const GpuTable& table, int gpus) {
  ClusterState s;
  s.table = &table;
  s.gpus.assign(gpus, GpuState{table.empty_state(), table.empty_state(), {}});
  return s;
}

Status ApplyDecision(ClusterState& st, const Request& req, const Decision& d, OpCounters* c) {
  const GpuTable& t = *st.table;
  std::vector<int> assigned(req.profiles.size(), 0);
  for (const Op& op : d.ops) {
    if (op.gpu < 0 || op.gpu >= st.num_gpus() || op.pair < 0 || op.pair >= t.num_pairs()) {
      return InternalError("op out of range: " + OpWhere(op));
    }
    GpuState& g = st.gpus[op.gpu];
    const bool for_request = op.kind == OpKind::kCreate || op.kind == OpKind::kReuse;
    if (for_request) {
      if (op.instance < 0 || op.instance >= static_cast<int>(req.profiles.size())) {
        return InternalError("op for unknown request instance: " + OpWhere(op));
      }
      const int want = req.profiles[op.instance];
      const int got = t.pair(op.pair).profile;
      if (!Compatible(t, want, got)) {
        return InternalError("instance " + std::to_string(op.instance) + " wants " +
                             t.profile(want).key + ", got " + t.profile(got).key);
      }
      if (want != got) ++c->substitutions;
      ++assigned[op.instance];
    }
    switch (op.kind) {
      case OpKind::kCreate:
      case OpKind::kCreateIdle: {
        const int next = t.Add(g.state, op.pair);
        if (next < 0) {
          return InternalError("illegal create on " + OpWhere(op) + " in layout " +
                               t.StateString(g.state));
        }
        g.state = next;
        Instance inst{op.pair, op.kind == OpKind::kCreateIdle, -1, st.now};
        if (op.kind == OpKind::kCreate) {
          inst.owner = req.id;
          g.active_state = t.Add(g.active_state, op.pair);
        }
        InsertSorted(g, inst);
        ++c->creates;
        break;
      }
      case OpKind::kReuse: {
        Instance* inst = FindMutable(g, op.pair);
        if (inst == nullptr || !inst->idle) {
          return InternalError("reuse of a missing or Active instance on " + OpWhere(op));
        }
        inst->idle = false;
        inst->owner = req.id;
        g.active_state = t.Add(g.active_state, op.pair);
        ++c->reuses;
        break;
      }
      case OpKind::kDestroy: {
        Instance* inst = FindMutable(g, op.pair);
        if (inst == nullptr)
          return InternalError("destroy of a missing instance on " + OpWhere(op));
        if (!inst->idle)
          return InternalError("eviction (destroy of an Active instance) on " + OpWhere(op));
        g.instances.erase(g.instances.begin() + (inst - g.instances.data()));
        g.state = t.Remove(g.state, op.pair);
        ++c->destroys;
        ++c->reclaims;
        break;
      }
    }
    if (g.active_state < 0) return InternalError("active state left the table on " + OpWhere(op));
  }
  for (size_t k = 0; k < assigned.size(); ++k) {
    if (assigned[k] != 1) {
      return InternalError("request " + std::to_string(req.id) + " instance " + std::to_string(k) +
                           " assigned " + std::to_string(assigned[k]) + " times");
    }
  }
  c->clears += d.clears;
  c->plugin_restarts += d.plugin_restarts;
  if (d.exhaustive) ++c->exhaustive;
  return OkStatus();
}

Status ReleaseRequest(ClusterState& st, const Request& req, bool keep_idle, OpCounters* c) {
  const GpuTable& t = *st.table;
  size_t released = 0;
  for (GpuState& g : st.gpus) {
    for (size_t i = 0; i < g.instances.size();) {
      Instance& inst = g.instances[i];
      if (inst.idle || inst.owner != req.id) {
        ++i;
        continue;
      }
      ++released;
      g.active_state = t.Remove(g.active_state, inst.pair);
      if (keep_idle) {
        inst.idle = true;
        inst.owner = -1;
        inst.last_used = st.now;
        ++i;
      } else {
        g.state = t.Remove(g.state, inst.pair);
        g.instances.erase(g.instances.begin() + static_cast<std::ptrdiff_t>(i));
        ++c->destroys;
      }
    }
  }
  if (released != req.profiles.size()) {
    return InternalError("request " + std::to_string(req.id) + ": released " +
                         std::to_string(released) + " of " + std::to_string(req.profiles.size()) +
                         " instances");
  }
  return OkStatus();
}

Status ValidateCluster(const ClusterState& st) {
  const GpuTable& t = *st.table;
  for (int gi = 0; gi < st.num_gpus(); ++gi) {
    const GpuState& g = st.gpus[gi];
    mig::Layout layout(t.model());
    uint32_t all = 0, active = 0;
    for (const Instance& inst : g.instances) {
      const PairInfo& p = t.pair(inst.pair);
      Status s = layout.Add(*t.profile(p.profile).gi, mig::Placement{p.start, p.size});
      if (!s.ok()) return InternalError("GPU " + std::to_string(gi) + ": " + s.ToString());
      all |= 1u << inst.pair;
      if (!inst.idle) active |= 1u << inst.pair;
    }
    if (g.state < 0 || t.state(g.state).pair_set != all || g.active_state < 0 ||
        t.state(g.active_state).pair_set != active) {
      return InternalError("GPU " + std::to_string(gi) + ": state does not match its instances");
    }
  }
  return OkStatus();
}

// ---- PlacementAllocator ----

PlacementAllocator::PlacementAllocator(std::unique_ptr<Policy> policy, bool validate)
    : policy_(std::move(policy)), validate_(validate) {}

Status PlacementAllocator::Reset(const RunContext& ctx) {
  state_ = EmptyCluster(*ctx.table, ctx.gpus);
  counters_ = {};
  discard_ = {};
  lat_ = {};
  hash_ = 0;
  measuring_ = false;
  return policy_->Reset(ctx);
}

Status PlacementAllocator::TryAdmit(const Request& req, double now, bool* admitted) {
  state_.now = now;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Decision> d = policy_->Decide(state_, req);
  const auto t1 = std::chrono::steady_clock::now();
  if (measuring_) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    const bool multi = req.profiles.size() > 1;
    (multi ? lat_.multi : lat_.single).push_back(ns);
    const int64_t core = policy_->LastCoreNs();
    if (core >= 0) (multi ? lat_.core_multi : lat_.core_single).push_back(core);
    for (int64_t x : policy_->LastExhaustiveCallNs()) lat_.exhaustive.push_back(x);
  }
  hash_ = Fnv(hash_, req.id);
  *admitted = d.has_value();
  if (!d) {
    hash_ = Fnv(hash_, -1);
    return OkStatus();
  }
  for (const Op& op : d->ops) {
    hash_ = Fnv(hash_, static_cast<int64_t>(op.kind) * 1000000 + op.gpu * 10000 + op.pair * 100 +
                           op.instance);
  }
  MIGD_RETURN_IF_ERROR(ApplyDecision(state_, req, *d, measuring_ ? &counters_ : &discard_)
                           .WithContext(policy_->name()));
  if (validate_) MIGD_RETURN_IF_ERROR(ValidateCluster(state_).WithContext(policy_->name()));
  return OkStatus();
}

Status PlacementAllocator::Release(const Request& req, double now) {
  state_.now = now;
  MIGD_RETURN_IF_ERROR(
      ReleaseRequest(state_, req, policy_->KeepsIdle(), measuring_ ? &counters_ : &discard_));
  if (validate_) MIGD_RETURN_IF_ERROR(ValidateCluster(state_).WithContext(policy_->name()));
  return OkStatus();
}

int PlacementAllocator::ActiveCompute() const {
  int c = 0;
  for (const GpuState& g : state_.gpus) c += state_.table->state(g.active_state).compute;
  return c;
}

int PlacementAllocator::ActiveMemory() const {
  int m = 0;
  for (const GpuState& g : state_.gpus) m += state_.table->state(g.active_state).memory;
  return m;
}

// ---- event loop ----

StatusOr<ArrivalMode> ParseArrivalMode(std::string_view name) {
  if (name == "loss") return ArrivalMode::kLoss;
  if (name == "queue") return ArrivalMode::kQueue;
  return InvalidArgumentError("mode must be loss or queue, got \"" + std::string(name) + "\"");
}

namespace {

// One run of the event loop: arrivals in sequence order, departures from a
// heap, the queue in queue mode; metrics over the measured window.
class Simulation {
 public:
  Simulation(Allocator& alloc, const RunContext& ctx, const std::vector<Request>& requests,
             const SimOptions& options)
      : alloc_(alloc),
        ctx_(ctx),
        t_(*ctx.table),
        requests_(requests),
        options_(options),
        warmup_(
            static_cast<int64_t>(options.warmup_fraction * static_cast<double>(requests.size()))),
        patience_(options.patience * ctx.time_unit),
        class_waits_(t_.num_profiles()) {
    r_.policy = alloc.name();
    r_.class_offered.assign(t_.num_profiles(), 0);
    r_.class_accepted.assign(t_.num_profiles(), 0);
    for (int p = 1; p < t_.num_profiles(); ++p) {
      if (t_.profile(p).compute > t_.profile(largest_).compute) largest_ = p;
    }
  }

  StatusOr<RunResult> Run() {
    for (size_t i = 0; i < requests_.size(); ++i) MIGD_RETURN_IF_ERROR(Arrive(i));
    const double end = requests_.empty() ? 0 : requests_.back().arrival;
    Advance(end);
    for (size_t idx : waiting_) {
      if (requests_[idx].id >= warmup_) ++r_.still_waiting;
      Account(requests_[idx], false);
    }
    Finish(end);
    return r_;
  }

 private:
  void Advance(double now) {
    if (measuring_ && now > last_t_) {
      area_c_ += alloc_.ActiveCompute() * (now - last_t_);
      area_m_ += alloc_.ActiveMemory() * (now - last_t_);
    }
    last_t_ = std::max(last_t_, now);
  }

  void Account(const Request& req, bool ok) {
    if (req.id < warmup_) return;
    ++r_.offered;
    const double st = RequestCompute(t_, req) * req.lifetime;
    r_.offered_slice_time += st;
    if (req.profiles.size() > 1) ++r_.multi_offered;
    for (int p : req.profiles) ++r_.class_offered[p];
    if (!ok) return;
    ++r_.accepted;
    r_.accepted_slice_time += st;
    if (req.profiles.size() > 1) ++r_.multi_accepted;
    for (int p : req.profiles) ++r_.class_accepted[p];
  }

  Status Admit(size_t idx, double now, bool* ok) {
    const Request& req = requests_[idx];
    MIGD_RETURN_IF_ERROR(alloc_.TryAdmit(req, now, ok));
    if (*ok) departures_.push({now + req.lifetime, idx});
    return OkStatus();
  }

  void RecordWait(const Request& req, double wait) {
    if (req.id < warmup_) return;
    waits_.push_back(wait);
    class_waits_[req.profiles[0]].push_back(wait);
  }

  // Queue mode: serve waiting requests in FIFO order (with backfill: any that fit).
  Status Drain(double now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const Request& req = requests_[*it];
      if (now - req.arrival > patience_) {
        if (req.id >= warmup_) ++r_.abandoned;
        Account(req, false);
        it = waiting_.erase(it);
        continue;
      }
      bool ok = false;
      MIGD_RETURN_IF_ERROR(Admit(*it, now, &ok));
      if (ok) {
        RecordWait(req, now - req.arrival);
        Account(req, true);
        it = waiting_.erase(it);
        continue;
      }
      if (!options_.backfill) break;
      ++it;
    }
    return OkStatus();
  }

  // The frag ratio and whole GPUs of the Active layout at an arrival.
  void Sample() {
    const ClusterState* cs = alloc_.cluster();
    if (cs == nullptr) return;
    double f = 0, free_total = 0;
    int whole = 0;
    for (const GpuState& g : cs->gpus) {
      const StateInfo& si = t_.state(g.active_state);
      const double free_g = t_.compute_slices() - si.compute;
      double unplaceable = 0;
      for (int p = 0; p < t_.num_profiles(); ++p) {
        if (!(si.placeable >> p & 1u)) unplaceable += ctx_.class_weights[p];
      }
      f += free_g * unplaceable;
      free_total += free_g;
      if (si.placeable >> largest_ & 1u) ++whole;
    }
    frag_sum_ += free_total > 0 ? f / free_total : 0;
    whole_sum_ += whole;
    ++samples_;
  }

  Status Arrive(size_t i) {
    const Request& req = requests_[i];
    const double now = req.arrival;
    while (!departures_.empty() && departures_.top().first <= now) {
      const auto [when, idx] = departures_.top();
      departures_.pop();
      Advance(when);
      MIGD_RETURN_IF_ERROR(alloc_.Release(requests_[idx], when));
      if (options_.mode == ArrivalMode::kQueue) MIGD_RETURN_IF_ERROR(Drain(when));
    }
    Advance(now);
    if (!measuring_ && req.id >= warmup_) {
      measuring_ = true;
      measure_start_ = now;
      last_t_ = now;
      alloc_.SetMeasuring(true);
    }
    if (measuring_) Sample();
    bool ok = false;
    if (options_.mode == ArrivalMode::kLoss) {
      MIGD_RETURN_IF_ERROR(Admit(i, now, &ok));
      Account(req, ok);
      return OkStatus();
    }
    if (waiting_.empty() || options_.backfill) MIGD_RETURN_IF_ERROR(Admit(i, now, &ok));
    if (ok) {
      RecordWait(req, 0);
      Account(req, true);
    } else {
      waiting_.push_back(i);
    }
    return OkStatus();
  }

  void Finish(double end) {
    const double span = end - measure_start_;
    if (span > 0) {
      const double capacity_c = static_cast<double>(t_.compute_slices()) * ctx_.gpus;
      const double capacity_m = static_cast<double>(t_.memory_slices()) * ctx_.gpus;
      r_.util_compute = area_c_ / (span * capacity_c);
      r_.util_memory = area_m_ / (span * capacity_m);
    }
    if (samples_ > 0) {
      r_.frag_ratio = frag_sum_ / static_cast<double>(samples_);
      r_.whole_gpu_free = whole_sum_ / static_cast<double>(samples_);
    }
    r_.ops = alloc_.counters();
    if (options_.mode == ArrivalMode::kQueue) {
      double sum = 0;
      for (double w : waits_) sum += w;
      r_.wait_mean = waits_.empty() ? 0 : sum / static_cast<double>(waits_.size()) / ctx_.time_unit;
      Percentile(waits_, 0.99, &r_.wait_p99);
      r_.wait_p99 /= ctx_.time_unit;
      r_.class_wait_p99.assign(t_.num_profiles(), 0);
      for (int p = 0; p < t_.num_profiles(); ++p) {
        Percentile(class_waits_[p], 0.99, &r_.class_wait_p99[p]);
        r_.class_wait_p99[p] /= ctx_.time_unit;
      }
    }
    if (const auto* pa = dynamic_cast<const PlacementAllocator*>(&alloc_)) {
      r_.decision_hash = pa->decision_hash();
      r_.policy_errors = pa->policy().Errors();
      r_.solves = pa->policy().Solves();
    }
  }

  Allocator& alloc_;
  const RunContext& ctx_;
  const GpuTable& t_;
  const std::vector<Request>& requests_;
  const SimOptions& options_;
  const int64_t warmup_;
  const double patience_;
  RunResult r_;
  int largest_ = 0;  // the class with the most compute
  // Departures: (time, request index), earliest first; ties by index.
  using Dep = std::pair<double, size_t>;
  std::priority_queue<Dep, std::vector<Dep>, std::greater<Dep>> departures_;
  std::deque<size_t> waiting_;
  std::vector<double> waits_;
  std::vector<std::vector<double>> class_waits_;
  bool measuring_ = false;
  double measure_start_ = 0, last_t_ = 0;
  double area_c_ = 0, area_m_ = 0;
  double frag_sum_ = 0, whole_sum_ = 0;
  int64_t samples_ = 0;
};

}  // namespace

StatusOr<RunResult> RunSimulation(Allocator& alloc, const RunContext& ctx,
                                  const std::vector<Request>& requests, const SimOptions& options) {
  MIGD_RETURN_IF_ERROR(alloc.Reset(ctx));
  return Simulation(alloc, ctx, requests, options).Run();
}

}  // namespace migd::bench
