// File: tests/faults/fault_matrix_test.cc
//
// NVML fault matrix (issue 8): every NVML function migd calls × the errors it
// can return, injected through MIGD_SIM_FAULTS (one-shot "@N") into the
// production NvmlDriver + engine::Manager over libnvidia-ml-sim.so, at each
// site the function is called from in a fixed scenario:
//   startup     NvmlDriver::Open + Manager::Create (recovery)
//   create      Allocate a{1g.5gb}, b{2g.10gb}       (GI + CI create path)
//   release     Release a                            (no NVML expected)
//   reuse       Allocate c{1g.5gb}                   (reuses a's instance)
//   reclaim     Release c, Reclaim{}                 (CI + GI destroy path)
//   reconcile   ReconcileOnce                        (drift check)
// A baseline run (no fault) counts each function's calls per site; a cell
// "fn × error at site" arms fn=ERROR@N with N the first call of fn in that
// site. Each cell runs in a fresh process (the simulator numbers calls per
// process): the test re-executes its own binary with --gtest_filter on
// FaultMatrix.DISABLED_Cell and reads back one JSON row.
//
// Per cell the row records: the result of the faulted operation (status code),
// the instance states right after it, whether records, manager and live
// layout agree then, the result of the next ReconcileOnce (the fault has
// healed: it was one-shot) with the states and consistency after it, and
// whether a new Allocate succeeds. Asserted for every cell (not only via the
// table): the fault fired; the child neither crashed nor hung; after one
// reconcile everything is consistent, nothing is Creating/Reclaiming/Deleting
// or Error, allocation b (Active before the fault) still has its MIG UUID, and
// the next Allocate succeeds (startup faults: a second Manager::Create
// succeeds first, or, when startup succeeded without the GPU, that reconcile
// re-discovered it). Then the whole table must equal the one in
// docs/reliability.md (between <!-- fault-matrix:begin/end --> markers): a
// changed outcome of any cell fails the test until the doc is regenerated:
//   MIGD_FAULT_MATRIX_UPDATE=1 <build>/tests/fault_matrix_test
// rewrites that table in the source tree. The generated table is also written
// to $MIGD_FAULT_MATRIX_OUT (default: fault_matrix.md in the current
// directory).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <atomic>
#include <fstream>
#include <thread>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "engine/sim_fixture.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::engine {
namespace {

using driver::NvmlDriver;
using driver::sim_testing::CallCounts;
using driver::sim_testing::Delta;
using driver::sim_testing::SimMachine;
using ::migd::engine::testing::CountingObserver;
using ::migd::engine::testing::Req;
using ::migd::engine::testing::Spec;

const std::vector<std::string>& Errors() {
  static const auto* const kErrors = new std::vector<std::string>{
      "GPU_IS_LOST", "TIMEOUT",   "UNKNOWN",       "IN_USE",       "INSUFFICIENT_RESOURCES",
      "NOT_FOUND",   "INVALID_ARGUMENT", "NOT_SUPPORTED", "NO_PERMISSION"};
  return *kErrors;
}

const std::vector<std::string>& Sites() {
  static const auto* const kSites =
      new std::vector<std::string>{"startup", "create", "release", "reuse", "reclaim", "reconcile"};
  return *kSites;
}

std::string CodeOf(const Status& s) { return std::string(StatusCodeName(s.code())); }

// "Active:1 Idle:1" (empty manager: "none").
std::string States(const Manager& m) {
  std::map<std::string, int> n;
  for (const auto& v : m.List().instances) ++n[std::string(InstanceStateName(v.state))];
  std::string s;
  for (const auto& [k, c] : n) s += (s.empty() ? "" : " ") + k + ":" + std::to_string(c);
  const size_t foreign = m.List().foreign.size();
  if (foreign != 0) s += (s.empty() ? "" : " ") + std::string("foreign:") + std::to_string(foreign);
  return s.empty() ? "none" : s;
}

bool Settled(const Manager& m) {
  for (const auto& v : m.List().instances) {
    if (v.state != InstanceState::kActive && v.state != InstanceState::kIdle) return false;
  }
  return true;
}

// ExpectConsistent's verdict without failing the test: "yes" or the first
// complaint.
std::string Consistent(Manager& m, driver::GpuDriver& d, store::RecordStore& st) {
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    testing::ExpectConsistent(m, d, st);
  }
  if (failures.size() == 0) return "yes";
  std::string msg = failures.GetTestPartResult(0).message();
  return "NO: " + msg.substr(0, msg.find('\n'));
}

// ---- The child: one cell (or the baseline) in this fresh process. ----

// The scenario of one cell (or of the baseline) in this fresh process: the
// simulated machine, the production driver, a record store and a Manager.
class Scenario {
 public:
  // `fn` empty: the baseline. Otherwise `spec` arms fn=err@N.
  Scenario(std::string fn, std::string err, const std::string& spec)
      : fn_(std::move(fn)),
        err_(std::move(err)),
        armed_at_(spec.empty() ? 0 : std::stoull(spec.substr(spec.rfind('@') + 1))),
        sim_("a100-40gb:1", Env(spec)) {
    opts_.boot_id = testing::kSimBoot;
  }

  // With `fn` empty: the baseline, recording per-site call counts into
  // row["calls"][site][fn]. Otherwise stops after the site where the injected
  // fault fired, recording the outcome.
  nlohmann::json Run() {
    nlohmann::json row;
    for (const auto& [site, step] : Steps()) {
      const CallCounts before = sim_.Counts();
      const Status s = step();
      const CallCounts after = sim_.Counts();
      if (fn_.empty()) {
        if (!s.ok()) {
          row["error"] = site + ": " + s.ToString();
          return row;
        }
        for (const auto& [k, v] : Delta(before, after)) {
          nlohmann::json& n = row["calls"][site][k.first];
          n = (n.is_null() ? uint64_t{0} : n.get<uint64_t>()) + v;
        }
        continue;
      }
      // A failed nvmlInit_v2 counts nothing in the state file: recognise the
      // injected error in the status instead.
      const bool hit = Fired(before, after) ||
                       (!s.ok() && s.message().find(fn_ + " ") != std::string::npos &&
                        s.message().find("NVML_ERROR_" + err_) != std::string::npos);
      if (hit) return Outcome(site, s);
      if (!s.ok()) {
        row["error"] = "site " + site + " failed without the fault: " + s.ToString();
        return row;
      }
    }
    if (!fn_.empty()) row["site"] = "none";
    return row;
  }

 private:
  static std::map<std::string, std::string> Env(const std::string& spec) {
    std::map<std::string, std::string> env = {{"MIGD_SIM_FSYNC", "0"}};
    if (!spec.empty()) env["MIGD_SIM_FAULTS"] = spec;
    return env;
  }

  uint64_t CallsOfFn(const CallCounts& counts) const {
    uint64_t n = 0;
    for (const auto& [k, v] : counts) n += k.first == fn_ ? v : 0;
    return n;
  }
  // The fault is armed at call #N of `fn` (calls are numbered per process):
  // it fired in the step during which this process's calls of `fn` reached N.
  // (A non-SUCCESS count alone would not do: some results, such as NOT_FOUND
  // from nvmlDeviceGetMigDeviceHandleByIndex at an empty index, are normal.)
  bool Fired(const CallCounts& before, const CallCounts& after) const {
    return CallsOfFn(before) < armed_at_ && CallsOfFn(after) >= armed_at_;
  }

  Status OpenAll() {
    if (drv_ == nullptr) {
      auto d = NvmlDriver::Open(MIGD_SIM_LIBRARY);
      if (!d.ok()) return d.status();
      drv_ = std::move(*d);
    }
    if (st_ == nullptr) {
      auto s = testing::OpenSimStore(dir_.Join("state"), clock_, /*sync=*/false);
      if (!s.ok()) return s.status();
      st_ = std::move(*s);
    }
    auto m = Manager::Create(opts_, *drv_, *st_, clock_, owners_, &obs_);
    if (!m.ok()) return m.status();
    mgr_ = std::move(*m);
    return OkStatus();
  }

  // Each site: its operation, returning the first non-OK status.
  std::vector<std::pair<std::string, std::function<Status()>>> Steps() {
    return {
        {"startup", [this] { return OpenAll(); }},
        {"create",
         [this]() -> Status {
           auto a = mgr_->Allocate(Req("a", {Spec("1g.5gb")}));
           if (!a.ok()) return a.status();
           auto b = mgr_->Allocate(Req("b", {Spec("2g.10gb")}));
           if (!b.ok()) return b.status();
           b_uuid_ = b->instances[0].mig_uuid.value();
           return OkStatus();
         }},
        {"release", [this]() -> Status { return mgr_->Release("a"); }},
        {"reuse",
         [this]() -> Status {
           auto c = mgr_->Allocate(Req("c", {Spec("1g.5gb")}));
           return c.ok() ? OkStatus() : c.status();
         }},
        {"reclaim",
         [this]() -> Status {
           MIGD_RETURN_IF_ERROR(mgr_->Release("c"));
           // A destroy that fails leaves its instance in Error (r->failed):
           // reported through the states column, not as the call's result.
           auto r = mgr_->Reclaim({});
           return r.ok() ? OkStatus() : r.status();
         }},
        {"reconcile",
         [this]() -> Status {
           auto r = mgr_->ReconcileOnce();
           return r.ok() ? OkStatus() : r.status();
         }},
    };
  }

  // The row of a cell whose fault fired at `site` with result `s`.
  nlohmann::json Outcome(const std::string& site, const Status& s) {
    nlohmann::json row;
    row["site"] = site;
    row["result"] = CodeOf(s);
    row["message"] = s.message();
    if (site == "startup") {
      if (mgr_ == nullptr) {
        // The fault has healed (one-shot): a restart must work.
        const Status again = OpenAll();
        row["restart"] = CodeOf(again);
        if (!again.ok()) {
          row["restart_message"] = again.ToString();
          return row;
        }
      } else {
        row["restart"] = "not needed";
      }
    }
    row["states_after"] = States(*mgr_);
    row["consistent_after"] = Consistent(*mgr_, *drv_, *st_);
    Reconcile(row);
    row["states_reconciled"] = States(*mgr_);
    row["settled"] = Settled(*mgr_);
    row["consistent_reconciled"] = Consistent(*mgr_, *drv_, *st_);
    if (!b_uuid_.empty()) {
      bool kept = false;
      for (const auto& v : mgr_->List().instances) {
        kept |= v.mig_uuid.value() == b_uuid_ && v.state == InstanceState::kActive &&
                v.request_id == "b";
      }
      row["active_kept"] = kept;
    }
    auto next = mgr_->Allocate(Req("next", {Spec("1g.5gb")}));
    row["next_allocate"] = next.ok() ? "OK" : CodeOf(next.status());
    if (!next.ok()) row["next_message"] = next.status().ToString();
    return row;
  }

  // One ReconcileOnce after the fault: its result and what it did.
  void Reconcile(nlohmann::json& row) {
    auto rep = mgr_->ReconcileOnce();
    row["reconcile"] = rep.ok() ? "OK" : CodeOf(rep.status());
    if (!rep.ok()) return;
    std::string what;
    auto add = [&what](const char* name, uint64_t n) {
      if (n != 0) what += (what.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(n);
    };
    add("errors_cleaned", rep->errors_cleaned);
    add("errors_remaining", rep->errors_remaining);
    add("drift_vanished", rep->drift_vanished);
    add("foreign_appeared", rep->drift_foreign_appeared);
    add("pending_record_removals", rep->pending_record_removals);
    add("gpus_discovered", rep->gpus_discovered);
    row["reconcile_did"] = what.empty() ? "nothing" : what;
  }

  const std::string fn_;
  const std::string err_;
  const uint64_t armed_at_;
  SimMachine sim_;
  migd::testing::TempDir dir_;
  FakeClock clock_;
  RecordsOwnerSource owners_;
  CountingObserver obs_;
  ManagerOptions opts_;
  std::unique_ptr<NvmlDriver> drv_;
  std::unique_ptr<store::RecordStore> st_;
  std::unique_ptr<Manager> mgr_;
  std::string b_uuid_;
};

nlohmann::json RunScenario(const std::string& fn, const std::string& err,
                           const std::string& spec) {
  return Scenario(fn, err, spec).Run();
}

// Not run by default: the parent test runs it in a child process.
TEST(FaultMatrix, DISABLED_Cell) {
  const char* cell = std::getenv("MIGD_FAULT_CELL");
  const char* out = std::getenv("MIGD_FAULT_ROW");
  ASSERT_TRUE(cell != nullptr && out != nullptr) << "run by FaultMatrix.AllCells";
  const std::string c = cell;
  const std::string fn = c == "baseline" ? "" : c.substr(0, c.find('='));
  const std::string err =
      c == "baseline" ? "" : c.substr(c.find('=') + 1, c.find('@') - c.find('=') - 1);
  nlohmann::json row = RunScenario(fn, err, c == "baseline" ? "" : c);
  std::ofstream(out) << row.dump();
}

// ---- The parent. ----

std::string SelfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

nlohmann::json RunCell(const std::string& cell, const std::string& scratch) {
  const std::string row_path = scratch + "/row.json";
  std::filesystem::remove(row_path);
  migd::testing::CommandResult r = migd::testing::RunCommand(
      {SelfExe(), "--gtest_also_run_disabled_tests", "--gtest_filter=FaultMatrix.DISABLED_Cell"},
      scratch, {{"MIGD_FAULT_CELL", cell}, {"MIGD_FAULT_ROW", row_path}});
  nlohmann::json row;
  std::ifstream in(row_path);
  if (in) row = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (r.exit_code != 0 || row.is_discarded() || row.is_null()) {
    nlohmann::json bad;
    bad["child_failed"] = "exit " + std::to_string(r.exit_code) + ": " +
                          r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0) + r.err;
    return bad;
  }
  return row;
}

std::string Cellv(const nlohmann::json& row, const char* key) {
  if (!row.contains(key)) return "";
  const auto& v = row.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "NO";
  return v.dump();
}

struct Cell {
  std::string fn, site, err, spec;
  uint64_t n = 0;
  nlohmann::json row;
};

// One cell per (function, site, error), armed at the function's first call
// in that site; `calls` is the baseline's fn -> site -> calls.
std::vector<Cell> PlanCells(const std::map<std::string, std::map<std::string, uint64_t>>& calls) {
  std::vector<Cell> cells;
  for (const auto& [fn, sites] : calls) {
    uint64_t before = 0;
    for (const std::string& site : Sites()) {
      auto it = sites.find(site);
      if (it == sites.end() || it->second == 0) continue;
      const uint64_t n = before + 1;
      before += it->second;
      for (const std::string& err : Errors()) {
        cells.push_back({fn, site, err, fn + "=" + err + "@" + std::to_string(n), n, {}});
      }
    }
  }
  return cells;
}

// Runs the cells 4 at a time (each child mostly waits on the file system).
void RunCells(std::vector<Cell>& cells, const migd::testing::TempDir& scratch) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      const std::string dir = scratch.Join("w" + std::to_string(w));
      std::filesystem::create_directories(dir);
      for (size_t i = next++; i < cells.size(); i = next++) {
        cells[i].row = RunCell(cells[i].spec, dir);
      }
    });
  }
  for (std::thread& t : workers) t.join();
}

// What every cell must show, and its table row.
std::string CheckCell(const Cell& c) {
  const nlohmann::json& row = c.row;
  SCOPED_TRACE(c.spec + " (expected site " + c.site + ")");
  EXPECT_FALSE(row.contains("child_failed")) << row.dump();
  EXPECT_FALSE(row.contains("error")) << row.dump();
  EXPECT_EQ(Cellv(row, "site"), c.site) << row.dump();
  const bool restarted = Cellv(row, "restart") != "" && Cellv(row, "restart") != "not needed";
  if (restarted) {
    EXPECT_EQ(Cellv(row, "restart"), "OK") << "restart after a startup fault: " << row.dump();
  }
  EXPECT_EQ(Cellv(row, "reconcile"), "OK") << row.dump();
  EXPECT_EQ(Cellv(row, "settled"), "yes") << "transitional or Error after one reconcile: "
                                          << row.dump();
  // Including nvmlGpuInstanceDestroy = NOT_FOUND while the GI still exists:
  // migd re-lists the GIs and keeps the instance in Error instead of
  // dropping its record (which stranded the GI as foreign before).
  EXPECT_EQ(Cellv(row, "consistent_after"), "yes") << row.dump();
  EXPECT_EQ(Cellv(row, "consistent_reconciled"), "yes") << row.dump();
  if (row.contains("active_kept")) {
    EXPECT_EQ(Cellv(row, "active_kept"), "yes") << "Active b lost: " << row.dump();
  }
  // Including a GPU dropped at startup by a one-shot fault (GetMigMode =
  // NOT_SUPPORTED, GetHandleByIndex = NO_PERMISSION): the first reconcile
  // re-discovers it (gpus_discovered=1). A one-shot NOT_SUPPORTED from a GI
  // profile query no longer drops the profile: NvmlDriver asks twice.
  EXPECT_EQ(Cellv(row, "next_allocate"), "OK") << row.dump();
  std::string result = Cellv(row, "result");
  if (restarted) result += ", restart " + Cellv(row, "restart");
  std::string reconcile = Cellv(row, "reconcile");
  if (row.contains("reconcile_did")) reconcile += " (" + Cellv(row, "reconcile_did") + ")";
  std::ostringstream md;
  md << "| " << c.fn << " | " << c.site << " (#" << c.n << ") | " << c.err << " | " << result
     << " | " << Cellv(row, "states_after") << " | " << Cellv(row, "consistent_after") << " | "
     << reconcile << " | " << Cellv(row, "states_reconciled") << " | "
     << Cellv(row, "next_allocate") << " |\n";
  return md.str();
}

// The expectation is the table in docs/reliability.md, between the markers
// (MIGD_FAULT_MATRIX_UPDATE=1 rewrites it instead).
void CompareWithDoc(const std::string& table) {
  const std::string doc_path = MIGD_RELIABILITY_DOC;
  std::string doc;
  {
    std::ifstream in(doc_path);
    std::stringstream ss;
    ss << in.rdbuf();
    doc = ss.str();
  }
  const std::string begin_marker = "<!-- fault-matrix:begin -->\n";
  const std::string end_marker = "<!-- fault-matrix:end -->";
  const size_t b = doc.find(begin_marker);
  const size_t e = doc.find(end_marker);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e)
      << doc_path << " lacks the fault-matrix markers";
  const size_t body = b + begin_marker.size();
  const char* update = std::getenv("MIGD_FAULT_MATRIX_UPDATE");
  if (update != nullptr && std::string(update) == "1") {
    doc.replace(body, e - body, table);
    std::ofstream(doc_path) << doc;
    std::cout << "rewrote the table in " << doc_path << std::endl;
    return;
  }
  EXPECT_EQ(doc.substr(body, e - body), table)
      << "the fault matrix differs from " << doc_path
      << "; if the change is intended, regenerate it: MIGD_FAULT_MATRIX_UPDATE=1 "
         "<build>/tests/fault_matrix_test";
}

// Every cell is asserted (no known gap left): the two former findings are
// fixed and pinned by the table (docs/reliability.md, "Fixed"): a GI destroy
// answering NOT_FOUND while the GI still exists keeps the instance in Error
// (Manager::DestroyHw re-lists), and a GPU dropped at startup by a one-shot
// fault is re-discovered by the next reconcile.
TEST(FaultMatrix, AllCells) {
  migd::testing::TempDir scratch;
  const nlohmann::json base = RunCell("baseline", scratch.path());
  ASSERT_FALSE(base.contains("child_failed")) << base.dump();
  ASSERT_FALSE(base.contains("error")) << base.dump();
  ASSERT_TRUE(base.contains("calls")) << base.dump();
  // fn -> site -> calls.
  std::map<std::string, std::map<std::string, uint64_t>> calls;
  for (const std::string& site : Sites()) {
    if (!base["calls"].contains(site)) continue;
    for (const auto& [fn, n] : base["calls"][site].items()) calls[fn][site] = n.get<uint64_t>();
  }
  std::cout << "NVML functions called in the scenario: " << calls.size() << std::endl;
  std::vector<Cell> cells = PlanCells(calls);
  RunCells(cells, scratch);
  std::string table =
      "| NVML function | site (call #) | injected | operation result | states after | "
      "consistent after | reconcile | states after reconcile | next Allocate |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  for (const Cell& c : cells) table += CheckCell(c);
  std::cout << cells.size() << " cells" << std::endl;
  const char* out = std::getenv("MIGD_FAULT_MATRIX_OUT");
  std::ofstream(out != nullptr && *out != '\0' ? out : "fault_matrix.md") << table;
  CompareWithDoc(table);
}

}  // namespace
}  // namespace migd::engine
