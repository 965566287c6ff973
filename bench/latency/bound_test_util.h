// File: bench/latency/bound_test_util.h
//
// For the bound tests: the H100-80GB's table of base profiles, built once.
#ifndef MIGD_BENCH_LATENCY_BOUND_TEST_UTIL_H_
#define MIGD_BENCH_LATENCY_BOUND_TEST_UTIL_H_

#include "bench/placement/table.h"
#include "mig/catalog.h"

namespace migd::bench::latency {

inline const GpuTable& H100() {
  static const GpuTable* table = [] {
    const mig::GpuModel* m = mig::Catalog::Default().FindModel("h100-80gb");
    auto t = GpuTable::Build(*m, false);
    return new GpuTable(std::move(*t));
  }();
  return *table;
}

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_BOUND_TEST_UTIL_H_
