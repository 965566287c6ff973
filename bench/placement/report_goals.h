// File: bench/placement/report_goals.h
//
// The "Goals: met or not" section of the placement report: which cells are
// in scope, one row per goal with the measured result and met / not met, and
// the list of every cell where migd is below the best baseline.
//
// Thread-safety: plain functions.
#ifndef MIGD_BENCH_PLACEMENT_REPORT_GOALS_H_
#define MIGD_BENCH_PLACEMENT_REPORT_GOALS_H_

#include <string>

#include "bench/placement/report_util.h"

namespace migd::bench::report {

struct GoalSection {
  std::string scope;     // "synthetic mixes ... × N {1,2,4,8}; Alibaba ..."
  std::string table;     // markdown table, one row per goal
  std::string deficits;  // <details> list of the cells below the best baseline
};

GoalSection Goals(const Results& results);

}  // namespace migd::bench::report

#endif  // MIGD_BENCH_PLACEMENT_REPORT_GOALS_H_
