#include "cli/plan.h"

#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "cli/probe.h"
#include "mig/catalog.h"
#include "planner/plan_json.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"

namespace migd::cli {
namespace {

char StateLetter(planner::OccupantState state) {
  switch (state) {
    case planner::OccupantState::kActive:
      return 'A';
    case planner::OccupantState::kIdle:
      return 'I';
    case planner::OccupantState::kError:
      return 'E';
    case planner::OccupantState::kForeign:
      return 'F';
  }
  return '?';
}

void Paint(std::string& units, const mig::Placement& p, char c) {
  for (uint32_t u = p.start; u < p.end() && u < units.size(); ++u) units[u] = c;
}

std::string Render(const std::string& units) {
  std::string out = "[";
  for (size_t i = 0; i < units.size(); ++i) {
    if (i > 0) out += ' ';
    out += units[i];
  }
  return out + "]";
}

std::string Why(const planner::InstancePlan& p) {
  switch (p.stage) {
    case planner::Stage::kReuse:
      return "reuse Idle instance " + p.reuse_key + " (no GI/CI created)";
    case planner::Stage::kFree:
      return "create in free space";
    case planner::Stage::kReclaim: {
      std::string s = "create after reclaiming";
      for (const planner::ReclaimedInstance& r : p.reclaim) {
        s += " " + r.profile + "@" + r.placement.ToString() + " (" + r.key + ", last used " +
             std::to_string(r.last_used) + ")";
      }
      return s;
    }
  }
  return "";
}

}  // namespace

std::string SliceMap(const planner::GpuLayout& gpu, const planner::Plan* plan) {
  std::string units(gpu.model != nullptr ? gpu.model->memory_slices : 0, '.');
  for (const planner::Occupant& o : gpu.occupants) Paint(units, o.placement, StateLetter(o.state));
  if (plan != nullptr) {
    for (const planner::ReclaimedInstance& r : plan->AllReclaims()) {
      if (r.gpu == gpu.index) Paint(units, r.placement, '.');
    }
    for (const planner::InstancePlan& i : plan->instances) {
      if (i.gpu == gpu.index) {
        Paint(units, i.placement, i.stage == planner::Stage::kReuse ? 'R' : '+');
      }
    }
  }
  return Render(units);
}

namespace {

// The layout file with the request of --request (if given); exit code on error.
StatusOr<planner::PlanInput> LoadInput(const PlanOptions& options, std::ostream& err, int* rc) {
  *rc = kExitUsage;
  if (options.layout_file.empty()) {
    err << "migctl plan: --layout FILE is required (the planner input document, see "
           "docs/planner.md)\n";
    return InvalidArgumentError("no layout");
  }
  StatusOr<std::string> text = ReadFileToString(options.layout_file, 4 << 20);
  if (!text.ok()) {
    err << "migctl plan: " << text.status().ToString() << "\n";
    return text.status();
  }
  StatusOr<planner::PlanInput> input =
      planner::PlanInputFromJson(*text, mig::Catalog::Default(), options.layout_file);
  if (!input.ok()) {
    err << "migctl plan: " << input.status().message() << "\n";
    return input.status();
  }
  if (!options.request.empty()) {
    StatusOr<std::vector<planner::InstanceRequest>> request =
        planner::ParseRequest(options.request);
    if (!request.ok()) {
      err << "migctl plan: --request: " << request.status().message() << "\n";
      return request.status();
    }
    input->request = *std::move(request);
  }
  if (input->request.empty()) {
    err << "migctl plan: no request: pass --request 'PROFILE[,PROFILE...]' or put \"request\" "
           "in the layout file\n";
    return InvalidArgumentError("no request");
  }
  *rc = kExitOk;
  return input;
}

// A planner with the value policy, its values solved here for the file's
// demand at --load (a synchronous solve: this is a one-shot command); the
// cost order alone without a demand or with --policy cost.
StatusOr<std::unique_ptr<planner::Planner>> MakePlanner(const PlanOptions& options,
                                                        const planner::PlanInput& input) {
  if (options.policy != "value" && options.policy != "cost") {
    return InvalidArgumentError("--policy: want value or cost, got '" + options.policy + "'");
  }
  if (!(options.load > 0 && options.load < 100)) {
    return InvalidArgumentError("--load: want an offered load per GPU in (0, 100)");
  }
  StatusOr<planner::Objective> objective = planner::ParseObjective(options.objective);
  if (!objective.ok()) return objective.status().WithContext("--objective");
  StatusOr<planner::ReuseMargins> margin = planner::ParseReuseMargin(options.reuse_margin);
  if (!margin.ok()) return margin.status().WithContext("--reuse-margin");
  if (options.policy != "value" || input.demand.empty()) {
    return std::make_unique<planner::Planner>();
  }
  auto executor = std::make_unique<planner::ManualExecutor>();
  planner::ManualExecutor* solve = executor.get();
  planner::ValueOptions vo;
  vo.objective = *objective;
  auto values = std::make_shared<planner::ValueService>(vo, std::move(executor));
  std::vector<const mig::GpuModel*> models;
  for (const planner::GpuLayout& g : input.gpus) models.push_back(g.model);
  values->Prime(input.demand, options.load, models);
  solve->RunPending();
  return std::make_unique<planner::Planner>(
      planner::PlannerOptions{.values = values,
                              .reuse_margin = margin->one_gpu,
                              .reuse_margin_several_gpus = margin->several_gpus});
}

std::string ValueText(int64_t value_loss) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f",
                static_cast<double>(value_loss) / static_cast<double>(planner::kValueScale));
  return buf;
}

std::string CandidateText(const planner::RankedCandidate& c, bool values) {
  std::string s = "GPU " + std::to_string(c.gpu.value()) + " at " + c.placement.ToString() + " (" +
                  std::string(planner::StageName(c.stage)) + ")";
  if (values) return s + ", value lost " + ValueText(c.cost.value_loss);
  char buf[32];
  std::snprintf(
      buf, sizeof(buf), "%.1f%%",
      100.0 * static_cast<double>(c.cost.pin_loss) / static_cast<double>(planner::kScoreScale));
  return s + ", gives up " + buf + " of a GPU's options";
}

void PrintChoices(planner::Planner& planner, const planner::PlanInput& input,
                  const planner::Plan& plan, std::ostream& out) {
  StatusOr<std::vector<planner::InstanceChoice>> why = planner.ExplainChoices(input, plan);
  if (!why.ok()) return;
  const bool values = plan.stats.value_policy;
  out << "\n  "
      << (values ? "value lost (expected future "
                 : "cost (share of one GPU's (profile, placement) pairs, ")
      << (values ? "acceptances given up; lower is better)" : "Idle counted as free)")
      << ", chosen and next best:\n";
  for (size_t i = 0; i < why->size(); ++i) {
    const planner::InstanceChoice& c = (*why)[i];
    out << "  #" << i << " chosen    " << CandidateText(c.chosen, values) << "\n";
    out << "  #" << i << " next best "
        << (c.next_best ? CandidateText(*c.next_best, values) : "none (no other placement fits)")
        << "\n";
  }
}

void PrintTable(planner::Planner& planner, const planner::PlanInput& input,
                const planner::Plan& plan, std::ostream& out) {
  out << "request: " << planner::RequestToString(input.request) << "\n";
  out << "plan:    stage " << planner::StageName(plan.stage) << ", "
      << planner::SearchName(plan.search) << " search, " << plan.score.creates << " create(s), "
      << plan.score.destroyed_instances << " reclaim(s) (" << plan.score.destroyed_slices
      << " memory slices), " << (plan.stats.value_policy ? "value policy" : "cost order") << "\n\n";
  for (size_t i = 0; i < plan.instances.size(); ++i) {
    const planner::InstancePlan& p = plan.instances[i];
    out << "  #" << i << " " << p.profile << " (id " << p.profile_id.value() << ") -> GPU "
        << p.gpu.value() << " at " << p.placement.ToString() << ": " << Why(p) << "\n";
  }
  std::set<GpuIndex> touched;
  for (const planner::InstancePlan& p : plan.instances) touched.insert(p.gpu);
  out << "\n  slice maps (A active, I idle, E error, F foreign, . free, + created, R reused)\n";
  for (const planner::GpuLayout& gpu : input.gpus) {
    if (touched.count(gpu.index) == 0) continue;
    out << "  GPU " << gpu.index.value() << " " << gpu.model->key << "  before "
        << SliceMap(gpu, nullptr) << "  after " << SliceMap(gpu, &plan) << "\n";
  }
  PrintChoices(planner, input, plan, out);
  if (plan.stats.value_policy) {
    out << "\n  why: each placement gives up the least value (the relative values of the GPU's "
           "layouts for the demand, summed over GPUs; Idle instances count as free); among "
           "equal values reuse beats create beats reclaim (docs/planner.md).\n";
  } else {
    out << "\n  why: the planner keeps the most profiles placeable somewhere on the node, then "
           "avoids opening an empty GPU, then keeps the most (profile, placement) pairs "
           "creatable on the chosen GPU counting Idle instances as free; only then does it "
           "prefer reuse over create over reclaim, and the fullest GPU, lowest GPU index and "
           "start.\n";
  }
}

}  // namespace

int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  int rc = kExitOk;
  StatusOr<planner::PlanInput> input = LoadInput(options, err, &rc);
  if (!input.ok()) return rc;
  StatusOr<std::unique_ptr<planner::Planner>> planner = MakePlanner(options, *input);
  if (!planner.ok()) {
    err << "migctl plan: " << planner.status().message() << "\n";
    return kExitUsage;
  }
  StatusOr<planner::Plan> plan = (*planner)->MakePlan(*input);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kResourceExhausted) {
      err << "migctl plan: nothing fits: " << plan.status().message() << "\n";
      return kExitNoPlan;
    }
    err << "migctl plan: " << plan.status().message() << "\n";
    return kExitUsage;
  }
  if (options.output == "json") {
    out << planner::PlanToJson(*plan) << "\n";
    return kExitOk;
  }
  PrintTable(**planner, *input, *plan, out);
  return kExitOk;
}

}  // namespace migd::cli
