// File: planner/plan_json.h
//
// JSON forms of the planner's input (GPU layouts, request, demand mix) and
// output (Plan), and a one-line request syntax, so that `migctl plan` and the
// benchmark can turn a layout file plus a request string into a PlanInput and
// print the Plan. Documents are read with base/json_reader.h: every error is
// kInvalidArgument "<source>: <JSON pointer>: expected <X>, got <Y>" (e.g.
// "h100.json: /gpus/1/instances/0/state: expected one of active, idle,
// error, foreign, got \"busy\""). Unknown fields are rejected, so a typo is
// not silently ignored.
//
// Input document (the layout file; "request" and "demand" are optional):
//   {
//     "gpus": [
//       {"index": 0, "model": "h100-80gb",            // a Catalog model key
//        "instances": [
//          {"profile": "1g.10gb", "placement": "0:1", "state": "active", "key": "MIG-..."},
//          {"profile": "3g.40gb", "placement": "4:4", "state": "idle", "key": "MIG-...",
//           "lastUsed": 1200}]}],
//     "request": [{"profile": "3g.40gb", "gpu": 0, "placement": "4:4"}],  // or a request string
//     "demand": {"1g.10gb": 2.5, "3g.40gb": 1}
//   }
//   placement: "start:size" (nvidia-smi -lgipp notation); state: active | idle
//   | error | foreign; key: required for active and idle; lastUsed: integer
//   tick, defaults to 0.
//
// Request string: items separated by commas, each `[gpuN/]PROFILE[@START:SIZE]`:
//   "1g.10gb"                    one 1g.10gb anywhere
//   "3g.40gb, 1g.10gb, 1g.10gb"  three instances, placed jointly
//   "gpu1/3g.40gb@4:4"           exactly GPU 1 at 4:4 (HAMi-style)
//   "gpu0/2g.20gb"               any placement on GPU 0
//
// Plan document:
//   {"stage": "reclaim", "search": "greedy",
//    "instances": [{"stage": "reclaim", "gpu": 0, "profile": "3g.40gb", "profileId": 9,
//                   "placement": "4:4", "reclaim": [{"gpu": 0, "key": "MIG-...",
//                   "profile": "1g.10gb", "placement": "4:1", "lastUsed": 7}]},
//                  {"stage": "reuse", "gpu": 1, "profile": "1g.10gb", "profileId": 19,
//                   "placement": "6:1", "reuseKey": "MIG-..."}],
//    "score": {"destroyedSlices": 1, ...}, "stats": {"candidatesExamined": 12, ...}}
// PlanToJson output is deterministic (fixed key order, no floating point), so
// equal plans give equal bytes.
//
// Thread-safety: free functions over values; safe to call concurrently.
#ifndef MIGD_PLANNER_PLAN_JSON_H_
#define MIGD_PLANNER_PLAN_JSON_H_

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mig/catalog.h"
#include "planner/planner.h"

namespace migd::planner {

// Parses an input document. Model keys are resolved in `catalog`, which must
// outlive the returned PlanInput (it points into it). `source` (e.g. the file
// name) opens every message. kInvalidArgument names the member at fault:
// malformed JSON, a missing or mistyped member, an unknown member, model,
// state or placement text. Semantic checks (profiles known to the model,
// overlaps, keys) are MakePlan's.
StatusOr<PlanInput> PlanInputFromJson(std::string_view text, const mig::Catalog& catalog,
                                      std::string_view source = "");
StatusOr<PlanInput> PlanInputFromJsonValue(const nlohmann::json& doc, const mig::Catalog& catalog,
                                           std::string_view source = "");

// The input document of `input`, GPUs and instances in the given order.
// "request" and "demand" are written only when non-empty.
// REQUIRES: every GPU has a model.
std::string PlanInputToJson(const PlanInput& input);
nlohmann::json PlanInputToJsonValue(const PlanInput& input);

// Parses the request syntax above. kInvalidArgument names the item at fault
// (empty item, bad GPU prefix, bad placement).
StatusOr<std::vector<InstanceRequest>> ParseRequest(std::string_view text);
// The request syntax of `request` (ParseRequest's inverse).
std::string RequestToString(const std::vector<InstanceRequest>& request);

// The plan document (pretty-printed with 2-space indent for PlanToJson).
std::string PlanToJson(const Plan& plan);
nlohmann::json PlanToJsonValue(const Plan& plan);
// Parses a plan document; kInvalidArgument names the member at fault.
StatusOr<Plan> PlanFromJson(std::string_view text, std::string_view source = "");

}  // namespace migd::planner

#endif  // MIGD_PLANNER_PLAN_JSON_H_
