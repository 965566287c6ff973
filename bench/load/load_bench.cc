// load_bench: many concurrent clients against the real daemon.
//
// Starts `migd --simulate` as a child process (CDI dir, socket and the
// simulator's state file under --dir, /dev/shm by default; migd's stateDir
// under --state-parent, default --dir: tmpfs or a disk directory), then runs
// --clients threads, each with its own gRPC channel (its own connection)
// over the unix socket, each doing --ops operations:
//   --mode mixed   drawn from a fixed mix (Allocate, Allocate replay, Release
//                  by request id or by MIG UUID, List, GetStatus, Plan,
//                  Reclaim);
//   --mode cycles  allocate+release cycles of one instance of the first
//                  --profiles entry (after the first cycle of each client,
//                  served by reuse unless another client holds every Idle
//                  one): the reuse throughput of the node.
// Reports throughput and p50/p99/max latency per operation as the client
// sees it.
//
// Invariants, checked while running and at the end (exit 1 on a violation):
//   - a MIG UUID is never handed to two allocations at once (a global
//     uuid -> request map; an entry is removed *before* its Release is sent,
//     so a legitimate reuse by another client never looks like a clash);
//   - a replayed Allocate returns the same MIG UUIDs;
//   - at the end, List's Active instances are exactly what the clients hold,
//     no MIG UUID appears twice, nothing is left Creating/Reclaiming/Deleting;
//   - List (tracked + foreign) equals the simulator's live layout (GPU, GI
//     id, CI id, MIG UUID, placement) read from its state file;
//   - after releasing everything and a full Reclaim, the simulated GPUs are
//     empty.
//
// A benchmark, not a test: nothing here asserts a time. Method and results
// are in docs/benchmarks/load.md.
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "base/status_macros.h"
#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"

namespace {

namespace v1 = migd::v1;
using Clock = std::chrono::steady_clock;

enum Op { kAllocate, kReplay, kReleaseId, kReleaseUuid, kList, kStatus, kPlan, kReclaim, kOps };
constexpr const char* kOpNames[kOps] = {"Allocate",
                                        "Allocate (replay)",
                                        "Release (request id)",
                                        "Release (MIG UUID)",
                                        "List",
                                        "GetStatus",
                                        "Plan",
                                        "Reclaim"};

struct OpStats {
  std::vector<double> ms;  // every call, ok or not
  uint64_t ok = 0;
  uint64_t exhausted = 0;  // RESOURCE_EXHAUSTED: the GPUs are full (expected)
  uint64_t errors = 0;     // anything else: reported, fails the run
  void Merge(const OpStats& o) {
    ms.insert(ms.end(), o.ms.begin(), o.ms.end());
    ok += o.ok;
    exhausted += o.exhausted;
    errors += o.errors;
  }
};

// Shared between the client threads: who holds which MIG UUID.
class Holdings {
 public:
  // Records `uuids` as held by `request`; false (and a message) if one is
  // already held by another request.
  bool Acquire(const std::string& request, const std::vector<std::string>& uuids,
               std::string* why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& u : uuids) {
      auto it = owner_.find(u);
      if (it != owner_.end() && it->second != request) {
        *why = u + " handed to " + request + " while held by " + it->second;
        return false;
      }
    }
    for (const std::string& u : uuids) owner_[u] = request;
    return true;
  }
  void Drop(const std::vector<std::string>& uuids) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& u : uuids) owner_.erase(u);
  }
  std::map<std::string, std::string> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return owner_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> owner_;  // MIG UUID -> request id
};

struct Shared {
  Holdings holdings;
  std::mutex mu;
  std::vector<std::string> violations;     // invariant breaks (fail the run)
  std::vector<std::string> error_samples;  // first unexpected errors
  void Violation(const std::string& v) {
    std::lock_guard<std::mutex> lock(mu);
    violations.push_back(v);
  }
  void Error(const std::string& what, const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (error_samples.size() < 20) {
      error_samples.push_back(what + ": code " + std::to_string(s.error_code()) + " " +
                              s.error_message());
    }
  }
};

struct ClientConfig {
  int index = 0;
  int ops = 0;
  uint64_t seed = 0;
  std::string socket;
  std::vector<std::string> profiles;
};

std::vector<std::string> UuidsOf(const v1::AllocateResponse& r) {
  std::vector<std::string> out;
  for (const auto& a : r.instances()) out.push_back(a.instance().mig_uuid());
  return out;
}

// One client: its own channel (a local subchannel pool, so its own
// connection), at most two allocations held at a time.
void RunClient(const ClientConfig& cfg, Shared* shared, std::array<OpStats, kOps>* stats) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::MigManager::NewStub(
      grpc::CreateCustomChannel("unix:" + cfg.socket, grpc::InsecureChannelCredentials(), args));
  std::mt19937_64 rng(cfg.seed);
  auto uniform = [&] { return std::uniform_real_distribution<double>(0, 1)(rng); };
  // request id -> (uuids, the request as sent, for replays)
  struct Held {
    std::vector<std::string> uuids;
    v1::AllocateRequest req;
  };
  std::map<std::string, Held> held;
  uint64_t seq = 0;

  auto timed = [&](Op op, auto&& call) {
    const auto t0 = Clock::now();
    grpc::Status s = call();
    (*stats)[op].ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (s.ok()) {
      ++(*stats)[op].ok;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
               (op == kAllocate || op == kPlan)) {
      ++(*stats)[op].exhausted;
    } else {
      ++(*stats)[op].errors;
      shared->Error(kOpNames[op], s);
    }
    return s;
  };
  auto random_spec = [&](v1::InstanceSpec* spec) {
    spec->set_profile(cfg.profiles[rng() % cfg.profiles.size()]);
  };
  auto release_id = [&](const std::string& id) {
    // Drop first: once the daemon has released, another client may get the
    // same instance before this thread runs again.
    shared->holdings.Drop(held[id].uuids);
    v1::ReleaseRequest req;
    req.set_request_id(id);
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = timed(kReleaseId, [&] { return stub->Release(&ctx, req, &resp); });
    held.erase(id);
    return s;
  };

  for (int i = 0; i < cfg.ops; ++i) {
    const double r = uniform();
    if (r < 0.30 && held.size() < 2) {
      v1::AllocateRequest req;
      const std::string id = fmt::format("load-c{}-{}", cfg.index, seq++);
      req.set_request_id(id);
      req.mutable_owner()->set_opaque_id(fmt::format("client-{}", cfg.index));
      random_spec(req.add_instances());
      if (uniform() < 0.1) random_spec(req.add_instances());  // all or nothing
      v1::AllocateResponse resp;
      grpc::ClientContext ctx;
      grpc::Status s = timed(kAllocate, [&] { return stub->Allocate(&ctx, req, &resp); });
      if (s.ok()) {
        std::string why;
        std::vector<std::string> uuids = UuidsOf(resp);
        if (static_cast<int>(uuids.size()) != req.instances_size()) {
          shared->Violation(id + ": " + std::to_string(uuids.size()) + " instances for " +
                            std::to_string(req.instances_size()) + " specs");
        }
        if (!shared->holdings.Acquire(id, uuids, &why)) shared->Violation(why);
        held[id] = Held{uuids, req};
      }
    } else if (r < 0.35 && !held.empty()) {
      auto it = std::next(held.begin(), static_cast<long>(rng() % held.size()));
      v1::AllocateResponse resp;
      grpc::ClientContext ctx;
      grpc::Status s = timed(kReplay, [&] { return stub->Allocate(&ctx, it->second.req, &resp); });
      if (s.ok() && (!resp.replayed() || UuidsOf(resp) != it->second.uuids)) {
        shared->Violation(it->first + ": replay returned other instances or replayed=false");
      }
    } else if (r < 0.60 && !held.empty()) {
      auto it = std::next(held.begin(), static_cast<long>(rng() % held.size()));
      if (it->second.uuids.size() == 1 && uniform() < 0.3) {
        const std::string id = it->first;
        shared->holdings.Drop(it->second.uuids);
        v1::ReleaseRequest req;
        req.set_mig_uuid(it->second.uuids[0]);
        v1::ReleaseResponse resp;
        grpc::ClientContext ctx;
        timed(kReleaseUuid, [&] { return stub->Release(&ctx, req, &resp); });
        held.erase(id);
      } else {
        release_id(it->first);
      }
    } else if (r < 0.80) {
      v1::ListRequest req;
      v1::ListResponse resp;
      grpc::ClientContext ctx;
      timed(kList, [&] { return stub->List(&ctx, req, &resp); });
    } else if (r < 0.90) {
      v1::GetStatusRequest req;
      v1::GetStatusResponse resp;
      grpc::ClientContext ctx;
      timed(kStatus, [&] { return stub->GetStatus(&ctx, req, &resp); });
    } else if (r < 0.97) {
      v1::PlanRequest req;
      random_spec(req.add_instances());
      v1::PlanResponse resp;
      grpc::ClientContext ctx;
      timed(kPlan, [&] { return stub->Plan(&ctx, req, &resp); });
    } else {
      v1::ReclaimRequest req;
      req.set_profile(cfg.profiles[rng() % cfg.profiles.size()]);
      v1::ReclaimResponse resp;
      grpc::ClientContext ctx;
      timed(kReclaim, [&] { return stub->Reclaim(&ctx, req, &resp); });
    }
  }
  // Leave the holdings in place: the end-of-run check compares them with List.
}

// --mode cycles: Allocate then Release, --ops times; the holdings check
// every grant as in the mixed mode.
void RunCycleClient(const ClientConfig& cfg, Shared* shared, std::array<OpStats, kOps>* stats,
                    std::atomic<uint64_t>* reuses) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::MigManager::NewStub(
      grpc::CreateCustomChannel("unix:" + cfg.socket, grpc::InsecureChannelCredentials(), args));
  auto timed = [&](Op op, auto&& call) {
    const auto t0 = Clock::now();
    grpc::Status s = call();
    (*stats)[op].ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (s.ok()) {
      ++(*stats)[op].ok;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && op == kAllocate) {
      ++(*stats)[op].exhausted;
    } else {
      ++(*stats)[op].errors;
      shared->Error(kOpNames[op], s);
    }
    return s;
  };
  for (int i = 0; i < cfg.ops; ++i) {
    const std::string id = fmt::format("cycle-c{}-{}", cfg.index, i);
    v1::AllocateRequest req;
    req.set_request_id(id);
    req.mutable_owner()->set_opaque_id(fmt::format("client-{}", cfg.index));
    req.add_instances()->set_profile(cfg.profiles.front());
    v1::AllocateResponse resp;
    grpc::ClientContext actx;
    if (!timed(kAllocate, [&] { return stub->Allocate(&actx, req, &resp); }).ok()) continue;
    const std::vector<std::string> uuids = UuidsOf(resp);
    std::string why;
    if (uuids.size() != 1)
      shared->Violation(id + ": " + std::to_string(uuids.size()) + " instances");
    if (!shared->holdings.Acquire(id, uuids, &why)) shared->Violation(why);
    if (resp.instances_size() == 1 && resp.instances(0).path() == v1::ALLOCATION_PATH_REUSE) {
      reuses->fetch_add(1, std::memory_order_relaxed);
    }
    shared->holdings.Drop(uuids);  // before the Release (see Holdings)
    v1::ReleaseRequest rel;
    rel.set_request_id(id);
    v1::ReleaseResponse rresp;
    grpc::ClientContext rctx;
    timed(kReleaseId, [&] { return stub->Release(&rctx, rel, &rresp); });
  }
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// (gpu, gi id, ci id, MIG UUID, placement start, size)
using LiveCi = std::tuple<uint32_t, uint32_t, uint32_t, std::string, uint32_t, uint32_t>;

bool SimLayout(const std::string& state_path, std::set<LiveCi>* out, std::string* err) {
  std::ifstream in(state_path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("gpus")) {
    *err = "cannot parse " + state_path;
    return false;
  }
  for (const auto& g : j["gpus"]) {
    for (const auto& gi : g["gpuInstances"]) {
      for (const auto& ci : gi["computeInstances"]) {
        out->emplace(g["index"].get<uint32_t>(), gi["id"].get<uint32_t>(), ci["id"].get<uint32_t>(),
                     ci["uuid"].get<std::string>(), gi["placement"]["start"].get<uint32_t>(),
                     gi["placement"]["size"].get<uint32_t>());
      }
    }
  }
  return true;
}

// The end-of-run checks over List and the simulator's file.
void CheckEnd(v1::MigManager::Stub* stub, const std::string& sim_state, Shared* shared) {
  v1::ListRequest req;
  v1::ListResponse list;
  grpc::ClientContext ctx;
  grpc::Status s = stub->List(&ctx, req, &list);
  if (!s.ok()) return shared->Violation("final List failed: " + s.error_message());
  std::map<std::string, std::string> active;  // uuid -> request id
  std::set<std::string> seen;
  std::set<LiveCi> listed;
  for (const auto& inst : list.instances()) {
    if (!seen.insert(inst.mig_uuid()).second) {
      shared->Violation("List shows " + inst.mig_uuid() + " twice");
    }
    switch (inst.state()) {
      case v1::INSTANCE_STATE_ACTIVE:
        active[inst.mig_uuid()] = inst.request_id();
        break;
      case v1::INSTANCE_STATE_IDLE:
        break;
      default:
        shared->Violation(fmt::format("{} left in state {}", inst.mig_uuid(),
                                      v1::InstanceState_Name(inst.state())));
    }
    listed.emplace(inst.gpu_index(), inst.gi_id(), inst.ci_id(), inst.mig_uuid(),
                   inst.placement().start(), inst.placement().size());
  }
  if (list.foreign_size() != 0) {
    shared->Violation(std::to_string(list.foreign_size()) +
                      " foreign instances on a fresh machine");
  }
  const auto held = shared->holdings.Snapshot();
  if (active != held) {
    shared->Violation(
        fmt::format("List has {} Active instances, the clients hold {} (or owners "
                    "differ)",
                    active.size(), held.size()));
  }
  std::set<LiveCi> live;
  std::string err;
  if (!SimLayout(sim_state, &live, &err)) return shared->Violation(err);
  if (live != listed) {
    shared->Violation(
        fmt::format("List ({} instances) differs from the simulator's layout ({} "
                    "CIs)",
                    listed.size(), live.size()));
  }
}

struct Flags {
  std::string migd = MIGD_BINARY;
  std::string dir = "/dev/shm";
  std::string state_parent;  // "" = dir
  std::string gpus = "h100-80gb:16";
  std::string profiles_csv = "1g.10gb,1g.20gb,2g.20gb,3g.40gb";
  std::string mode = "mixed";
  std::string out_md = "-";
  int clients = 32, ops = 10000;
  uint64_t seed = 1;
  bool quick = false;
};

struct Run {
  std::string tmpl;        // --dir scratch (socket, CDI, simulator)
  std::string state_tmpl;  // stateDir's parent scratch
  std::string socket, sim_state;
  std::unique_ptr<migd::testing::DaemonProcess> daemon;
};

migd::Status StartDaemon(const Flags& f, Run* run) {
  run->tmpl = f.dir + "/migd-load-XXXXXX";
  run->state_tmpl = (f.state_parent.empty() ? f.dir : f.state_parent) + "/migd-load-state-XXXXXX";
  std::error_code ec;
  if (!f.state_parent.empty()) std::filesystem::create_directories(f.state_parent, ec);
  if (mkdtemp(run->tmpl.data()) == nullptr || mkdtemp(run->state_tmpl.data()) == nullptr) {
    return migd::InternalError("mkdtemp under " + f.dir + " / " + f.state_parent + " failed");
  }
  run->socket = run->tmpl + "/api.socket";
  run->sim_state = run->tmpl + "/sim/state.json";
  migd::testing::DaemonOptions opts;
  opts.binary = f.migd;
  opts.args = {"--simulate",       f.gpus,
               "--socket",         run->socket,
               "--state-dir",      run->state_tmpl + "/state",
               "--metrics-listen", "",
               "--cdi-spec-dir",   run->tmpl + "/cdi"};
  opts.env = {{"MIGD_SIM_STATE", run->sim_state}, {"MIGD_SIM_PROC_ROOT", run->tmpl + "/proc"}};
  opts.socket_path = run->socket;
  MIGD_ASSIGN_OR_RETURN(run->daemon, migd::testing::DaemonProcess::Start(opts, run->tmpl));
  return migd::OkStatus();
}

// Release everything, reclaim everything: the GPUs must end empty; migd
// must exit 0 on SIGTERM.
void FinalChecks(Run& run, Shared* shared) {
  auto stub = v1::MigManager::NewStub(
      grpc::CreateChannel("unix:" + run.socket, grpc::InsecureChannelCredentials()));
  CheckEnd(stub.get(), run.sim_state, shared);
  for (const auto& [uuid, id] : shared->holdings.Snapshot()) {
    (void)uuid;
    v1::ReleaseRequest req;
    req.set_request_id(id);
    v1::ReleaseResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub->Release(&ctx, req, &resp);
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) {
      shared->Violation("final release of " + id + ": " + s.error_message());
    }
  }
  v1::ReclaimRequest req;
  v1::ReclaimResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Reclaim(&ctx, req, &resp);
  std::set<LiveCi> live;
  std::string err;
  if (!s.ok()) {
    shared->Violation("final Reclaim: " + s.error_message());
  } else if (!SimLayout(run.sim_state, &live, &err) || !live.empty()) {
    shared->Violation(
        fmt::format("after release + reclaim the simulator still has {} CIs {}", live.size(), err));
  }
  const migd::testing::DaemonExit exit = run.daemon->Stop();
  if (exit.exit_code != 0) shared->Violation("migd exit code " + std::to_string(exit.exit_code));
}

std::string FsType(const std::string& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return "?";
  if (st.f_type == 0x01021994) return "tmpfs";
  if (st.f_type == 0xEF53) return "ext4";
  return fmt::format("0x{:x}", static_cast<uint64_t>(st.f_type));
}

// The tables; returns the number of unexpected errors.
uint64_t Report(const Flags& f, const Run& run, const std::array<OpStats, kOps>& total_in,
                double wall_s, uint64_t reuses, const Shared& shared, std::ostringstream& md) {
  std::array<OpStats, kOps> total = total_in;
  uint64_t n_all = 0, errors = 0;
  md << fmt::format("### {}: {} clients x {} {}, migd --simulate {}, stateDir on {}, seed {}\n\n",
                    f.mode, f.clients, f.ops, f.mode == "cycles" ? "cycles" : "operations", f.gpus,
                    FsType(run.state_tmpl), f.seed);
  md << "| operation | calls | ok | RESOURCE_EXHAUSTED | other errors | p50 ms | p99 ms | max ms "
        "|\n"
     << "|---|---|---|---|---|---|---|---|\n";
  for (int o = 0; o < kOps; ++o) {
    OpStats& s = total[o];
    if (s.ms.empty()) continue;
    n_all += s.ms.size();
    errors += s.errors;
    const double max = *std::max_element(s.ms.begin(), s.ms.end());
    md << fmt::format("| {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {:.3f} |\n", kOpNames[o],
                      s.ms.size(), s.ok, s.exhausted, s.errors, Percentile(s.ms, 0.50),
                      Percentile(s.ms, 0.99), max);
  }
  if (f.mode == "cycles") {
    const uint64_t cycles = total[kReleaseId].ok;
    md << fmt::format(
        "\nTotal: {} allocate+release cycles in {:.2f} s = **{:.0f} cycles/s** ({} of {} "
        "allocations served by reuse); unexpected errors: {}; invariant violations: {}.\n",
        cycles, wall_s, static_cast<double>(cycles) / wall_s, reuses, total[kAllocate].ok, errors,
        shared.violations.size());
  } else {
    md << fmt::format(
        "\nTotal: {} operations in {:.2f} s = **{:.0f} ops/s**; unexpected errors: "
        "{}; invariant violations: {}.\n",
        n_all, wall_s, static_cast<double>(n_all) / wall_s, errors, shared.violations.size());
  }
  for (const std::string& e : shared.error_samples) md << "- error: " << e << "\n";
  for (size_t i = 0; i < shared.violations.size() && i < 20; ++i) {
    md << "- VIOLATION: " << shared.violations[i] << "\n";
  }
  return errors;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"migd load benchmark: concurrent clients over the gRPC socket (simulated NVML)"};
  Flags f;
  app.add_option("--migd", f.migd, "migd binary");
  app.add_option("--dir", f.dir, "where the CDI dir, socket and simulator state live (tmpfs)");
  app.add_option("--state-parent", f.state_parent, "where migd's stateDir lives (default --dir)");
  app.add_option("--gpus", f.gpus, "migd --simulate spec (at most 32 GPUs)");
  app.add_option("--profiles", f.profiles_csv, "profiles the clients ask for (comma list)");
  app.add_option("--mode", f.mode, "mixed or cycles")->check(CLI::IsMember({"mixed", "cycles"}));
  app.add_option("--clients", f.clients)->check(CLI::Range(1, 1024));
  app.add_option("--ops", f.ops, "operations (cycles) per client")->check(CLI::Range(1, 10000000));
  app.add_option("--seed", f.seed);
  app.add_option("--out-md", f.out_md, "Markdown results ('-' = stdout)");
  app.add_flag("--quick", f.quick, "300 operations per client (overrides --ops)");
  CLI11_PARSE(app, argc, argv);
  if (f.quick) f.ops = 300;
  std::vector<std::string> profiles = absl::StrSplit(f.profiles_csv, ',', absl::SkipEmpty());
  if (profiles.empty()) return std::cerr << "load_bench: --profiles is empty\n", 2;

  Run run;
  if (migd::Status st = StartDaemon(f, &run); !st.ok()) {
    std::cerr << "load_bench: " << st << "\n";
    return 1;
  }
  Shared shared;
  std::atomic<uint64_t> reuses{0};
  std::vector<std::array<OpStats, kOps>> per(static_cast<size_t>(f.clients));
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < f.clients; ++c) {
    ClientConfig cfg{c, f.ops, f.seed * 1000003 + static_cast<uint64_t>(c), run.socket, profiles};
    auto* stats = &per[static_cast<size_t>(c)];
    if (f.mode == "cycles") {
      threads.emplace_back(
          [cfg, &shared, stats, &reuses] { RunCycleClient(cfg, &shared, stats, &reuses); });
    } else {
      threads.emplace_back([cfg, &shared, stats] { RunClient(cfg, &shared, stats); });
    }
  }
  for (auto& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  FinalChecks(run, &shared);

  std::array<OpStats, kOps> total;
  for (const auto& p : per) {
    for (int o = 0; o < kOps; ++o) total[o].Merge(p[o]);
  }
  std::ostringstream md;
  const uint64_t errors = Report(f, run, total, wall_s, reuses.load(), shared, md);
  if (f.out_md != "-") std::ofstream(f.out_md) << md.str();
  std::cout << md.str();
  const bool failed = !shared.violations.empty() || errors != 0;
  std::error_code ec;
  if (failed) {
    std::cerr << "load_bench: FAILED; migd log kept in " << run.tmpl << "\n";
  } else {
    std::filesystem::remove_all(run.tmpl, ec);
  }
  std::filesystem::remove_all(run.state_tmpl, ec);
  return failed ? 1 : 0;
}
