// File: tests/crash/crash_campaign_e2e_test.cc
//
// Crash campaign: the real migd on simulated GPUs
// (a100-40gb:2,h100-80gb:1, one MIGD_SIM_STATE and MIGD_SIM_PROC_ROOT shared by
// every run, so a restart sees the same hardware) under a mixed gRPC load
// (kClients threads: Allocate of random profiles, Release, replay of a held
// request id, operator Reclaim, List) is killed with SIGKILL, restarted, and
// checked. Each iteration picks one way to die:
//   * "timer": SIGKILL after a random delay under load (lands anywhere: inside
//     an NVML call, a record write, a CDI spec write, a gRPC answer);
//   * a simulator crash hook (docs/simulator.md §7) on the Nth call of
//     nvmlDeviceCreateGpuInstanceWithPlacement, nvmlGpuInstanceCreateComputeInstance
//     (create), nvmlComputeInstanceDestroy or nvmlGpuInstanceDestroy (reclaim,
//     rollback), CRASH (before the call's effect) or CRASH_AFTER (after it,
//     before migd sees the answer);
//   * one of migd's own crash points (base/crash_point.h) on its Nth arrival:
//     between a record's or CDI spec's temp file and its rename, right after
//     the rename, or right before a record or spec file is unlinked.
// If a hook has not fired after a few seconds of load the test kills migd
// itself (counted as "hook-timeout").
// The next start carries the next iteration's hook, so a hook may also fire
// inside startup recovery (counted as "died in recovery"; the start after it
// is checked instead).
//
// Checked after every successful restart (no load running; startup recovery
// is migd's reconcile, it has finished once migd logs "migd ready"):
//   1. every live GI/CI in the simulator's state file is a List instance (same
//      GPU, GI id, placement, MIG UUID) or a List foreign instance;
//      every List instance is live; nothing is Creating/Reclaiming/Deleting;
//   2. every allocation acknowledged (Allocate OK) and not being released at
//      the kill is Active with its MIG UUIDs, request id and owner;
//      every Active instance belongs to an allocation some client sent;
//      an allocation whose Release the kill interrupted is Active in full, in
//      part (Release applies instance by instance) or not at all, and a
//      retried Release succeeds;
//   3. the records in the state dir are exactly List's instances (committed,
//      same MIG UUID, GI id, request id, owner); no record problems; the CDI
//      spec dir holds exactly one spec file per List instance;
//   4. no MIG UUID is held by two allocations (List, and the clients' ledger
//      across the whole campaign).
// Size and seed: MIGD_CRASH_ITERATIONS (default 15), MIGD_CRASH_SEED (default
// 20261129); both printed, so a failure can be replayed (the interleaving, of
// course, is not reproducible). scripts/crash-campaign.sh runs long campaigns.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
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
#include <vector>

#include "base/clock.h"
#include "base/crash_point.h"
#include "cdi/names.h"
#include "migd/v1/migd.grpc.pb.h"
#include "migd/v1/migd.pb.h"
#include "store/record_store.h"
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
constexpr int kClients = 3;

const std::vector<std::string>& Profiles() {
  static const auto* const kProfiles = new std::vector<std::string>{
      "1g.5gb", "1g.10gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb",
      "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"};
  return *kProfiles;
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

std::unique_ptr<pb::MigManager::Stub> NewStub(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return pb::MigManager::NewStub(
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx, int seconds = 60) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

std::string Tail(const std::string& s, size_t n = 3000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// What the clients know together, across every daemon run. A request id is
// used once; its owner is "o-" + request id.
class Ledger {
 public:
  // Allocate sent (before the answer): a kill now leaves it uncertain.
  void Sent(const std::string& rid) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.insert(rid);
  }
  void Acked(const std::string& rid, const std::vector<std::string>& uuids) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.erase(rid);
    AcquireLocked(rid, uuids);
  }
  void Refused(const std::string& rid) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.erase(rid);
  }
  // Picks a held allocation of `client` (empty if none) and, if `release`,
  // marks it as being released: from now on its fate is uncertain until the
  // answer (or the next restart) settles it.
  std::string Pick(int client, uint64_t r, bool release) {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> mine;
    for (const auto& [rid, uuids] : held_) {
      if (ClientOf(rid) == client && !releasing_.count(rid)) mine.push_back(rid);
    }
    if (mine.empty()) return "";
    const std::string rid = mine[r % mine.size()];
    if (release) releasing_.insert(rid);
    return rid;
  }
  std::vector<std::string> UuidsOf(const std::string& rid) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = held_.find(rid);
    return it == held_.end() ? std::vector<std::string>{} : it->second;
  }
  void Released(const std::string& rid) {
    std::lock_guard<std::mutex> l(mu_);
    DropLocked(rid);
  }
  // A retried Release is about to be sent: uncertain again until answered.
  void Releasing(const std::string& rid) {
    std::lock_guard<std::mutex> l(mu_);
    releasing_.insert(rid);
  }
  void Destroyed(const std::string& uuid, const std::string& how) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = holder_.find(uuid);
    if (it != holder_.end() && !releasing_.count(it->second)) {
      ViolationLocked(how + " destroyed " + uuid + " held by " + it->second);
    }
  }
  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    ViolationLocked(what);
  }
  void Count(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    ++counts_[what];
  }

  // After a restart (no client running): checks List's Active instances
  // against what the clients know and settles every uncertain operation.
  // Returns the allocations whose Release was interrupted and that are still
  // (wholly or partly) Active: the caller retries their Release, as a client
  // that got no answer would.
  std::vector<std::string> Settle(const pb::ListResponse& list) {
    std::vector<std::string> retry_release;
    std::lock_guard<std::mutex> l(mu_);
    std::map<std::string, std::vector<std::string>> active;  // rid -> uuids
    for (const pb::Instance& inst : list.instances()) {
      if (inst.state() != pb::INSTANCE_STATE_ACTIVE) continue;
      const std::string& rid = inst.request_id();
      if (inst.owner().opaque_id() != "o-" + rid) {
        ViolationLocked("Active " + inst.mig_uuid() + " of " + rid + " has owner \"" +
                        inst.owner().opaque_id() + "\"");
      }
      if (!held_.count(rid) && !pending_.count(rid)) {
        ViolationLocked("Active " + inst.mig_uuid() + " for request " + rid +
                        " that no client has in flight or holds");
      }
      active[rid].push_back(inst.mig_uuid());
    }
    // Acknowledged and not being released: must have survived, exactly.
    for (const auto& [rid, uuids] : std::map(held_)) {
      auto it = active.find(rid);
      std::set<std::string> want(uuids.begin(), uuids.end());
      std::set<std::string> got;
      if (it != active.end()) got.insert(it->second.begin(), it->second.end());
      if (releasing_.count(rid)) {
        // Release applies instance by instance: a kill in between may leave
        // a subset Active (never an instance that was not the allocation's).
        if (got.empty()) {
          DropLocked(rid);
          continue;
        }
        if (!std::includes(want.begin(), want.end(), got.begin(), got.end())) {
          ViolationLocked("interrupted release of " + rid + " left foreign MIG UUIDs Active");
        }
        ++counts_[got == want ? "release interrupted, not applied"
                              : "release interrupted, partly applied"];
        retry_release.push_back(rid);
        continue;
      }
      if (got != want) {
        ViolationLocked("acknowledged allocation " + rid + " lost MIG UUIDs after restart: had " +
                        ::testing::PrintToString(want) + ", List has " +
                        ::testing::PrintToString(got));
        DropLocked(rid);
      }
    }
    releasing_.clear();
    // In flight at the kill: adopted if migd committed it.
    for (const std::string& rid : pending_) {
      auto it = active.find(rid);
      if (it != active.end()) {
        AcquireLocked(rid, it->second);
        ++counts_["in-flight allocation committed"];
      } else {
        ++counts_["in-flight allocation lost (never acknowledged)"];
      }
    }
    pending_.clear();
    return retry_release;
  }

  std::vector<std::string> violations() const {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }
  std::map<std::string, int> counts() const {
    std::lock_guard<std::mutex> l(mu_);
    return counts_;
  }

  static int ClientOf(const std::string& rid) { return rid[1] - '0'; }  // "c<N>-..."

 private:
  void AcquireLocked(const std::string& rid, const std::vector<std::string>& uuids) {
    held_[rid] = uuids;
    for (const std::string& u : uuids) {
      auto [it, inserted] = holder_.emplace(u, rid);
      if (inserted || it->second == rid) continue;
      if (releasing_.count(it->second)) {
        // The holder's Release is in flight: migd may have made the instance
        // Idle and handed it out again before that client saw the answer.
        auto& old = held_[it->second];
        old.erase(std::remove(old.begin(), old.end(), u), old.end());
        it->second = rid;
        continue;
      }
      ViolationLocked("MIG UUID " + u + " handed to " + rid + " while held by " + it->second);
    }
  }
  void DropLocked(const std::string& rid) {
    auto it = held_.find(rid);
    if (it == held_.end()) return;
    for (const std::string& u : it->second) {
      auto h = holder_.find(u);
      if (h != holder_.end() && h->second == rid) holder_.erase(h);
    }
    held_.erase(it);
    releasing_.erase(rid);
  }
  void ViolationLocked(const std::string& what) {
    if (violations_.size() < 50) violations_.push_back(what);
  }

  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> held_;
  std::map<std::string, std::string> holder_;  // uuid -> rid
  std::set<std::string> pending_;
  std::set<std::string> releasing_;
  std::vector<std::string> violations_;
  std::map<std::string, int> counts_;
};

// One client thread's loop until `stop` or until migd stops answering.
void ClientLoop(int index, uint64_t seed, const std::string& socket, Ledger* ledger,
                std::atomic<bool>* stop, std::atomic<int>* serial) {
  std::mt19937_64 rng(seed);
  auto stub = NewStub(socket);
  while (!stop->load()) {
    const uint64_t r = rng() % 100;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (r < 45) {
      pb::AllocateRequest req;
      const std::string rid =
          "c" + std::to_string(index) + "-" + std::to_string(serial->fetch_add(1));
      req.set_request_id(rid);
      req.mutable_owner()->set_opaque_id("o-" + rid);
      const int n = rng() % 10 == 0 ? 2 : 1;
      for (int i = 0; i < n; ++i) {
        req.add_instances()->set_profile(Profiles()[rng() % Profiles().size()]);
      }
      pb::AllocateResponse resp;
      ledger->Sent(rid);
      const grpc::Status s = stub->Allocate(&ctx, req, &resp);
      if (s.ok()) {
        std::vector<std::string> uuids;
        for (const auto& a : resp.instances()) uuids.push_back(a.instance().mig_uuid());
        ledger->Acked(rid, uuids);
        ledger->Count("allocate OK");
      } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        return;  // migd died: the allocation stays in flight
      } else {
        // INVALID_ARGUMENT: a profile the chosen GPU lacks is impossible
        // (no gpu given), so only capacity or a busy engine may refuse.
        if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
            s.error_code() != grpc::StatusCode::ABORTED) {
          ledger->Violation("Allocate " + rid + ": " + std::to_string(s.error_code()) + " " +
                            s.error_message());
        }
        ledger->Refused(rid);
        ledger->Count("allocate refused");
      }
    } else if (r < 70) {
      const std::string rid = ledger->Pick(index, rng(), /*release=*/true);
      if (rid.empty()) continue;
      pb::ReleaseRequest req;
      req.set_request_id(rid);
      pb::ReleaseResponse resp;
      const grpc::Status s = stub->Release(&ctx, req, &resp);
      if (s.ok()) {
        ledger->Released(rid);
        ledger->Count("release OK");
      } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        return;
      } else {
        ledger->Violation("Release " + rid + ": " + s.error_message());
        ledger->Released(rid);
      }
    } else if (r < 82) {
      const std::string rid = ledger->Pick(index, rng(), /*release=*/false);
      if (rid.empty()) continue;
      const std::vector<std::string> uuids = ledger->UuidsOf(rid);
      // Replay needs the same specs; the profiles are in List, not in the
      // ledger, so replay single-instance allocations by asking List first.
      pb::ListResponse list;
      {
        grpc::ClientContext lctx;
        SetDeadline(&lctx);
        if (!stub->List(&lctx, pb::ListRequest(), &list).ok()) return;
      }
      pb::AllocateRequest req;
      req.set_request_id(rid);
      req.mutable_owner()->set_opaque_id("o-" + rid);
      for (const std::string& u : uuids) {
        for (const auto& inst : list.instances()) {
          if (inst.mig_uuid() == u) req.add_instances()->set_profile(inst.profile());
        }
      }
      if (req.instances_size() != static_cast<int>(uuids.size()) || uuids.size() != 1) continue;
      pb::AllocateResponse resp;
      const grpc::Status s = stub->Allocate(&ctx, req, &resp);
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return;
      if (!s.ok() || !resp.replayed() || resp.instances_size() != 1 ||
          resp.instances(0).instance().mig_uuid() != uuids[0]) {
        ledger->Violation("replay of " + rid + ": " + s.error_message() + " " +
                          resp.ShortDebugString());
      } else {
        ledger->Count("replay OK");
      }
    } else if (r < 90) {
      pb::ReclaimResponse resp;
      const grpc::Status s = stub->Reclaim(&ctx, pb::ReclaimRequest(), &resp);
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return;
      if (!s.ok()) {
        ledger->Violation("Reclaim: " + s.error_message());
        continue;
      }
      for (const auto& inst : resp.destroyed()) ledger->Destroyed(inst.mig_uuid(), "Reclaim");
      ledger->Count("reclaim OK");
    } else {
      pb::ListResponse resp;
      const grpc::Status s = stub->List(&ctx, pb::ListRequest(), &resp);
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return;
    }
  }
}

// The crash hooks an iteration may arm ("" = timer only): a simulator hook
// "<nvml function>=CRASH@N" / "=CRASH_AFTER@N" (MIGD_SIM_FAULTS), or one of
// migd's own crash points "migd:<point>@N" (MIGD_CRASH_POINTS,
// base/crash_point.h) inside a record or CDI spec write or removal.
std::string PickHook(std::mt19937_64& rng) {
  static const char* const kFns[] = {
      "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceCreateComputeInstance",
      "nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"};
  if (rng() % 3 == 0) return "";
  const size_t pick = rng() % (std::size(kFns) + kCrashPointNames.size());
  if (pick >= std::size(kFns)) {
    return "migd:" + std::string(kCrashPointNames[pick - std::size(kFns)]) + "@" +
           std::to_string(1 + rng() % 6);
  }
  const std::string fn = kFns[pick];
  const char* what = rng() % 2 == 0 ? "CRASH" : "CRASH_AFTER";
  return fn + "=" + what + "@" + std::to_string(1 + rng() % 4);
}

bool IsCrashPoint(const std::string& hook) { return hook.rfind("migd:", 0) == 0; }

// Arms `hook` in the environment of the next migd.
void ArmHook(const std::string& hook, std::map<std::string, std::string>& env) {
  env["MIGD_SIM_FAULTS"] = IsCrashPoint(hook) ? "" : hook;
  env["MIGD_CRASH_POINTS"] = IsCrashPoint(hook) ? hook.substr(5) : "";
}

// "CRASH_AFTER in nvmlGpuInstanceDestroy", "CRASH in record.write.before_rename".
std::string HookKill(const std::string& hook) {
  if (IsCrashPoint(hook)) return "CRASH in " + hook.substr(5, hook.find('@') - 5);
  return hook.substr(hook.find('=') + 1, hook.find('@') - hook.find('=') - 1) + " in " +
         hook.substr(0, hook.find('='));
}

// The function or point a hook names.
std::string HookSite(const std::string& hook) {
  if (IsCrashPoint(hook)) return hook.substr(5, hook.find('@') - 5);
  return hook.substr(0, hook.find('='));
}

class CrashCampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("sim/proc"));
    std::filesystem::create_directories(dir_.Join("cdi"));
    options_.args = {"--simulate",     kSimGpus,           "--socket",
                     socket(),         "--state-dir",      dir_.Join("state"),
                     "--cdi-spec-dir", dir_.Join("cdi"),   "--metrics-listen",
                     ""};
    options_.env = {{"MIGD_SIM_STATE", dir_.Join("sim/state.json")},
                    {"MIGD_SIM_PROC_ROOT", dir_.Join("sim/proc")},
                    // Writes stay atomic against SIGKILL without fsync.
                    {"MIGD_SIM_FSYNC", "0"},
                    {"MIGD_SIM_FAULTS", ""},
                    {"MIGD_CRASH_POINTS", ""}};
    options_.socket_path = socket();
  }
  std::string socket() const { return dir_.Join("api.socket"); }

  // Checks 1, 3 and 4 (List side) and returns List for the ledger (2).
  pb::ListResponse CheckAtRest(const std::string& where) {
    SCOPED_TRACE(where);
    auto stub = NewStub(socket());
    pb::ListResponse list;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    const grpc::Status s = stub->List(&ctx, pb::ListRequest(), &list);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return list;

    // 1. Live layout vs List.
    std::ifstream in(dir_.Join("sim/state.json"));
    const nlohmann::json state = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(state.is_discarded()) << "sim state unreadable";
    std::set<std::string> live, listed, foreign, uuids;
    if (!state.is_discarded()) {
      for (const auto& gpu : state.at("gpus")) {
        for (const auto& gi : gpu.at("gpuInstances")) {
          std::string key = std::to_string(gpu.at("index").get<int>()) + "/gi" +
                            gi.at("id").dump() + "@" + gi.at("placement").at("start").dump() + "+" +
                            gi.at("placement").at("size").dump();
          const auto& cis = gi.at("computeInstances");
          key += cis.size() == 1 ? " " + cis[0].at("uuid").get<std::string>()
                                 : " cis=" + std::to_string(cis.size());
          live.insert(key);
        }
      }
    }
    for (const pb::ForeignInstance& f : list.foreign()) {
      foreign.insert(std::to_string(f.gpu_index()) + "/gi" + std::to_string(f.gi_id()));
    }
    const cdi::Kind kind;
    std::set<std::string> want_cdi;
    for (const pb::Instance& inst : list.instances()) {
      listed.insert(std::to_string(inst.gpu_index()) + "/gi" + std::to_string(inst.gi_id()) + "@" +
                    std::to_string(inst.placement().start()) + "+" +
                    std::to_string(inst.placement().size()) + " " + inst.mig_uuid());
      EXPECT_TRUE(uuids.insert(inst.mig_uuid()).second)
          << "MIG UUID listed twice: " << inst.mig_uuid();
      EXPECT_TRUE(inst.state() == pb::INSTANCE_STATE_ACTIVE ||
                  inst.state() == pb::INSTANCE_STATE_IDLE)
          << "not at rest after recovery: " << inst.ShortDebugString();
      want_cdi.insert(cdi::SpecFileName(kind, inst.mig_uuid()));
    }
    for (const std::string& l : live) {
      if (listed.count(l)) continue;
      const std::string gi = l.substr(0, l.find('@'));
      EXPECT_TRUE(foreign.count(gi)) << "live GI neither tracked nor foreign: " << l;
      ++foreign_seen_;
    }
    for (const std::string& l : listed) {
      EXPECT_TRUE(live.count(l)) << "List instance not live: " << l;
    }

    // 3. CDI spec files and records.
    std::set<std::string> cdi_files;
    for (const auto& e : std::filesystem::directory_iterator(dir_.Join("cdi"))) {
      cdi_files.insert(e.path().filename().string());
    }
    EXPECT_EQ(cdi_files, want_cdi) << "CDI spec files differ from List";
    auto store = store::RecordStore::Open(dir_.Join("state"), Clock::Real());
    EXPECT_TRUE(store.ok()) << store.status();
    if (store.ok()) {
      auto loaded = (*store)->LoadAll();
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      if (loaded.ok()) {
        for (const auto& p : loaded->problems) ADD_FAILURE() << "record problem: " << p.ToString();
        std::map<std::string, const pb::Instance*> by_uuid;
        for (const pb::Instance& inst : list.instances()) by_uuid[inst.mig_uuid()] = &inst;
        EXPECT_EQ(loaded->records.size(), static_cast<size_t>(list.instances_size()));
        for (const store::Record& r : loaded->records) {
          EXPECT_EQ(r.phase, store::RecordPhase::kCommitted) << "intent after recovery: " << r.key;
          auto it = by_uuid.find(r.mig_uuid ? r.mig_uuid->value() : "");
          if (it == by_uuid.end()) {
            ADD_FAILURE() << "record without List instance: " << r.key;
            continue;
          }
          EXPECT_EQ(r.gi_id.value_or(NvmlGiId(999)).value(), it->second->gi_id()) << r.key;
          EXPECT_EQ(r.request_id, it->second->request_id()) << r.key;
          EXPECT_EQ(r.owner.opaque_id, it->second->owner().opaque_id()) << r.key;
        }
      }
    }
    return list;
  }

  // A retried Release must complete what the kill interrupted.
  // Retries the Releases Settle returned, as clients that got no answer
  // would. Returns false if migd died meanwhile (only a crash point armed for
  // this run may do that: retried releases write records); the Releases not
  // answered stay uncertain for the next Settle.
  bool RetryReleases(const std::vector<std::string>& rids, Ledger& ledger,
                     DaemonProcess* daemon, const std::string& hook) {
    for (const std::string& rid : rids) ledger.Releasing(rid);
    auto stub = NewStub(socket());
    for (const std::string& rid : rids) {
      pb::ReleaseRequest req;
      req.set_request_id(rid);
      pb::ReleaseResponse resp;
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      const grpc::Status s = stub->Release(&ctx, req, &resp);
      if (!s.ok() && daemon != nullptr && IsCrashPoint(hook) &&
          s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        const testing::DaemonExit exit = daemon->WaitForExit();
        EXPECT_EQ(exit.exit_code, 128 + SIGKILL) << "retried Release of " << rid << ": "
                                                 << s.error_message() << "\n" << Tail(exit.err);
        return false;
      }
      EXPECT_TRUE(s.ok()) << "retried Release of " << rid << ": " << s.error_message();
      ledger.Released(rid);
      ledger.Count("release retried after restart");
    }
    return true;
  }

  TempDir dir_;
  DaemonOptions options_;
  int foreign_seen_ = 0;
};

TEST_F(CrashCampaignTest, SurvivesSigkillUnderLoad) {
  const uint64_t iterations = EnvU64("MIGD_CRASH_ITERATIONS", 15);
  const uint64_t seed = EnvU64("MIGD_CRASH_SEED", 20261129);
  std::cout << "crash campaign: iterations=" << iterations << " seed=" << seed << std::endl;
  std::mt19937_64 rng(seed);
  Ledger ledger;
  std::atomic<int> serial{0};
  std::map<std::string, int> deaths;
  uint64_t kills = 0;     // deaths so far
  uint64_t survived = 0;  // deaths followed by a restart that passed every check
  std::string hook = "";  // the first start carries no hook

  for (uint64_t it = 0; it < iterations && !HasFailure(); ++it) {
    const std::string where = "iteration " + std::to_string(it) + " hook \"" + hook + "\"";
    ArmHook(hook, options_.env);
    auto started = DaemonProcess::Start(options_, dir_.path());
    if (!started.ok()) {
      // Only a crash hook inside recovery may stop a start.
      ASSERT_FALSE(hook.empty()) << where << ": " << started.status();
      ASSERT_NE(started.status().message().find("with code 137 "), std::string::npos)
          << where << ": migd failed to start: " << started.status();
      ++deaths["died in recovery (" + HookSite(hook) + ")"];
      ++kills;
      hook = PickHook(rng);
      continue;
    }
    std::unique_ptr<DaemonProcess> daemon = std::move(*started);
    const bool alive = RetryReleases(ledger.Settle(CheckAtRest(where)), ledger, daemon.get(), hook);
    ASSERT_FALSE(HasFailure()) << where << "\n" << Tail(daemon->Stderr());
    {
      const auto v = ledger.violations();
      ASSERT_TRUE(v.empty()) << where << ": " << ::testing::PrintToString(v) << "\n"
                             << Tail(daemon->Stderr());
    }
    survived = kills;
    if (!alive) {
      // The armed crash point fired in a retried Release: this run's kill.
      ++deaths[HookKill(hook) + " (retried release)"];
      ++kills;
      hook = PickHook(rng);
      continue;
    }

    // Load, then the kill.
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back(ClientLoop, c, rng(), socket(), &ledger, &stop, &serial);
    }
    const auto delay = std::chrono::milliseconds(
        hook.empty() ? 20 + rng() % 1500 : 8000);
    const auto deadline = std::chrono::steady_clock::now() + delay;
    while (daemon->Running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string how;
    if (daemon->Running()) {
      daemon->Signal(SIGKILL);
      how = hook.empty() ? "timer" : "hook-timeout";
    } else {
      how = HookKill(hook);
    }
    const testing::DaemonExit exit = daemon->WaitForExit();
    stop = true;
    for (std::thread& t : clients) t.join();
    ASSERT_EQ(exit.exit_code, 128 + SIGKILL) << where << "\n" << Tail(exit.err);
    ++deaths[how];
    ++kills;
    hook = PickHook(rng);
  }

  // The last restart, checked, then a clean stop.
  if (!HasFailure()) {
    ArmHook("", options_.env);
    MIGD_ASSERT_OK_AND_ASSIGN(auto daemon, DaemonProcess::Start(options_, dir_.path()));
    RetryReleases(ledger.Settle(CheckAtRest("final restart")), ledger, nullptr, "");
    if (!HasFailure() && ledger.violations().empty()) survived = kills;
    EXPECT_EQ(daemon->Stop().exit_code, 0);
  }
  const auto v = ledger.violations();
  EXPECT_TRUE(v.empty()) << ::testing::PrintToString(v);

  std::cout << "kills by kind:\n";
  for (const auto& [k, n] : deaths) std::cout << "  " << k << ": " << n << "\n";
  std::cout << "client operations:\n";
  for (const auto& [k, n] : ledger.counts()) std::cout << "  " << k << ": " << n << "\n";
  std::cout << "foreign GIs seen after restarts: " << foreign_seen_ << "\n";
  std::cout << "survived " << survived << "/" << kills
            << " (seed " << seed << ")" << std::endl;
}

// The checks must be able to fail: the ledger flags a lost acknowledged
// allocation, a UUID handed to two owners, an Active instance nobody sent,
// and a half-applied interrupted release is retried, not flagged.
TEST(CrashLedgerTest, FlagsViolations) {
  {
    Ledger ledger;
    ledger.Sent("c0-1");
    ledger.Acked("c0-1", {"MIG-a"});
    ledger.Settle(pb::ListResponse());  // MIG-a gone after the restart
    ASSERT_EQ(ledger.violations().size(), 1u);
    EXPECT_NE(ledger.violations()[0].find("lost MIG UUIDs"), std::string::npos);
  }
  {
    Ledger ledger;
    ledger.Acked("c0-1", {"MIG-a"});
    ledger.Acked("c1-2", {"MIG-a"});
    ASSERT_EQ(ledger.violations().size(), 1u);
    EXPECT_NE(ledger.violations()[0].find("handed to c1-2 while held by c0-1"), std::string::npos);
  }
  {
    // Handed out again while its Release is in flight: not a violation.
    Ledger ledger;
    ledger.Acked("c0-1", {"MIG-a"});
    ASSERT_EQ(ledger.Pick(0, 0, /*release=*/true), "c0-1");
    ledger.Acked("c1-2", {"MIG-a"});
    ledger.Released("c0-1");
    EXPECT_TRUE(ledger.violations().empty()) << ::testing::PrintToString(ledger.violations());
    EXPECT_EQ(ledger.UuidsOf("c1-2"), std::vector<std::string>{"MIG-a"});
  }
  {
    Ledger ledger;
    pb::ListResponse list;
    pb::Instance* inst = list.add_instances();
    inst->set_mig_uuid("MIG-x");
    inst->set_state(pb::INSTANCE_STATE_ACTIVE);
    inst->set_request_id("c2-9");
    inst->mutable_owner()->set_opaque_id("o-c2-9");
    ledger.Settle(list);
    ASSERT_EQ(ledger.violations().size(), 1u);
    EXPECT_NE(ledger.violations()[0].find("no client has in flight"), std::string::npos);
  }
  {
    Ledger ledger;
    ledger.Acked("c0-1", {"MIG-a", "MIG-b"});
    ASSERT_EQ(ledger.Pick(0, 0, /*release=*/true), "c0-1");
    pb::ListResponse list;
    pb::Instance* inst = list.add_instances();
    inst->set_mig_uuid("MIG-b");
    inst->set_state(pb::INSTANCE_STATE_ACTIVE);
    inst->set_request_id("c0-1");
    inst->mutable_owner()->set_opaque_id("o-c0-1");
    EXPECT_EQ(ledger.Settle(list), std::vector<std::string>{"c0-1"});
    EXPECT_TRUE(ledger.violations().empty()) << ::testing::PrintToString(ledger.violations());
  }
}

// CheckAtRest must notice a CDI spec file, a record or a live GI that
// disagrees with List (here: a stray spec file after a clean start).
TEST_F(CrashCampaignTest, CheckAtRestCatchesStrayCdiSpec) {
  MIGD_ASSERT_OK_AND_ASSIGN(auto daemon, DaemonProcess::Start(options_, dir_.path()));
  std::ofstream(dir_.Join("cdi/hami.io-mig_MIG-00000000-0000-5000-8000-000000000000.json")) << "{}";
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    CheckAtRest("stray spec");
  }
  ASSERT_EQ(failures.size(), 1);
  EXPECT_NE(std::string(failures.GetTestPartResult(0).message()).find("CDI spec files differ"),
            std::string::npos)
      << failures.GetTestPartResult(0).message();
  daemon->Signal(SIGKILL);
  daemon->WaitForExit();
}

}  // namespace
}  // namespace migd
