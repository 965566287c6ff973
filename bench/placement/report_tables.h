// File: bench/placement/report_tables.h
//
// The tables of the placement report, each a markdown string that
// placement_report puts into its placeholder of report_template.md. A
// table whose documents are missing from the run is empty.
//
// Thread-safety: plain functions.
#ifndef MIGD_BENCH_PLACEMENT_REPORT_TABLES_H_
#define MIGD_BENCH_PLACEMENT_REPORT_TABLES_H_

#include <string>

#include "bench/placement/report_util.h"

namespace migd::bench::report {

std::string MetaTable(const Json& meta);
// migd vs migd-noidle (document "diag").
std::string IdleTable(const Results& r);
// 7g / 4g acceptance and whole GPUs left, N = 8, ρ = 0.9.
std::string LargeProfileTable(const Results& r);
// One table per (document, N): migd vs the best baseline at the goal loads.
std::string HeadlineTable(const Json& doc, int gpus);
std::string HeadlineTables(const Results& r);
// N = 1: migd vs B11/B11s.
std::string B11Table(const Results& r);
// Per workload and N: the value policy against today's cost order.
std::string ValueVsOrderTable(const Results& r);
// The value policy's solves: how many, how long, how large.
std::string SolveTable(const Results& r);
std::string SeedSentence(const Results& r);
std::string TraceFiles(const Results& r);
std::string FullTables(const Results& r);
std::string PerProfileTables(const Results& r);
std::string FragmentationTables(const Results& r);
std::string OpsTables(const Results& r);
std::string LatencyTables(const Results& r);
std::string QueueTables(const Results& r);
std::string ScriptTable(const Results& r);
std::string Commands(const Json& meta);

}  // namespace migd::bench::report

#endif  // MIGD_BENCH_PLACEMENT_REPORT_TABLES_H_
