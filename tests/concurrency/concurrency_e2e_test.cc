// File: tests/concurrency/concurrency_e2e_test.cc
//
// End to end: the real migd on simulated GPUs (a100-40gb:2,h100-80gb:1),
// MIGD_CONCURRENCY_CLIENTS client threads (default 16) each doing
// MIGD_CONCURRENCY_OPS mixed operations (default 500; under TSan too: the
// suppressions for Debian's uninstrumented gRPC are compiled into both this
// test and migd, cmake/tsan_suppressions.cc) over the API socket with the generated gRPC stub: Allocate of
// random profiles with unique request ids, Release (by request id and by MIG
// UUID), replay of a held request id (same owner: the same instances; another
// owner: ALREADY_EXISTS), List, Plan, GetStatus and an occasional operator
// Reclaim.
//
// Checked while running (from the clients' point of view, so without races):
//   * a MIG UUID is never returned to an allocation while another allocation
//     holds it (no MIG UUID held by two owners);
//   * every Allocate either succeeds or fails with RESOURCE_EXHAUSTED or
//     ABORTED; Release, List, Plan (or RESOURCE_EXHAUSTED), GetStatus and
//     Reclaim succeed;
//   * an instance List shows with a request id has that request's owner, and
//     an instance held across a whole List call is Active for its holder in
//     the answer;
//   * a Release answer lists only Idle instances of that allocation;
//   * Reclaim never destroys a held instance and never fails (no faults);
//   * a Watch stream open meanwhile sees strictly increasing sequence
//     numbers and ends only when cancelled (or after falling behind).
// Checked at rest, after every client has finished:
//   * List's Active instances are exactly the held ones, with their owner and
//     request id; every other instance is Idle; nothing is transitional
//     (Creating, Reclaiming, Deleting) or in Error; no foreign instance;
//   * the simulator's live GI/CI layout (its state file) is exactly List's
//     instances: GPU, placement, GI id, one CI each, MIG UUID;
//   * the CDI directory holds exactly one spec file per tracked instance and
//     each instance's cdi_device names it;
//   * GetStatus counts agree; after SIGTERM (exit 0) and a restart on the same
//     state, List shows the same instances, states and owners.
//
// Runtime on the 2-core build host: see tests/concurrency/CMakeLists.txt.
// The random choices are seeded per client (seed = MIGD_CONCURRENCY_SEED,
// default 1, plus the client index) and printed, so that a failure can be
// replayed; the interleaving of course is not reproducible.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cdi/names.h"
#include "migd/v1/migd.grpc.pb.h"
#include "migd/v1/migd.pb.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

namespace pb = ::migd::v1;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::TempDir;

constexpr char kSimGpus[] = "a100-40gb:2,h100-80gb:1";

// Profiles of the two simulated models, small ones more often so that GPUs
// fill up with mixed layouts and the 7-slice ones need pressure reclaims.
// 1g.10gb exists on both models.
const std::vector<std::string>& Profiles() {
  static const auto* const kProfiles = new std::vector<std::string>{
      "1g.5gb",  "1g.5gb",  "1g.10gb", "1g.10gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
      "7g.40gb", "1g.20gb", "2g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"};
  return *kProfiles;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::max(1, std::atoi(v));
}

std::string CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c < 17 ? kNames[c] : "CODE_" + std::to_string(c);
}

std::string Describe(const grpc::Status& s) {
  return CodeName(s.error_code()) + ": " + s.error_message();
}

// One allocation a client holds.
struct Held {
  std::string request_id;
  std::string owner;
  std::vector<std::string> profiles;   // as requested
  std::vector<std::string> mig_uuids;  // as returned, in request order
};

// What the clients know together. Every method takes the mutex; the checks
// are written so that the order in which clients update the ledger relative
// to the daemon cannot produce a false violation: an instance enters `holder_`
// only after Allocate returned it and leaves it before Release is sent.
class Ledger {
 public:
  // A successful (not replayed) Allocate.
  void Acquire(const Held& h) {
    std::lock_guard<std::mutex> lock(mu_);
    owner_by_request_[h.request_id] = h.owner;
    for (const std::string& uuid : h.mig_uuids) {
      auto [it, inserted] = holder_.emplace(uuid, h.request_id);
      if (!inserted) {
        AddLocked("MIG UUID " + uuid + " returned to " + h.request_id + " while held by " +
                  it->second);
      }
    }
  }
  // Before Release is sent for `uuids` of `request_id`.
  void Drop(const std::string& request_id, const std::vector<std::string>& uuids) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& uuid : uuids) {
      auto it = holder_.find(uuid);
      if (it == holder_.end() || it->second != request_id) {
        AddLocked("ledger: " + uuid + " dropped by " + request_id + " but not held by it");
      } else {
        holder_.erase(it);
      }
    }
  }
  // A MIG UUID the daemon says it destroyed.
  void Destroyed(const std::string& uuid, const std::string& how) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = holder_.find(uuid);
    if (it != holder_.end()) {
      AddLocked(how + " destroyed " + uuid + " held by " + it->second);
    }
  }
  // An instance as List showed it: one with a request id that some Allocate
  // returned must carry that allocation's owner (request ids and owners are
  // unique per allocation in this test).
  void CheckListed(const pb::Instance& inst) {
    if (inst.request_id().empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owner_by_request_.find(inst.request_id());
    if (it != owner_by_request_.end() && inst.owner().opaque_id() != it->second) {
      AddLocked("List: " + inst.mig_uuid() + " of " + inst.request_id() + " has owner \"" +
                inst.owner().opaque_id() + "\", the allocation's owner is \"" + it->second + "\"");
    }
  }
  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(what);
  }
  void Count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[what];
  }

  std::map<std::string, std::string> holders() const {
    std::lock_guard<std::mutex> lock(mu_);
    return holder_;
  }
  std::map<std::string, std::string> owners() const {
    std::lock_guard<std::mutex> lock(mu_);
    return owner_by_request_;
  }
  std::vector<std::string> violations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  size_t violation_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return violation_count_;
  }
  std::map<std::string, int> counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

 private:
  void AddLocked(const std::string& what) {
    ++violation_count_;
    if (violations_.size() < 50) violations_.push_back(what);  // keep the report readable
  }

  mutable std::mutex mu_;
  std::map<std::string, std::string> owner_by_request_;  // every allocation ever returned
  std::map<std::string, std::string> holder_;            // held MIG UUID -> request id
  std::vector<std::string> violations_;
  size_t violation_count_ = 0;
  std::map<std::string, int> counts_;
};

std::unique_ptr<pb::MigManager::Stub> NewStub(const std::string& socket) {
  grpc::ChannelArguments args;
  // One connection per client instead of one shared subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return pb::MigManager::NewStub(
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx) {
  // Generous: 16 clients on a shared 2-core host; a hang is what it catches.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
}

// A Watch stream open for the whole run, as a scheduler would keep one: its
// events must arrive with strictly increasing sequence numbers, and the
// stream must end only when the test cancels it (CANCELLED) or, if it fell
// more than 1024 events behind, with RESOURCE_EXHAUSTED.
class Watcher {
 public:
  explicit Watcher(const std::string& socket) : stub_(NewStub(socket)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() { Stop(); }

  // Cancels the stream and waits for the reader. Idempotent.
  void Stop() {
    ctx_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }

  uint64_t events() const { return events_; }
  const std::vector<std::string>& problems() const { return problems_; }
  const grpc::Status& status() const { return status_; }

 private:
  void Run() {
    pb::WatchRequest req;  // no snapshot: only live transitions
    std::unique_ptr<grpc::ClientReader<pb::InstanceEvent>> reader = stub_->Watch(&ctx_, req);
    pb::InstanceEvent ev;
    uint64_t last = 0;
    while (reader->Read(&ev)) {
      if (events_ > 0 && ev.sequence() <= last && problems_.size() < 10) {
        problems_.push_back("event sequence " + std::to_string(ev.sequence()) + " after " +
                            std::to_string(last));
      }
      last = ev.sequence();
      ++events_;
    }
    status_ = reader->Finish();
  }

  std::unique_ptr<pb::MigManager::Stub> stub_;
  grpc::ClientContext ctx_;
  std::thread thread_;
  // Written by the reader thread only; read after Stop() joined it.
  uint64_t events_ = 0;
  std::vector<std::string> problems_;
  grpc::Status status_;
};

class Client {
 public:
  Client(int index, unsigned seed, const std::string& socket, Ledger* ledger)
      : index_(index), rng_(seed), stub_(NewStub(socket)), ledger_(ledger) {}

  void Run(int ops) {
    for (int i = 0; i < ops; ++i) Step();
  }

  // What the client still holds at the end.
  const std::vector<Held>& held() const { return held_; }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string Prefix() const { return "c" + std::to_string(index_); }

  void Step() {
    const int r = Pick(100);
    // 16 clients share 21 compute slices: a client holding two allocations
    // releases instead of allocating, so that GPUs do not stay full and
    // allocations keep creating, reusing and reclaiming.
    if (held_.empty() ? r < 78 : (r < 35 && held_.size() < 2)) {
      Allocate();
    } else if (!held_.empty() && r < 55) {
      Release();
    } else if (!held_.empty() && r < 78) {
      Replay();
    } else if (r < 88) {
      List();
    } else if (r < 95) {
      Plan();
    } else if (r < 98) {
      GetStatus();
    } else {
      Reclaim();
    }
  }

  void Allocate() {
    Held h;
    h.request_id = Prefix() + "-r" + std::to_string(next_++);
    h.owner = Prefix() + "-owner-" + std::to_string(next_++);
    const int n = Pick(5) == 0 ? 2 : 1;
    pb::AllocateRequest req;
    req.set_request_id(h.request_id);
    req.mutable_owner()->set_opaque_id(h.owner);
    for (int i = 0; i < n; ++i) {
      h.profiles.push_back(Profiles()[Pick(static_cast<int>(Profiles().size()))]);
      req.add_instances()->set_profile(h.profiles.back());
    }
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::AllocateResponse resp;
    const grpc::Status s = stub_->Allocate(&ctx, req, &resp);
    if (!s.ok()) {
      ledger_->Count("allocate " + CodeName(s.error_code()));
      if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
          s.error_code() != grpc::StatusCode::ABORTED) {
        ledger_->Violation("Allocate " + h.request_id + ": " + Describe(s));
      }
      return;
    }
    if (resp.replayed() || resp.request_id() != h.request_id || resp.instances_size() != n) {
      ledger_->Violation("Allocate " + h.request_id + ": unexpected response " +
                         resp.ShortDebugString());
      return;
    }
    for (int i = 0; i < n; ++i) {
      const pb::AllocatedInstance& a = resp.instances(i);
      const pb::Instance& inst = a.instance();
      ledger_->Count("allocate path " + pb::AllocationPath_Name(a.path()));
      if (inst.state() != pb::INSTANCE_STATE_ACTIVE || inst.mig_uuid().empty() ||
          inst.owner().opaque_id() != h.owner || inst.request_id() != h.request_id ||
          inst.profile() != h.profiles[i]) {
        ledger_->Violation("Allocate " + h.request_id + " instance " + std::to_string(i) +
                           " (asked " + h.profiles[i] + "): " + inst.ShortDebugString());
      }
      h.mig_uuids.push_back(inst.mig_uuid());
    }
    ledger_->Acquire(h);
    held_.push_back(std::move(h));
  }

  void Release() {
    const size_t i = static_cast<size_t>(Pick(static_cast<int>(held_.size())));
    Held h = std::move(held_[i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    ledger_->Drop(h.request_id, h.mig_uuids);
    pb::ReleaseRequest req;
    const bool by_uuid = h.mig_uuids.size() == 1 && Pick(3) == 0;
    if (by_uuid) {
      req.set_mig_uuid(h.mig_uuids[0]);
    } else {
      req.set_request_id(h.request_id);
    }
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::ReleaseResponse resp;
    const grpc::Status s = stub_->Release(&ctx, req, &resp);
    ledger_->Count(std::string(by_uuid ? "release by uuid " : "release ") +
                   CodeName(s.error_code()));
    if (!s.ok()) {
      ledger_->Violation("Release " + h.request_id + ": " + Describe(s));
      return;
    }
    // The response lists the released instances that are still Idle when it
    // is built: one may already be reclaimed (pressure) or reused by another
    // client in between, since it became Idle first. So: a subset, all Idle.
    const std::set<std::string> held(h.mig_uuids.begin(), h.mig_uuids.end());
    for (const pb::Instance& inst : resp.instances()) {
      if (inst.state() != pb::INSTANCE_STATE_IDLE || held.count(inst.mig_uuid()) == 0) {
        std::string list;
        for (const std::string& u : h.mig_uuids) list += " " + u;
        ledger_->Violation(std::string("Release ") + (by_uuid ? "by MIG UUID " : "") +
                           h.request_id + " holding" + list + ": released " +
                           inst.ShortDebugString());
      }
    }
    if (resp.instances_size() < static_cast<int>(h.mig_uuids.size())) {
      ledger_->Count("release answered with fewer instances (raced with reclaim/reuse)");
    }
  }

  // Repeats a held allocation's request: the same owner gets the same
  // instances back (replayed); another owner gets ALREADY_EXISTS.
  void Replay() {
    const Held& h = held_[static_cast<size_t>(Pick(static_cast<int>(held_.size())))];
    const bool other_owner = Pick(5) == 0;
    pb::AllocateRequest req;
    req.set_request_id(h.request_id);
    req.mutable_owner()->set_opaque_id(other_owner ? h.owner + "-thief" : h.owner);
    for (const std::string& p : h.profiles) req.add_instances()->set_profile(p);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::AllocateResponse resp;
    const grpc::Status s = stub_->Allocate(&ctx, req, &resp);
    ledger_->Count(std::string(other_owner ? "replay other owner " : "replay ") +
                   CodeName(s.error_code()));
    if (other_owner) {
      if (s.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
        ledger_->Violation("replay of " + h.request_id + " by another owner: " + Describe(s) + " " +
                           resp.ShortDebugString());
      }
      return;
    }
    if (!s.ok()) {
      ledger_->Violation("replay of " + h.request_id + ": " + Describe(s));
      return;
    }
    std::vector<std::string> uuids;
    for (const pb::AllocatedInstance& a : resp.instances())
      uuids.push_back(a.instance().mig_uuid());
    if (!resp.replayed() || uuids != h.mig_uuids) {
      ledger_->Violation("replay of " + h.request_id + ": " + resp.ShortDebugString());
    }
  }

  void List() {
    // Instances held from before the call until after it (same request id
    // before and after: ids are never reused) must be Active for that request
    // in the answer, whatever the other clients do meanwhile.
    const std::map<std::string, std::string> held_before = ledger_->holders();
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::ListResponse resp;
    const grpc::Status s = stub_->List(&ctx, pb::ListRequest(), &resp);
    ledger_->Count("list " + CodeName(s.error_code()));
    if (!s.ok()) {
      ledger_->Violation("List: " + Describe(s));
      return;
    }
    const std::map<std::string, std::string> held_after = ledger_->holders();
    std::set<std::string> seen;
    for (const pb::Instance& inst : resp.instances()) {
      if (!inst.mig_uuid().empty() && !seen.insert(inst.mig_uuid()).second) {
        ledger_->Violation("List shows " + inst.mig_uuid() + " twice");
      }
      ledger_->CheckListed(inst);
    }
    for (const auto& [uuid, request] : held_before) {
      auto after = held_after.find(uuid);
      if (after == held_after.end() || after->second != request) continue;
      const pb::Instance* found = nullptr;
      for (const pb::Instance& inst : resp.instances()) {
        if (inst.mig_uuid() == uuid) found = &inst;
      }
      if (found == nullptr || found->state() != pb::INSTANCE_STATE_ACTIVE ||
          found->request_id() != request) {
        ledger_->Violation(
            "List during the hold of " + uuid + " by " + request + " shows " +
            (found == nullptr ? std::string("no such instance") : found->ShortDebugString()));
      }
    }
  }

  void Plan() {
    pb::PlanRequest req;
    req.add_instances()->set_profile(Profiles()[Pick(static_cast<int>(Profiles().size()))]);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::PlanResponse resp;
    const grpc::Status s = stub_->Plan(&ctx, req, &resp);
    ledger_->Count("plan " + CodeName(s.error_code()));
    if (s.ok() ? resp.instances_size() != 1
               : s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ledger_->Violation("Plan " + req.instances(0).profile() + ": " + Describe(s) + " " +
                         resp.ShortDebugString());
    }
  }

  void GetStatus() {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::GetStatusResponse resp;
    const grpc::Status s = stub_->GetStatus(&ctx, pb::GetStatusRequest(), &resp);
    ledger_->Count("status " + CodeName(s.error_code()));
    if (!s.ok() || resp.gpus_size() != 3) {
      ledger_->Violation("GetStatus: " + Describe(s) + " gpus=" + std::to_string(resp.gpus_size()));
    }
  }

  void Reclaim() {
    pb::ReclaimRequest req;
    switch (Pick(3)) {
      case 0:
        break;  // every Idle instance
      case 1:
        req.set_gpu(static_cast<uint32_t>(Pick(3)));
        break;
      default:
        req.set_profile(Profiles()[Pick(static_cast<int>(Profiles().size()))]);
        break;
    }
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::ReclaimResponse resp;
    const grpc::Status s = stub_->Reclaim(&ctx, req, &resp);
    ledger_->Count("reclaim " + CodeName(s.error_code()));
    if (!s.ok() || resp.failed_size() != 0) {
      ledger_->Violation("Reclaim " + req.ShortDebugString() + ": " + Describe(s) + " " +
                         resp.ShortDebugString());
      return;
    }
    for (const pb::Instance& inst : resp.destroyed()) {
      ledger_->Destroyed(inst.mig_uuid(), "Reclaim " + req.ShortDebugString());
    }
  }

  const int index_;
  std::mt19937 rng_;
  std::unique_ptr<pb::MigManager::Stub> stub_;
  Ledger* const ledger_;
  std::vector<Held> held_;
  int next_ = 0;
};

// (gpu index, placement start, size, GI id, MIG UUID): one instance as the
// simulator and as List see it.
using LiveKey = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, std::string>;

// The simulator's live layout from its state file (docs/simulator.md §3).
// Read at rest: the file is replaced atomically, so a plain read is whole.
std::set<LiveKey> SimLayout(const std::string& state_file, std::vector<std::string>* problems) {
  std::ifstream in(state_file);
  const nlohmann::json state = nlohmann::json::parse(in);
  std::set<LiveKey> out;
  for (const auto& gpu : state.at("gpus")) {
    const uint32_t index = gpu.at("index").get<uint32_t>();
    for (const auto& gi : gpu.at("gpuInstances")) {
      const auto& cis = gi.at("computeInstances");
      if (cis.size() != 1) {
        problems->push_back("sim: gpu " + std::to_string(index) + " GI " + gi.at("id").dump() +
                            " has " + std::to_string(cis.size()) + " CIs (migd makes one)");
        continue;
      }
      out.emplace(index, gi.at("placement").at("start").get<uint32_t>(),
                  gi.at("placement").at("size").get<uint32_t>(), gi.at("id").get<uint32_t>(),
                  cis[0].at("uuid").get<std::string>());
    }
  }
  return out;
}

StatusOr<pb::ListResponse> ListOnce(pb::MigManager::Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pb::ListResponse resp;
  const grpc::Status s = stub.List(&ctx, pb::ListRequest(), &resp);
  if (!s.ok()) return InternalError("List: " + Describe(s));
  return resp;
}

grpc::Status AllocateOnce(pb::MigManager::Stub& stub, const std::string& request_id,
                          const std::string& owner, const std::vector<std::string>& profiles,
                          pb::AllocateResponse* resp) {
  pb::AllocateRequest req;
  req.set_request_id(request_id);
  req.mutable_owner()->set_opaque_id(owner);
  for (const std::string& p : profiles) req.add_instances()->set_profile(p);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  return stub.Allocate(&ctx, req, resp);
}

// A comparable digest of List: "gpu/start+size uuid state request owner".
std::vector<std::string> Digest(const pb::ListResponse& list) {
  std::vector<std::string> out;
  for (const pb::Instance& inst : list.instances()) {
    out.push_back(std::to_string(inst.gpu_index()) + "/" +
                  std::to_string(inst.placement().start()) + "+" +
                  std::to_string(inst.placement().size()) + " " + inst.mig_uuid() + " " +
                  pb::InstanceState_Name(inst.state()) + " " + inst.request_id() + " " +
                  inst.owner().opaque_id());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Tail(const std::string& s, size_t n = 4000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

class ConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("sim/proc"));
    std::filesystem::create_directories(dir_.Join("cdi"));
    options_.args = {
        "--simulate",       kSimGpus,         "--socket",       socket(),           "--state-dir",
        dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"), "--metrics-listen", ""};
    options_.env = {{"MIGD_SIM_STATE", sim_state()},
                    {"MIGD_SIM_PROC_ROOT", dir_.Join("sim/proc")},
                    // Durability is not under test here; fsync of every sim
                    // mutation only slows the shared build host down.
                    {"MIGD_SIM_FSYNC", "0"},
                    {"MIGD_SIM_FAULTS", ""}};
    options_.socket_path = socket();
  }

  std::string socket() const { return dir_.Join("api.socket"); }
  std::string sim_state() const { return dir_.Join("sim/state.json"); }

  TempDir dir_;
  DaemonOptions options_;
};

TEST_F(ConcurrencyTest, MixedClientsKeepInvariants) {
  const int clients = EnvInt("MIGD_CONCURRENCY_CLIENTS", 16);
  const int ops = EnvInt("MIGD_CONCURRENCY_OPS", 500);
  const int seed = EnvInt("MIGD_CONCURRENCY_SEED", 1);
  std::cout << "clients=" << clients << " ops=" << ops << " seed=" << seed << std::endl;

  const auto t0 = std::chrono::steady_clock::now();
  // Progress on stdout (not asserted): where the wall time goes.
  auto phase = [&t0](const char* what) {
    std::cout << "[" << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s] " << what << std::endl;
  };
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> daemon,
                            DaemonProcess::Start(options_, dir_.path()));
  phase("migd ready");

  Ledger ledger;
  std::vector<std::unique_ptr<Client>> workers;
  for (int i = 0; i < clients; ++i) {
    workers.push_back(
        std::make_unique<Client>(i, static_cast<unsigned>(seed + i), socket(), &ledger));
  }
  auto watcher = std::make_unique<Watcher>(socket());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, ops] { w->Run(ops); });
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  watcher->Stop();
  std::cout << "watch stream: " << watcher->events() << " events, ended with "
            << Describe(watcher->status()) << std::endl;
  EXPECT_THAT(watcher->problems(), ::testing::IsEmpty());
  EXPECT_TRUE(watcher->status().error_code() == grpc::StatusCode::CANCELLED ||
              watcher->status().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(watcher->status());
  if (clients * ops >= 1000) {
    EXPECT_GT(watcher->events(), 0u);
  }
  watcher.reset();

  std::cout << clients * ops << " operations in " << seconds << " s" << std::endl;
  for (const auto& [what, n] : ledger.counts()) std::cout << "  " << what << ": " << n << "\n";
  std::cout << std::flush;

  ASSERT_TRUE(daemon->Running()) << Tail(daemon->Stderr());
  if (ledger.violation_count() != 0) {
    // The whole daemon log (one line per transition) is what explains a
    // violation; keep it beyond the test's temporary directory.
    const std::string log_copy =
        (std::filesystem::temp_directory_path() / "concurrency_e2e_test.migd.log").string();
    std::ofstream(log_copy) << daemon->Stderr();
    ADD_FAILURE() << ledger.violation_count() << " violations (the first "
                  << ledger.violations().size() << " below); daemon log: " << log_copy << "\n"
                  << ::testing::PrintToString(ledger.violations());
  }
  // The mix must have exercised what it is meant to: successful allocations,
  // releases and replays. (Counts, not timings.)
  // Only meaningful with enough operations (the defaults give hundreds).
  if (clients * ops >= 1000) {
    const auto counts = ledger.counts();
    EXPECT_GT(counts.count("release OK") ? counts.at("release OK") : 0, 0);
    EXPECT_GT(counts.count("replay OK") ? counts.at("replay OK") : 0, 0);
    EXPECT_GT(counts.count("allocate path ALLOCATION_PATH_RECLAIM_CREATE")
                  ? counts.at("allocate path ALLOCATION_PATH_RECLAIM_CREATE")
                  : 0,
              0);
  }

  // ---- At rest ----
  std::vector<Held> still_held;
  for (const auto& w : workers) {
    still_held.insert(still_held.end(), w->held().begin(), w->held().end());
  }
  workers.clear();  // close the clients' connections
  phase("clients done");
  const std::map<std::string, std::string> holders = ledger.holders();
  const std::map<std::string, std::string> owners = ledger.owners();
  auto stub = NewStub(socket());
  MIGD_ASSERT_OK_AND_ASSIGN(pb::ListResponse list, ListOnce(*stub));

  EXPECT_EQ(list.foreign_size(), 0);
  std::set<std::string> active;
  std::set<LiveKey> listed;
  std::set<std::string> expected_cdi_files;
  const cdi::Kind kind;  // hami.io/mig, the default
  for (const pb::Instance& inst : list.instances()) {
    SCOPED_TRACE(inst.ShortDebugString());
    listed.emplace(inst.gpu_index(), inst.placement().start(), inst.placement().size(),
                   inst.gi_id(), inst.mig_uuid());
    expected_cdi_files.insert(cdi::SpecFileName(kind, inst.mig_uuid()));
    EXPECT_EQ(inst.cdi_device(), kind.QualifiedName(inst.mig_uuid()));
    if (inst.state() == pb::INSTANCE_STATE_ACTIVE) {
      active.insert(inst.mig_uuid());
      auto h = holders.find(inst.mig_uuid());
      ASSERT_TRUE(h != holders.end()) << "Active but held by no client";
      EXPECT_EQ(inst.request_id(), h->second);
      EXPECT_EQ(inst.owner().opaque_id(), owners.at(h->second));
    } else {
      // Nothing transitional and nothing in Error at rest.
      EXPECT_EQ(inst.state(), pb::INSTANCE_STATE_IDLE);
      EXPECT_EQ(inst.request_id(), "");
      EXPECT_FALSE(inst.has_owner());
    }
  }
  EXPECT_EQ(listed.size(), static_cast<size_t>(list.instances_size())) << "duplicate instances";
  std::set<std::string> held_uuids;
  for (const auto& [uuid, request] : holders) held_uuids.insert(uuid);
  EXPECT_EQ(active, held_uuids) << "Active instances differ from the ones clients hold";

  // The simulator's live layout is exactly what migd tracks.
  std::vector<std::string> sim_problems;
  const std::set<LiveKey> live = SimLayout(sim_state(), &sim_problems);
  EXPECT_THAT(sim_problems, ::testing::IsEmpty());
  EXPECT_EQ(live, listed) << "simulator layout and List differ";

  // One CDI spec file per tracked instance, nothing else (no temp files).
  std::set<std::string> cdi_files;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Join("cdi"))) {
    cdi_files.insert(e.path().filename().string());
  }
  EXPECT_EQ(cdi_files, expected_cdi_files);

  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::GetStatusResponse status;
    ASSERT_TRUE(stub->GetStatus(&ctx, pb::GetStatusRequest(), &status).ok());
    EXPECT_EQ(status.instances_active(), active.size());
    EXPECT_EQ(status.instances_idle(), static_cast<size_t>(list.instances_size()) - active.size());
    EXPECT_EQ(status.instances_error(), 0u);
    EXPECT_EQ(status.instances_foreign(), 0u);
  }

  // SIGTERM at rest exits cleanly; a restart on the same state recovers the
  // same instances, states and owners.
  stub.reset();
  phase("checked at rest");
  testing::DaemonExit exit = daemon->Stop();
  ASSERT_EQ(exit.exit_code, 0) << Tail(exit.err);
  phase("migd stopped");
  MIGD_ASSERT_OK_AND_ASSIGN(daemon, DaemonProcess::Start(options_, dir_.path()));
  phase("migd restarted");
  stub = NewStub(socket());
  MIGD_ASSERT_OK_AND_ASSIGN(pb::ListResponse after, ListOnce(*stub));
  EXPECT_EQ(Digest(after), Digest(list)) << Tail(daemon->Stderr());
  // Allocate stays idempotent across the restart: every held single-instance
  // allocation replays to the same instance. (Multi-instance ones: see
  // ReplayAfterRestartKeepsRequestOrder below.)
  int replayed = 0;
  for (const Held& h : still_held) {
    if (h.mig_uuids.size() != 1) continue;
    pb::AllocateResponse resp;
    const grpc::Status s = AllocateOnce(*stub, h.request_id, h.owner, h.profiles, &resp);
    EXPECT_TRUE(s.ok() && resp.replayed() && resp.instances_size() == 1 &&
                resp.instances(0).instance().mig_uuid() == h.mig_uuids[0])
        << h.request_id << " after the restart: " << Describe(s) << " " << resp.ShortDebugString();
    ++replayed;
  }
  std::cout << replayed << " held allocations replayed after the restart" << std::endl;
  stub.reset();
  exit = daemon->Stop();
  EXPECT_EQ(exit.exit_code, 0) << Tail(exit.err);
  phase("migd stopped again");
}

// Idempotency across a restart for an allocation of several instances: the
// replay must return the same instances, in request order (AllocateResponse:
// "in request order"). DISABLED: fails today — recovery rebuilds an
// allocation's instance list in record-key order (GPU, profile id,
// placement), not in request order, and the replay check compares the
// request's profiles position by position, so the retry gets ALREADY_EXISTS
// ("request id r1 was already used by another allocation"). Enable it with
// the fix (match the specs to the recovered instances irrespective of order,
// or persist each instance's position in its allocation).
TEST_F(ConcurrencyTest, ReplayAfterRestartKeepsRequestOrder) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::unique_ptr<DaemonProcess> daemon,
                            DaemonProcess::Start(options_, dir_.path()));
  // 1g.5gb has a larger NVML profile id than 2g.10gb on an A100: key order
  // and request order differ.
  const std::vector<std::string> profiles = {"1g.5gb", "2g.10gb"};
  auto stub = NewStub(socket());
  pb::AllocateResponse first;
  ASSERT_TRUE(AllocateOnce(*stub, "r1", "o1", profiles, &first).ok());
  ASSERT_EQ(first.instances_size(), 2);
  stub.reset();
  ASSERT_EQ(daemon->Stop().exit_code, 0);
  MIGD_ASSERT_OK_AND_ASSIGN(daemon, DaemonProcess::Start(options_, dir_.path()));
  stub = NewStub(socket());
  pb::AllocateResponse again;
  const grpc::Status s = AllocateOnce(*stub, "r1", "o1", profiles, &again);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_TRUE(again.replayed());
  ASSERT_EQ(again.instances_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again.instances(i).instance().mig_uuid(), first.instances(i).instance().mig_uuid());
  }
  stub.reset();
  EXPECT_EQ(daemon->Stop().exit_code, 0);
}

}  // namespace
}  // namespace migd
