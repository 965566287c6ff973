// latency_socket: the end-to-end part of the latency benchmark, side by side
// in one run over the real unix socket with the generated gRPC stub:
//   floor   the same socket and gRPC server setup with empty handlers
//           (floor_server.h), in a child process; once on the synchronous
//           API migd serves with, once on the callback API;
//   tmpfs   the real `migd --simulate h100-80gb:1` with stateDir on tmpfs;
//   disk    the same with stateDir on a disk directory (--disk-dir).
// For each: Allocate served by reuse and Release, p50/p99 as the client sees
// them; allocate+release cycles per second of one client; migd's CPU per
// cycle. For migd also create and reclaim+create (NVML calls from the
// simulator's counters), and migd's footprint at idle (first migd run).
// Every migd run checks that each call took the expected path.
//
// Writes Markdown to --out-md. Benchmark only: nothing here asserts a time.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/latency/floor_server.h"
#include "bench/latency/harness.h"
#include "bench/latency/latency_model.h"
#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"

namespace {

using namespace migd::bench::latency;  // NOLINT: benchmark binary
namespace v1 = migd::v1;

// The simulator's counters: total calls per function, from its state file.
uint64_t SimCalls(const std::string& state_path) {
  std::ifstream in(state_path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("counters")) return 0;
  uint64_t n = 0;
  for (const auto& [fn, results] : j["counters"].items()) {
    for (const auto& [r, c] : results.items()) n += c.get<uint64_t>();
  }
  return n;
}

struct ProcStat {
  uint64_t rss_kb = 0;
  double cpu_s = 0;
};

ProcStat StatOf(pid_t pid) {
  ProcStat s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) std::istringstream(line.substr(6)) >> s.rss_kb;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(stat, all);
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream in(all.substr(close + 2));
  std::string f;
  uint64_t ut = 0, st = 0;
  for (int i = 1; i <= 13 && in >> f; ++i) {
    if (i == 12) ut = std::stoull(f);
    if (i == 13) st = std::stoull(f);
  }
  s.cpu_s = static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return s;
}

std::string FsType(const std::string& dir) {
  struct statfs s {};
  if (::statfs(dir.c_str(), &s) != 0) return "?";
  switch (s.f_type) {
    case 0x01021994:
      return "tmpfs";
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794c7630:
      return "overlayfs";
    default:
      return fmt::format("0x{:x}", static_cast<uint64_t>(s.f_type));
  }
}

struct Client {
  std::unique_ptr<v1::MigManager::Stub> stub;
  v1::AllocateResponse resp;

  grpc::Status Allocate(const std::string& id, const std::string& profile, int gpu = -1,
                        int start = -1, int size = 0) {
    v1::AllocateRequest req;
    req.set_request_id(id);
    req.mutable_owner()->set_opaque_id("bench-" + id);
    v1::InstanceSpec* s = req.add_instances();
    s->set_profile(profile);
    if (gpu >= 0) s->set_gpu(static_cast<uint32_t>(gpu));
    if (start >= 0) {
      s->mutable_placement()->set_start(static_cast<uint32_t>(start));
      s->mutable_placement()->set_size(static_cast<uint32_t>(size));
    }
    grpc::ClientContext ctx;
    resp.Clear();
    return stub->Allocate(&ctx, req, &resp);
  }
  grpc::Status Release(const std::string& id) {
    v1::ReleaseRequest req;
    req.set_request_id(id);
    v1::ReleaseResponse r;
    grpc::ClientContext ctx;
    return stub->Release(&ctx, req, &r);
  }
  grpc::Status Reclaim(const std::string& profile) {
    v1::ReclaimRequest req;
    req.set_profile(profile);
    v1::ReclaimResponse r;
    grpc::ClientContext ctx;
    return stub->Reclaim(&ctx, req, &r);
  }
  bool PathIs(v1::AllocationPath p) const {
    return resp.instances_size() == 1 && resp.instances(0).path() == p;
  }
};

Client Connect(const std::string& socket) {
  return Client{v1::MigManager::NewStub(
                    grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials())),
                {}};
}

// What one server (floor or a migd) measured.
struct Column {
  std::string name;
  std::string fs;  // stateDir's filesystem
  std::vector<double> reuse, release, create, reclaim;
  uint64_t create_calls = 0, reclaim_calls = 0;
  double cycles_per_s = 0;
  double cpu_us_per_cycle = -1;  // the server's CPU
  ProcStat idle0, idle1;
  double start_ms = 0;
  int exit_code = -1;
};

struct Options {
  std::string migd = MIGD_BINARY;
  std::string tmpfs_dir = "/dev/shm";
  std::string disk_dir;
  std::string sim_dir = "/dev/shm";
  std::string model = "zero";
  std::string models_file = MIGD_LATENCY_MODELS;
  int reps = 2000, cycles = 5000, create_reps = 50, reclaim_reps = 50, idle_seconds = 5;
  std::string self;
};

bool Check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) std::cerr << "latency_socket: " << what << ": " << s.error_message() << "\n";
  return s.ok();
}

// Reuse and release samples, then `cycles` allocate+release back to back.
// `check` verifies the path of each reuse (migd only).
bool ReuseLoop(Client& c, const Options& o, bool check, pid_t pid, Column& col) {
  int64_t seq = 0;
  for (int i = 0; i < o.reps; ++i) {
    const std::string r = "reuse" + std::to_string(seq++);
    Stopwatch a;
    if (!Check(c.Allocate(r, "1g.10gb"), "reuse")) return false;
    col.reuse.push_back(a.Ms());
    if (check && !c.PathIs(v1::ALLOCATION_PATH_REUSE)) return std::cerr << "not a reuse\n", false;
    Stopwatch b;
    if (!Check(c.Release(r), "release")) return false;
    col.release.push_back(b.Ms());
  }
  const ProcStat before = pid > 0 ? StatOf(pid) : ProcStat{};
  Stopwatch sw;
  for (int i = 0; i < o.cycles; ++i) {
    const std::string r = "cycle" + std::to_string(seq++);
    if (!Check(c.Allocate(r, "1g.10gb"), "cycle") || !Check(c.Release(r), "release")) {
      return false;
    }
    if (check && !c.PathIs(v1::ALLOCATION_PATH_REUSE)) return std::cerr << "not a reuse\n", false;
  }
  const double secs = sw.Ms() / 1000;
  col.cycles_per_s = o.cycles / secs;
  if (pid > 0) col.cpu_us_per_cycle = 1e6 * (StatOf(pid).cpu_s - before.cpu_s) / o.cycles;
  return true;
}

bool RunFloor(const Options& o, const std::string& dir, FloorApi api, Column& col) {
  const bool callback = api == FloorApi::kCallback;
  col.name = callback ? "floor (empty handler, callback API)" : "floor (empty handler)";
  col.fs = "-";
  migd::testing::DaemonOptions d;
  d.binary = o.self;
  d.args = {callback ? "--serve-empty-callback" : "--serve-empty", dir + "/floor.socket"};
  d.socket_path = dir + "/floor.socket";
  d.ready_log = "floor ready";
  auto server = migd::testing::DaemonProcess::Start(d, dir);
  if (!server.ok()) return std::cerr << "latency_socket: " << server.status() << "\n", false;
  Client c = Connect(d.socket_path);
  for (int i = 0; i < 100; ++i) {  // connect and warm up
    if (!Check(c.Allocate("w", "1g.10gb"), "floor warm-up")) return false;
  }
  const bool ok = ReuseLoop(c, o, false, (*server)->pid(), col);
  col.exit_code = (*server)->Stop().exit_code;
  return ok;
}

// Create and reclaim+create paths on a running migd (stateDir as given).
bool CreatePaths(Client& c, const Options& o, const std::string& sim_state, Column& col) {
  int64_t seq = 0;
  auto id = [&](const char* p) { return std::string(p) + std::to_string(seq++); };
  for (int i = 0; i < o.create_reps; ++i) {
    const std::string r = id("create");
    const uint64_t before = SimCalls(sim_state);
    Stopwatch sw;
    if (!Check(c.Allocate(r, "1g.10gb"), "create")) return false;
    col.create.push_back(sw.Ms());
    col.create_calls += SimCalls(sim_state) - before;
    if (!c.PathIs(v1::ALLOCATION_PATH_CREATE)) return std::cerr << "create path\n", false;
    if (!Check(c.Release(r), "release") || !Check(c.Reclaim(""), "reclaim")) return false;
  }
  if (!Check(c.Allocate(id("hold"), "4g.40gb", 0, 0, 4), "hold")) return false;
  for (int i = 0; i < o.reclaim_reps; ++i) {
    const std::string idle = id("idle");
    if (!Check(c.Allocate(idle, "3g.40gb", 0, 4, 4), "idle") || !Check(c.Release(idle), "rel")) {
      return false;
    }
    const std::string r = id("reclaim");
    const uint64_t before = SimCalls(sim_state);
    Stopwatch sw;
    if (!Check(c.Allocate(r, "2g.20gb"), "reclaim+create")) return false;
    col.reclaim.push_back(sw.Ms());
    col.reclaim_calls += SimCalls(sim_state) - before;
    if (!c.PathIs(v1::ALLOCATION_PATH_RECLAIM_CREATE)) return std::cerr << "reclaim path\n", false;
    if (!Check(c.Release(r), "release") || !Check(c.Reclaim("2g.20gb"), "reclaim")) return false;
  }
  return true;
}

bool RunMigd(const Options& o, const LatencyModel& model, const std::string& state_parent,
             const std::string& name, bool idle_window, Column& col) {
  col.name = name;
  std::error_code mk;
  std::filesystem::create_directories(state_parent, mk);
  col.fs = FsType(state_parent);
  std::string tmpl = o.sim_dir + "/migd-socket-XXXXXX";
  std::string state = state_parent + "/migd-socket-state-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr || mkdtemp(state.data()) == nullptr) {
    std::cerr << "latency_socket: cannot create directories under " << o.sim_dir << " and "
              << state_parent << "\n";
    return false;
  }
  const std::string socket = tmpl + "/api.socket";
  const std::string sim_state = tmpl + "/sim.json";
  migd::testing::DaemonOptions d;
  d.binary = o.migd;
  d.args = {"--simulate",     "h100-80gb:1",      "--socket", socket,           "--state-dir",
            state + "/state", "--metrics-listen", "",         "--cdi-spec-dir", tmpl + "/cdi"};
  d.env = {{"MIGD_SIM_STATE", sim_state},
           {"MIGD_SIM_PROC_ROOT", tmpl + "/proc"},
           {"MIGD_SIM_FSYNC", "0"},
           {"MIGD_SIM_LATENCY_MS", model.EnvValue()}};
  d.socket_path = socket;
  Stopwatch start;
  auto daemon = migd::testing::DaemonProcess::Start(d, tmpl);
  if (!daemon.ok()) return std::cerr << "latency_socket: " << daemon.status() << "\n", false;
  col.start_ms = start.Ms();
  const pid_t pid = (*daemon)->pid();
  Client c = Connect(socket);
  if (idle_window) {
    col.idle0 = StatOf(pid);
    std::this_thread::sleep_for(std::chrono::seconds(o.idle_seconds));
    col.idle1 = StatOf(pid);
  }
  // Warm-up: one create per GI profile used (driver caches), then empty;
  // then one Idle 1g.10gb for the reuse loop.
  for (const char* prof : {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"}) {
    if (!Check(c.Allocate(std::string("warm-") + prof, prof), "warm-up") ||
        !Check(c.Release(std::string("warm-") + prof), "release") || !Check(c.Reclaim(""), "")) {
      return false;
    }
  }
  bool ok = Check(c.Allocate("seed", "1g.10gb"), "seed") && Check(c.Release("seed"), "seed");
  ok = ok && ReuseLoop(c, o, true, pid, col);
  ok = ok && Check(c.Reclaim(""), "reclaim") && CreatePaths(c, o, sim_state, col);
  col.exit_code = (*daemon)->Stop().exit_code;
  if (ok) {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
    std::filesystem::remove_all(state, ec);
  }
  return ok && col.exit_code == 0;
}

std::string P(const std::vector<double>& v, bool p99) {
  if (v.empty()) return "-";
  const Summary s = Summarize(v);
  return fmt::format("{:.3f}", p99 ? s.p99 : s.p50);
}

void WriteTables(std::ostream& md, const std::vector<Column>& cols, const Options& o,
                 const LatencyModel& model) {
  md << "### Over the gRPC socket, side by side (one client; simulator latency model '"
     << model.name << "'; " << o.reps << " reuse/release samples, " << o.cycles
     << " cycles)\n\n| measure |";
  for (const Column& c : cols) md << " " << c.name << " |";
  md << "\n|---|";
  for (size_t i = 0; i < cols.size(); ++i) md << "---|";
  md << "\n| stateDir filesystem |";
  for (const Column& c : cols) md << " " << c.fs << " |";
  auto row = [&](const char* label, auto&& cell) {
    md << "\n| " << label << " |";
    for (const Column& c : cols) md << " " << cell(c) << " |";
  };
  row("Allocate (reuse) p50 ms", [](const Column& c) { return P(c.reuse, false); });
  row("Allocate (reuse) p99 ms", [](const Column& c) { return P(c.reuse, true); });
  row("Release p50 ms", [](const Column& c) { return P(c.release, false); });
  row("Release p99 ms", [](const Column& c) { return P(c.release, true); });
  row("allocate+release cycles/s, one client",
      [](const Column& c) { return fmt::format("{:.0f}", c.cycles_per_s); });
  row("server CPU per cycle", [](const Column& c) {
    return c.cpu_us_per_cycle < 0 ? std::string("-") : fmt::format("{:.0f} us", c.cpu_us_per_cycle);
  });
  row("create p50 ms (NVML calls/op)", [](const Column& c) {
    return c.create.empty() ? std::string("-")
                            : fmt::format("{} ({:.1f})", P(c.create, false),
                                          double(c.create_calls) / double(c.create.size()));
  });
  row("reclaim+create p50 ms (NVML calls/op)", [](const Column& c) {
    return c.reclaim.empty() ? std::string("-")
                             : fmt::format("{} ({:.1f})", P(c.reclaim, false),
                                           double(c.reclaim_calls) / double(c.reclaim.size()));
  });
  row("exit on SIGTERM", [](const Column& c) { return std::to_string(c.exit_code); });
  md << "\n\n";
}

void WriteGoals(std::ostream& md, const std::vector<Column>& cols) {
  md << "| goal (one client, tmpfs stateDir unless named) | measured | met? |\n|---|---|---|\n";
  for (const Column& c : cols) {
    if (c.name.rfind("migd", 0) != 0) continue;
    const Summary r = Summarize(c.reuse), l = Summarize(c.release);
    auto yes = [](bool b) { return b ? "yes" : "**no**"; };
    md << fmt::format("| {}: reuse p50 < 0.2 ms, p99 < 0.5 ms | {:.3f} / {:.3f} ms | {} |\n",
                      c.name, r.p50, r.p99, yes(r.p50 < 0.2 && r.p99 < 0.5));
    md << fmt::format("| {}: release p50 < 0.2 ms, p99 < 0.5 ms | {:.3f} / {:.3f} ms | {} |\n",
                      c.name, l.p50, l.p99, yes(l.p50 < 0.2 && l.p99 < 0.5));
    md << fmt::format("| {}: >= 5,000 allocate+release cycles/s | {:.0f} | {} |\n", c.name,
                      c.cycles_per_s, yes(c.cycles_per_s >= 5000));
  }
  const Column* migd = &cols.front();
  for (const Column& c : cols) {
    if (c.name.rfind("migd", 0) == 0) {
      migd = &c;
      break;
    }
  }
  const Column& first = *migd;
  md << fmt::format(
      "\nmigd footprint ({}): start to ready {:.0f} ms; RSS at idle {:.1f} MiB; CPU over "
      "the idle window {:.3f} s.\n\n",
      first.name, first.start_ms, first.idle0.rss_kb / 1024.0,
      first.idle1.cpu_s - first.idle0.cpu_s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"migd end-to-end latency over the gRPC socket (simulated NVML)"};
  Options o;
  std::string out_md = "-";
  std::string serve_empty, serve_empty_callback;
  app.add_option("--serve-empty", serve_empty, "(internal) run the floor server on this socket");
  app.add_option("--serve-empty-callback", serve_empty_callback,
                 "(internal) the same on gRPC's callback API");
  app.add_option("--migd", o.migd, "migd binary");
  app.add_option("--tmpfs-dir", o.tmpfs_dir, "tmpfs directory for the tmpfs stateDir");
  app.add_option("--disk-dir", o.disk_dir, "disk directory for the disk stateDir (absolute)");
  app.add_option("--sim-dir", o.sim_dir, "simulator state, CDI specs and sockets (tmpfs)");
  app.add_option("--out-md", out_md);
  app.add_option("--models", o.models_file, "latency models (JSON; latency_model.h)");
  app.add_option("--model", o.model, "a model of --models, or zero (MIGD_SIM_LATENCY_MS)");
  app.add_option("--reps", o.reps, "reuse and release samples per server");
  app.add_option("--cycles", o.cycles, "allocate+release cycles timed back to back");
  app.add_option("--create-reps", o.create_reps);
  app.add_option("--reclaim-reps", o.reclaim_reps);
  app.add_option("--idle-seconds", o.idle_seconds, "idle CPU window (first migd)");
  CLI11_PARSE(app, argc, argv);
  if (!serve_empty.empty()) return RunFloorServer(serve_empty, FloorApi::kSync);
  if (!serve_empty_callback.empty()) {
    return RunFloorServer(serve_empty_callback, FloorApi::kCallback);
  }
  o.self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto models = LoadLatencyModels(o.models_file);
  auto found = models.ok() ? FindLatencyModel(*models, o.model) : models.status();
  if (!found.ok()) {
    std::cerr << "latency_socket: " << found.status() << "\n";
    return 2;
  }
  std::vector<Column> cols;
  for (FloorApi api : {FloorApi::kSync, FloorApi::kCallback}) {
    cols.emplace_back();
    std::string floor_dir = o.sim_dir + "/migd-floor-XXXXXX";
    if (mkdtemp(floor_dir.data()) == nullptr || !RunFloor(o, floor_dir, api, cols.back())) return 1;
    std::error_code ec;
    std::filesystem::remove_all(floor_dir, ec);
    std::cerr << "latency_socket: floor done\n";
  }
  cols.emplace_back();
  if (!RunMigd(o, *found, o.tmpfs_dir, "migd, tmpfs stateDir", true, cols.back())) return 1;
  std::cerr << "latency_socket: tmpfs done\n";
  if (!o.disk_dir.empty()) {
    cols.emplace_back();
    if (!RunMigd(o, *found, o.disk_dir, "migd, disk stateDir", false, cols.back())) return 1;
    std::cerr << "latency_socket: disk done\n";
  }
  std::ostringstream md;
  WriteTables(md, cols, o, *found);
  WriteGoals(md, cols);
  if (out_md == "-") {
    std::cout << md.str();
  } else {
    std::ofstream(out_md) << md.str();
  }
  return 0;
}
