// engine_crash_child: the workload crash_test.cc kills. Recovers a Manager
// on libnvidia-ml-sim.so (the state of the simulated machine and the record
// dir come from the parent's environment), signals readiness, then
// allocates, releases and reclaims at random until killed or done, logging
// each allocation it saw succeed ("A <request> <MIG UUID>") and each release
// it started ("R <request>") to the oplog, one write(2) per line.
//
// Environment: MIGD_ENGINE_STATE_DIR, MIGD_ENGINE_OPLOG, MIGD_ENGINE_SEED,
// MIGD_ENGINE_OPS (0: a million), MIGD_ENGINE_READY_FD (optional: a pipe's
// write end, written one byte once recovery is done), and the simulator's
// MIGD_SIM_* variables.
// Exit status: 0 when the workload finished, 1 when setup failed.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "driver/nvml/nvml_driver.h"
#include "engine/manager.h"
#include "engine/manager_testing.h"

namespace migd::engine {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

void AppendLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  // One write(2) per line on an O_APPEND fd: a SIGKILL leaves whole lines.
  ssize_t n = ::write(fd, s.data(), s.size());
  (void)n;
}

AllocateRequest RandomRequest(std::mt19937& rng, const std::string& id) {
  static const std::vector<std::string> kProfiles = {"1g.5gb", "2g.10gb", "3g.20gb", "1g.5gb",
                                                     "4g.20gb"};
  AllocateRequest req;
  req.request_id = id;
  req.owner = store::Owner::Opaque("job-" + id);
  InstanceSpec spec;
  spec.profile = kProfiles[rng() % kProfiles.size()];
  if (rng() % 3 == 0) {
    spec.gpu = GpuIndex(static_cast<uint32_t>(rng() % 2));
    if (spec.profile == "1g.5gb")
      spec.placement = mig::Placement{static_cast<uint32_t>(rng() % 7), 1};
    if (spec.profile == "3g.20gb") {
      spec.placement = mig::Placement{static_cast<uint32_t>((rng() % 2) * 4), 4};
    }
  }
  req.instances.push_back(spec);
  return req;
}

void RunWorkload(Manager& mgr, int fd) {
  std::mt19937 rng(static_cast<uint32_t>(std::atoi(Env("MIGD_ENGINE_SEED"))));
  const int ops =
      std::atoi(Env("MIGD_ENGINE_OPS")) > 0 ? std::atoi(Env("MIGD_ENGINE_OPS")) : 1000000;
  std::vector<std::string> held;
  for (const auto& v : mgr.List().instances) {
    if (v.state == InstanceState::kActive) held.push_back(v.request_id);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  for (int i = 0; i < ops; ++i) {
    const uint32_t dice = rng() % 10;
    if (dice < 4 && !held.empty()) {
      const size_t pick = rng() % held.size();
      AppendLine(fd, "R " + held[pick]);
      Status s = mgr.Release(held[pick]);
      (void)s;
      held.erase(held.begin() + static_cast<long>(pick));
    } else if (dice == 4) {
      auto r = mgr.Reclaim({});
      (void)r;
    } else {
      const std::string id = "c" + std::string(Env("MIGD_ENGINE_SEED")) + "-" + std::to_string(i);
      auto a = mgr.Allocate(RandomRequest(rng, id));
      if (a.ok()) {
        AppendLine(fd, "A " + id + " " + a->instances[0].mig_uuid.value());
        held.push_back(id);
      }
    }
  }
}

int Main() {
  FakeClock clock;
  auto driver = driver::NvmlDriver::Open(MIGD_SIM_LIBRARY);
  if (!driver.ok()) {
    std::cerr << "engine_crash_child: " << driver.status() << "\n";
    return 1;
  }
  auto store = testing::OpenStore(Env("MIGD_ENGINE_STATE_DIR"), clock, testing::kBootId,
                                  /*sync=*/false);
  if (!store.ok()) {
    std::cerr << "engine_crash_child: " << store.status() << "\n";
    return 1;
  }
  RecordsOwnerSource owners;
  ManagerOptions opts;
  opts.boot_id = testing::kBootId;
  auto mgr = Manager::Create(opts, **driver, **store, clock, owners);
  if (!mgr.ok()) {
    std::cerr << "engine_crash_child: recovery: " << mgr.status() << "\n";
    return 1;
  }
  const int fd = ::open(Env("MIGD_ENGINE_OPLOG"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::cerr << "engine_crash_child: cannot open the oplog\n";
    return 1;
  }
  // Recovery is done: the parent may kill from now on.
  if (Env("MIGD_ENGINE_READY_FD")[0] != '\0') {
    const int ready = std::atoi(Env("MIGD_ENGINE_READY_FD"));
    ssize_t n = ::write(ready, "r", 1);
    (void)n;
    ::close(ready);
  }
  RunWorkload(**mgr, fd);
  ::close(fd);
  return 0;
}

}  // namespace
}  // namespace migd::engine

int main() { return migd::engine::Main(); }
