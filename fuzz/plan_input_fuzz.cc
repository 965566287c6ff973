// Fuzz target: planner layout input (planner/plan_json.h), the file
// `migctl plan` and the benchmarks read, plus the request syntax and the plan
// document.
//
// Input: one text, tried as a layout document, a request string and a plan
// document. Properties: no parser crashes or throws; a layout that parses
// re-encodes to a document that parses to the same encoding; a small parsed
// layout can be planned without crashing, and a plan (made or parsed)
// survives PlanToJson/PlanFromJson unchanged; a request string survives
// RequestToString/ParseRequest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "mig/catalog.h"
#include "planner/plan_json.h"
#include "planner/planner.h"

namespace {

namespace planner = migd::planner;

// Bounds the planner's search so one input stays well under a second; the
// parsers themselves are exercised on every input regardless.
constexpr size_t kMaxPlannedGpus = 4;
constexpr size_t kMaxPlannedRequest = 4;

void CheckPlanRoundTrip(const planner::Plan& plan) {
  const std::string text = planner::PlanToJson(plan);
  migd::StatusOr<planner::Plan> again = planner::PlanFromJson(text);
  FUZZ_CHECK(again.ok(), "PlanToJson output does not parse");
  FUZZ_CHECK(*again == plan, "plan changed across PlanToJson/PlanFromJson");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const migd::mig::Catalog& catalog = migd::mig::Catalog::Default();

  migd::StatusOr<planner::PlanInput> input = planner::PlanInputFromJson(text, catalog);
  if (input.ok()) {
    const std::string encoded = planner::PlanInputToJson(*input);
    migd::StatusOr<planner::PlanInput> again = planner::PlanInputFromJson(encoded, catalog);
    FUZZ_CHECK(again.ok(), "PlanInputToJson output does not parse");
    FUZZ_CHECK(planner::PlanInputToJson(*again) == encoded, "layout changed across a round trip");
    if (input->gpus.size() <= kMaxPlannedGpus && input->request.size() <= kMaxPlannedRequest) {
      migd::StatusOr<planner::Plan> plan = planner::MakePlan(*input);
      if (plan.ok()) {
        FUZZ_CHECK(plan->instances.size() == input->request.size(),
                   "a plan does not cover every requested instance");
        CheckPlanRoundTrip(*plan);
      }
    }
  }

  migd::StatusOr<std::vector<planner::InstanceRequest>> request = planner::ParseRequest(text);
  if (request.ok()) {
    const std::string encoded = planner::RequestToString(*request);
    migd::StatusOr<std::vector<planner::InstanceRequest>> again = planner::ParseRequest(encoded);
    FUZZ_CHECK(again.ok(), "RequestToString output does not parse");
    FUZZ_CHECK(planner::RequestToString(*again) == encoded, "request changed across a round trip");
  }

  migd::StatusOr<planner::Plan> plan = planner::PlanFromJson(text);
  if (plan.ok()) CheckPlanRoundTrip(*plan);
  return 0;
}
