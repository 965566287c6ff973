#include "cli/plan.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "cli/probe.h"
#include "mig/catalog.h"
#include "planner/plan_json.h"

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

int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  if (options.layout_file.empty()) {
    err << "migctl plan: --layout FILE is required (the planner input document, see "
           "docs/planner.md)\n";
    return kExitUsage;
  }
  StatusOr<std::string> text = ReadFileToString(options.layout_file, 4 << 20);
  if (!text.ok()) {
    err << "migctl plan: " << text.status().ToString() << "\n";
    return kExitUsage;
  }
  StatusOr<planner::PlanInput> input =
      planner::PlanInputFromJson(*text, mig::Catalog::Default(), options.layout_file);
  if (!input.ok()) {
    err << "migctl plan: " << input.status().message() << "\n";
    return kExitUsage;
  }
  if (!options.request.empty()) {
    StatusOr<std::vector<planner::InstanceRequest>> request =
        planner::ParseRequest(options.request);
    if (!request.ok()) {
      err << "migctl plan: --request: " << request.status().message() << "\n";
      return kExitUsage;
    }
    input->request = *std::move(request);
  }
  if (input->request.empty()) {
    err << "migctl plan: no request: pass --request 'PROFILE[,PROFILE...]' or put \"request\" "
           "in the layout file\n";
    return kExitUsage;
  }

  planner::Planner planner;
  StatusOr<planner::Plan> plan = planner.MakePlan(*input);
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
  out << "request: " << planner::RequestToString(input->request) << "\n";
  out << "plan:    stage " << planner::StageName(plan->stage) << ", "
      << planner::SearchName(plan->search) << " search, " << plan->score.creates << " create(s), "
      << plan->score.destroyed_instances << " reclaim(s) (" << plan->score.destroyed_slices
      << " memory slices)\n\n";
  for (size_t i = 0; i < plan->instances.size(); ++i) {
    const planner::InstancePlan& p = plan->instances[i];
    out << "  #" << i << " " << p.profile << " (id " << p.profile_id.value() << ") -> GPU "
        << p.gpu.value() << " at " << p.placement.ToString() << ": " << Why(p) << "\n";
  }
  std::set<GpuIndex> touched;
  for (const planner::InstancePlan& p : plan->instances) touched.insert(p.gpu);
  out << "\n  slice maps (A active, I idle, E error, F foreign, . free, + created, R reused)\n";
  for (const planner::GpuLayout& gpu : input->gpus) {
    if (touched.count(gpu.index) == 0) continue;
    out << "  GPU " << gpu.index.value() << " " << gpu.model->key << "  before "
        << SliceMap(gpu, nullptr) << "  after " << SliceMap(gpu, &*plan) << "\n";
  }
  char loss[32];
  std::snprintf(loss, sizeof(loss), "%.1f%%",
                100.0 * static_cast<double>(plan->score.pin_loss) /
                    static_cast<double>(planner::kScoreScale));
  out << "\n  why: the planner keeps the most profiles placeable somewhere on the node, then "
         "avoids opening an empty GPU, then keeps the most (profile, placement) pairs creatable "
         "on the chosen GPU counting Idle instances as free (this plan gives up "
      << loss << " of one GPU's options); only then does it prefer reuse over create over "
      << "reclaim, and the fullest GPU, lowest GPU index and start.\n";
  return kExitOk;
}

}  // namespace migd::cli
