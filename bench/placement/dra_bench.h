// File: bench/placement/dra_bench.h
//
// The DRA benchmark (docs/benchmarks/dra.md): the same workloads as the
// placement benchmark (synthetic mixes, the Alibaba traces, adversarial
// scripts; common random numbers: every policy of a cell runs on the very
// same request sequence), run under DRA with NVIDIA's device order (destroy
// on unprepare) and with migd's order and Idle reuse (dra_policy.h), in
// loss mode. Per cell: acceptance, creates and destroys per 1,000 admitted
// claims, the share of instances reused, time-to-ready (mean, p50, p99) from
// the latency model, each with 95% confidence intervals over seeds, and the
// paired difference migd - NVIDIA.
//
// Thread-safety: RunDraBench is called from one thread; it owns its workers.
#ifndef MIGD_BENCH_PLACEMENT_DRA_BENCH_H_
#define MIGD_BENCH_PLACEMENT_DRA_BENCH_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/placement/dra_policy.h"
#include "bench/placement/trace.h"
#include "bench/placement/workload.h"

namespace migd::bench {

struct DraBenchSpec {
  std::string model = "a100-40gb";
  std::vector<std::string> mixes = {"uniform"};
  std::vector<double> loads = {0.9};
  std::vector<int> gpus = {8};
  int seeds = 5;
  uint64_t seed_base = 1;
  int events = 4000;
  double warmup_fraction = 0.1;
  std::optional<std::string> trace_path;  // replaces mixes
  TraceMapping trace_mapping = TraceMapping::kComputeCeil;
  std::optional<std::string> script;  // replaces mixes, loads, GPUs
  DraLatency latency;
  int kubernetes_minor = 36;
  int jobs = 1;
  bool validate = false;  // mig::Layout check after every decision
};

// The results document: {"spec": ..., "cells": [{workload, load, gpus,
// policies: {name: {acc, creates_per_1000, destroys_per_1000, reuse_share,
// ttr_mean_ms, ttr_p50_ms, ttr_p99_ms: {mean, ci}}}, paired: {...}}]}.
StatusOr<nlohmann::json> RunDraBench(const DraBenchSpec& spec);

// One markdown table of the document's cells.
std::string DraBenchMarkdown(const nlohmann::json& doc);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_DRA_BENCH_H_
