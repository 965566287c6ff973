// latency_socket: the end-to-end part of the latency benchmark (reuse, create,
// §4). Starts the real migd --simulate (one H100-80GB) as a child process,
// calls Allocate / Release / Reclaim over its unix socket with the generated
// gRPC stub, and reports per path (reuse, create, reclaim+create, release)
// p50/p99 wall time as the client sees it and the NVML calls the daemon made
// (the simulator's per-function counters in its state file). Also migd's RSS
// and CPU at idle and under the reuse loop (/proc/<pid>).
//
// Writes Markdown tables to --out-md. Benchmark only.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/latency/harness.h"
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

struct Client {
  std::unique_ptr<v1::MigManager::Stub> stub;

  grpc::Status Allocate(const std::string& id, const std::string& profile,
                        v1::AllocateResponse* resp, int gpu = -1, int start = -1, int size = 0) {
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
    return stub->Allocate(&ctx, req, resp);
  }
  grpc::Status Release(const std::string& id) {
    v1::ReleaseRequest req;
    req.set_request_id(id);
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    return stub->Release(&ctx, req, &resp);
  }
  grpc::Status Reclaim(const std::string& profile) {
    v1::ReclaimRequest req;
    req.set_profile(profile);
    v1::ReclaimResponse resp;
    grpc::ClientContext ctx;
    return stub->Reclaim(&ctx, req, &resp);
  }
};

struct Row {
  std::string op;
  std::vector<double> ms;
  uint64_t calls = 0, calls_max = 0;
};

bool Check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) std::cerr << "latency_socket: " << what << ": " << s.error_message() << "\n";
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"migd end-to-end latency over the gRPC socket (simulated NVML)"};
  std::string migd = MIGD_BINARY;
  std::string dir = "/tmp";
  std::string sim_dir = "/dev/shm";
  std::string out_md = "-";
  std::string model_name = "zero";
  int reuse_reps = 2000, create_reps = 100, reclaim_reps = 100;
  int idle_seconds = 5;
  app.add_option("--migd", migd, "migd binary");
  app.add_option("--dir", dir, "where migd's state and socket live (absolute)");
  app.add_option("--sim-dir", sim_dir, "where the simulator's state file lives");
  app.add_option("--out-md", out_md);
  std::string models_file = MIGD_LATENCY_MODELS;
  app.add_option("--models", models_file, "latency models (JSON; latency_model.h)");
  app.add_option("--model", model_name, "a model of --models, or zero (MIGD_SIM_LATENCY_MS)");
  app.add_option("--reuse-reps", reuse_reps);
  app.add_option("--create-reps", create_reps);
  app.add_option("--reclaim-reps", reclaim_reps);
  app.add_option("--idle-seconds", idle_seconds, "idle CPU window");
  CLI11_PARSE(app, argc, argv);
  auto models = LoadLatencyModels(models_file);
  auto found = models.ok() ? FindLatencyModel(*models, model_name) : models.status();
  if (!found.ok()) {
    std::cerr << "latency_socket: " << found.status() << "\n";
    return 2;
  }
  const LatencyModel model = *found;

  std::string tmpl = dir + "/migd-socket-XXXXXX";
  std::string simt = sim_dir + "/migd-socket-sim-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr || mkdtemp(simt.data()) == nullptr) {
    std::cerr << "latency_socket: mkdtemp failed\n";
    return 1;
  }
  const std::string socket = tmpl + "/api.socket";
  const std::string sim_state = simt + "/state.json";
  migd::testing::DaemonOptions opts;
  opts.binary = migd;
  opts.args = {"--simulate",    "h100-80gb:1",      "--socket", socket,           "--state-dir",
               tmpl + "/state", "--metrics-listen", "",         "--cdi-spec-dir", tmpl + "/cdi"};
  opts.env = {{"MIGD_SIM_STATE", sim_state},
              {"MIGD_SIM_PROC_ROOT", simt + "/proc"},
              {"MIGD_SIM_FSYNC", "0"},
              {"MIGD_SIM_LATENCY_MS", model.EnvValue()}};
  opts.socket_path = socket;
  Stopwatch start_sw;
  auto daemon = migd::testing::DaemonProcess::Start(opts, tmpl);
  if (!daemon.ok()) {
    std::cerr << "latency_socket: " << daemon.status() << "\n";
    return 1;
  }
  const double start_ms = start_sw.Ms();
  const pid_t pid = (*daemon)->pid();
  Client c{v1::MigManager::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()))};

  // Idle footprint: RSS and CPU over a quiet window after startup.
  const ProcStat idle0 = StatOf(pid);
  std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
  const ProcStat idle1 = StatOf(pid);

  v1::AllocateResponse resp;
  int64_t seq = 0;
  auto id = [&](const char* p) { return std::string(p) + std::to_string(seq++); };
  // Warm-up: one create per GI profile used (driver caches), then empty.
  for (const char* prof : {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"}) {
    const std::string w = id("warm");
    if (!Check(c.Allocate(w, prof, &resp), "warm-up") || !Check(c.Release(w), "release") ||
        !Check(c.Reclaim(""), "reclaim")) {
      return 1;
    }
  }
  auto timed = [&](Row& row, auto&& fn) {
    const uint64_t before = SimCalls(sim_state);
    Stopwatch sw;
    const bool ok = fn();
    row.ms.push_back(sw.Ms());
    const uint64_t n = SimCalls(sim_state) - before;
    row.calls += n;
    row.calls_max = std::max(row.calls_max, n);
    return ok;
  };
  auto path_is = [&](v1::AllocationPath p) {
    return resp.instances_size() == 1 && resp.instances(0).path() == p;
  };

  Row create, reuse, release, reclaim;
  create.op = "create";
  reuse.op = "reuse";
  release.op = "release";
  reclaim.op = "reclaim+create";
  for (int i = 0; i < create_reps; ++i) {
    const std::string r = id("create");
    bool ok = timed(create, [&] { return c.Allocate(r, "1g.10gb", &resp).ok(); });
    if (!ok || !path_is(v1::ALLOCATION_PATH_CREATE)) return std::cerr << "create path\n", 1;
    if (!Check(c.Release(r), "release") || !Check(c.Reclaim(""), "reclaim")) return 1;
  }
  {
    const std::string s = id("seed");
    if (!Check(c.Allocate(s, "1g.10gb", &resp), "seed") || !Check(c.Release(s), "release")) {
      return 1;
    }
  }
  const ProcStat load0 = StatOf(pid);
  Stopwatch load_sw;
  for (int i = 0; i < reuse_reps; ++i) {
    const std::string r = id("reuse");
    bool ok = timed(reuse, [&] { return c.Allocate(r, "1g.10gb", &resp).ok(); });
    if (!ok || !path_is(v1::ALLOCATION_PATH_REUSE)) return std::cerr << "reuse path\n", 1;
    if (!timed(release, [&] { return c.Release(r).ok(); })) return std::cerr << "release\n", 1;
  }
  const double load_s = load_sw.Ms() / 1000;
  const ProcStat load1 = StatOf(pid);
  if (!Check(c.Reclaim(""), "reclaim")) return 1;
  if (!Check(c.Allocate(id("hold"), "4g.40gb", &resp, 0, 0, 4), "hold")) return 1;
  for (int i = 0; i < reclaim_reps; ++i) {
    const std::string idle = id("idle");
    if (!Check(c.Allocate(idle, "3g.40gb", &resp, 0, 4, 4), "idle") ||
        !Check(c.Release(idle), "release")) {
      return 1;
    }
    const std::string r = id("reclaim");
    bool ok = timed(reclaim, [&] { return c.Allocate(r, "2g.20gb", &resp).ok(); });
    if (!ok || !path_is(v1::ALLOCATION_PATH_RECLAIM_CREATE)) {
      return std::cerr << "reclaim path\n", 1;
    }
    if (!Check(c.Release(r), "release") || !Check(c.Reclaim("2g.20gb"), "reclaim")) return 1;
  }
  const ProcStat end = StatOf(pid);
  const migd::testing::DaemonExit exit = (*daemon)->Stop();

  std::ostringstream md;
  md << "### Over the gRPC socket: real migd --simulate h100-80gb:1, latency model '" << model.name
     << "'\n\n";
  md << "| operation | n | p50 ms | p99 ms | mean ms | max ms | NVML calls/op (max) |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const Row* r : {&reuse, &create, &reclaim, &release}) {
    const Summary s = Summarize(r->ms);
    md << "| " << r->op << " | " << s.n << " | " << fmt::format("{:.3f}", s.p50) << " | "
       << fmt::format("{:.3f}", s.p99) << " | " << fmt::format("{:.3f}", s.mean) << " | "
       << fmt::format("{:.3f}", s.max) << " | "
       << fmt::format("{:.2f} ({})", s.n ? double(r->calls) / double(s.n) : 0, r->calls_max)
       << " |\n";
  }
  md << "\n| migd footprint | value |\n|---|---|\n";
  md << fmt::format("| start to ready (socket accepts, 'migd ready' logged) | {:.0f} ms |\n",
                    start_ms);
  md << fmt::format("| RSS at idle | {:.1f} MiB |\n", idle0.rss_kb / 1024.0);
  md << fmt::format("| CPU at idle over {} s | {:.3f} s ({:.2f}%) |\n", idle_seconds,
                    idle1.cpu_s - idle0.cpu_s, 100 * (idle1.cpu_s - idle0.cpu_s) / idle_seconds);
  md << fmt::format("| RSS after the reuse loop | {:.1f} MiB |\n", load1.rss_kb / 1024.0);
  md << fmt::format(
      "| CPU under the reuse loop ({} allocate+release in {:.1f} s) | {:.2f} s "
      "({:.0f}% of one core, {:.0f} us per allocate+release) |\n",
      reuse_reps, load_s, load1.cpu_s - load0.cpu_s, 100 * (load1.cpu_s - load0.cpu_s) / load_s,
      1e6 * (load1.cpu_s - load0.cpu_s) / std::max(1, reuse_reps));
  md << fmt::format("| RSS at the end | {:.1f} MiB |\n", end.rss_kb / 1024.0);
  md << fmt::format("| exit on SIGTERM | {} |\n\n", exit.exit_code);
  if (out_md == "-") {
    std::cout << md.str();
  } else {
    std::ofstream(out_md) << md.str();
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  std::filesystem::remove_all(simt, ec);
  return exit.exit_code == 0 ? 0 : 1;
}
