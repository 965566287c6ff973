// File: cli/plan.h
//
// `migctl plan`: offline planning. Reads a layout file (the planner's input
// document, planner/plan_json.h: GPUs with their model key and occupied
// placements), takes the request from --request (or the file's "request"),
// runs the product planner and prints the plan and why: per instance whether
// it reuses an Idle instance, is created in free space, or is created after
// reclaiming Idle instances, the value it gives up and the next-best
// candidate's, with a slice map of every touched GPU before and after.
// Touches no GPU and needs no driver. With the value policy (the default
// when the file has a "demand"), the values are solved for that demand at
// --load before planning; without a demand the cost order decides.
//
// Example:
//   migctl plan --layout h100.json --request 'gpu0/3g.40gb@4:4,1g.10gb'
//
// Exit codes: 0 a plan exists; 1 bad input (file, JSON field or request
// text named in the message); 4 nothing fits (the message names what blocks).
//
// Thread-safety: RunPlan is a free function; safe to call concurrently.
#ifndef MIGD_CLI_PLAN_H_
#define MIGD_CLI_PLAN_H_

#include <ostream>
#include <string>

#include "cli/exit_codes.h"
#include "planner/planner.h"

namespace migd::cli {

struct PlanOptions {
  std::string layout_file;            // required
  std::string request;                // overrides the file's "request" when not empty
  std::string output = "table";       // table | json
  std::string policy = "value";       // value | cost (as planner.policy)
  std::string objective = "count";    // count | slices (value policy)
  double load = 0.9;                  // offered load per GPU the values assume
  std::string reuse_margin = "auto";  // auto | off | a number (as planner.reuseMargin; its default)
};

int RunPlan(const PlanOptions& options, std::ostream& out, std::ostream& err);

// One line per memory unit of `gpu`: '.' free, 'A' Active, 'I' Idle, 'E'
// Error, 'F' Foreign; with `plan`, the state after it: '+' created, 'R'
// reused, and reclaimed units become free or new. E.g. "[A A . . + + + +]".
std::string SliceMap(const planner::GpuLayout& gpu, const planner::Plan* plan);

}  // namespace migd::cli

#endif  // MIGD_CLI_PLAN_H_
