#include "bench/placement/planner_policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "planner/demand_mix.h"
#include "planner/planner.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"

namespace migd::bench {
namespace {

constexpr double kTicksPerLifetime = 1000.0;

class PlannerPolicy : public Policy {
 public:
  explicit PlannerPolicy(const PlannerPolicyOptions& o) : options_(o), mix_(0) {}

  std::string name() const override { return options_.name; }
  bool KeepsIdle() const override { return options_.keep_idle; }
  int64_t LastCoreNs() const override { return core_ns_; }
  int64_t Errors() const override { return errors_; }
  std::vector<int64_t> LastExhaustiveCallNs() const override { return exhaustive_ns_; }
  SolveReport Solves() const override {
    SolveReport r;
    r.value_decisions = static_cast<int64_t>(planner_->counters().value_plans);
    r.cost_order_decisions = static_cast<int64_t>(planner_->counters().cost_order_plans);
    if (planner_->values() == nullptr) return r;
    const planner::ValueServiceCounters c = planner_->values()->counters();
    r.solves = static_cast<int64_t>(c.solves);
    r.failures = static_cast<int64_t>(c.solve_failures);
    r.total_ns = c.total_solve_ns;
    r.max_ns = c.max_solve_ns;
    r.max_bytes = c.max_bytes;
    r.max_states = c.max_states;
    return r;
  }

  Status Reset(const RunContext& ctx) override {
    table_ = ctx.table;
    time_unit_ = ctx.time_unit;
    mix_ = planner::DemandMix(options_.half_life > 0
                                  ? std::llround(options_.half_life * kTicksPerLifetime)
                                  : planner::DemandMix::kNoDecay);
    last_observed_ = -1;
    keys_.assign(ctx.gpus, {});
    for (int g = 0; g < ctx.gpus; ++g) {
      for (int i = 0; i < table_->num_pairs(); ++i) {
        keys_[g].push_back(std::to_string(g) + ":" + std::to_string(i));
      }
    }
    class_of_name_.clear();
    for (int p = 0; p < table_->num_profiles(); ++p)
      class_of_name_[table_->profile(p).gi->name] = p;
    // A fresh planner per run: its values are learned from this run only.
    // Solves run between decisions (ManualExecutor), so every run is
    // reproducible and no decision waits for one, as with migd's background
    // thread.
    planner::PlannerOptions po;
    po.reuse_margin = options_.reuse_margin.one_gpu;
    po.reuse_margin_several_gpus = options_.reuse_margin.several_gpus;
    executor_ = nullptr;
    if (options_.value_policy) {
      auto executor = std::make_unique<planner::ManualExecutor>();
      executor_ = executor.get();
      planner::ValueOptions vo;
      vo.objective = options_.objective;
      if (options_.separable) vo.multi_gpu = planner::MultiGpuValues::kSeparable;
      po.values = std::make_shared<planner::ValueService>(vo, std::move(executor));
    }
    planner_ = std::make_unique<planner::Planner>(po);
    input_ = {};
    input_.gpus.resize(ctx.gpus);
    // One model object per GPU, equal to the table's, as migd's engine holds
    // them (a planner that told GPUs apart by model address would show here).
    models_.assign(static_cast<size_t>(ctx.gpus), table_->model());
    for (int g = 0; g < ctx.gpus; ++g) {
      input_.gpus[g].index = GpuIndex(static_cast<uint32_t>(g));
      input_.gpus[g].model = &models_[static_cast<size_t>(g)];
    }
    return OkStatus();
  }

  std::optional<Decision> Decide(const ClusterState& cs, const Request& req) override {
    core_ns_ = 0;
    exhaustive_ns_.clear();
    const int64_t tick = Tick(cs.now);
    // Once per request (queue mode asks again for a waiting request; first
    // asks come in id order in both queue disciplines).
    const bool first_ask = req.id > last_observed_;
    if (first_ask) {
      last_observed_ = req.id;
      for (int p : req.profiles) mix_.Observe(table_->profile(p).gi->name, tick);
    }
    // Snapshot.
    for (int g = 0; g < cs.num_gpus(); ++g) {
      std::vector<planner::Occupant>& occ = input_.gpus[g].occupants;
      occ.clear();
      for (const Instance& inst : cs.gpus[g].instances) {
        const PairInfo& pi = table_->pair(inst.pair);
        planner::Occupant o;
        o.profile = table_->profile(pi.profile).gi->name;
        o.placement = mig::Placement{pi.start, pi.size};
        o.state = inst.idle ? planner::OccupantState::kIdle : planner::OccupantState::kActive;
        o.key = keys_[g][inst.pair];
        o.last_used = inst.idle ? Tick(inst.last_used) : 0;
        occ.push_back(std::move(o));
      }
    }
    input_.demand = mix_.Weights();
    input_.request.clear();
    for (int p : req.profiles) input_.request.push_back({table_->profile(p).gi->name, {}, {}});

    std::optional<planner::Plan> best;
    if (!req.same_gpu || req.profiles.size() == 1 || cs.num_gpus() == 1) {
      best = Call();
    } else {
      for (int g = 0; g < cs.num_gpus(); ++g) {
        for (planner::InstanceRequest& ir : input_.request) {
          ir.gpu = GpuIndex(static_cast<uint32_t>(g));
        }
        std::optional<planner::Plan> plan = Call();
        if (plan && (!best || plan->score < best->score)) best = std::move(plan);
      }
    }
    if (first_ask) {
      for (planner::InstanceRequest& ir : input_.request) ir.gpu.reset();
      planner_->ObserveArrival(input_, best.has_value());
      if (executor_ != nullptr) executor_->RunPending();
    }
    if (!best) return std::nullopt;
    return ToDecision(*best, req);
  }

 private:
  int64_t Tick(double t) const { return std::llround(t / time_unit_ * kTicksPerLifetime); }

  std::optional<planner::Plan> Call() {
    const uint64_t runs_before = planner_->counters().exhaustive_runs;
    int64_t best_ns = 0;
    StatusOr<planner::Plan> plan = InternalError("not called");
    for (int rep = 0; rep < std::max(1, options_.latency_repeats); ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      plan = planner_->MakePlan(input_);
      const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
      best_ns = rep == 0 ? ns : std::min(best_ns, ns);
    }
    core_ns_ += best_ns;
    if (planner_->counters().exhaustive_runs > runs_before) exhaustive_ns_.push_back(best_ns);
    if (plan.ok()) return std::move(plan).value();
    if (plan.status().code() != StatusCode::kResourceExhausted) {
      // A planner error other than "no plan" is a bug worth seeing.
      if (errors_++ < 5) {
        std::fprintf(stderr, "placement_bench: planner error: %s\n",
                     plan.status().ToString().c_str());
      }
    }
    return std::nullopt;
  }

  std::optional<Decision> ToDecision(const planner::Plan& plan, const Request& req) {
    Decision d;
    d.exhaustive = plan.search == planner::Search::kExhaustive;
    for (const planner::ReclaimedInstance& r : plan.AllReclaims()) {
      const auto [g, pair] = ParseKey(r.key);
      if (g < 0) return Bad("reclaim key " + r.key);
      d.ops.push_back({OpKind::kDestroy, g, pair, -1});
    }
    if (plan.instances.size() != req.profiles.size()) return Bad("instance count");
    for (size_t k = 0; k < plan.instances.size(); ++k) {
      const planner::InstancePlan& ip = plan.instances[k];
      const int g = static_cast<int>(ip.gpu.value());
      if (ip.stage == planner::Stage::kReuse) {
        const auto [kg, pair] = ParseKey(ip.reuse_key);
        if (kg != g) return Bad("reuse key " + ip.reuse_key);
        d.ops.push_back({OpKind::kReuse, g, pair, static_cast<int>(k)});
        continue;
      }
      auto it = class_of_name_.find(ip.profile);
      if (it == class_of_name_.end()) return Bad("profile " + ip.profile);
      const int pair = table_->PairOf(it->second, ip.placement.start);
      if (pair < 0) return Bad("placement " + ip.placement.ToString());
      d.ops.push_back({OpKind::kCreate, g, pair, static_cast<int>(k)});
    }
    return d;
  }

  std::optional<Decision> Bad(const std::string& what) {
    if (errors_++ < 5) std::fprintf(stderr, "placement_bench: unexpected plan: %s\n", what.c_str());
    return std::nullopt;
  }

  static std::pair<int, int> ParseKey(const std::string& key) {
    const size_t colon = key.find(':');
    if (colon == std::string::npos) return {-1, -1};
    try {
      return {std::stoi(key.substr(0, colon)), std::stoi(key.substr(colon + 1))};
    } catch (const std::exception&) {
      return {-1, -1};
    }
  }

  PlannerPolicyOptions options_;
  std::unique_ptr<planner::Planner> planner_ = std::make_unique<planner::Planner>();
  planner::ManualExecutor* executor_ = nullptr;  // owned by the planner's ValueService
  planner::DemandMix mix_;
  std::vector<mig::GpuModel> models_;  // per GPU; input_ points into it
  planner::PlanInput input_;
  const GpuTable* table_ = nullptr;
  double time_unit_ = 1;
  std::vector<std::vector<std::string>> keys_;
  std::map<std::string, int, std::less<>> class_of_name_;
  int64_t last_observed_ = -1;
  int64_t core_ns_ = 0;
  std::vector<int64_t> exhaustive_ns_;
  int64_t errors_ = 0;
};

}  // namespace

std::unique_ptr<Policy> MakePlannerPolicy(const PlannerPolicyOptions& options) {
  return std::make_unique<PlannerPolicy>(options);
}

}  // namespace migd::bench
