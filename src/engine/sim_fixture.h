// Shared fixture pieces for the tests that run engine::Manager over the
// production NvmlDriver and libnvidia-ml-sim.so.
#ifndef MIGD_ENGINE_SIM_FIXTURE_H_
#define MIGD_ENGINE_SIM_FIXTURE_H_

#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "driver/nvml/nvml_driver.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "engine/engine_test_util.h"
#include "engine/manager.h"
#include "store/file_ops.h"
#include "store/record_store.h"
#include "testing/temp_dir.h"

namespace migd::engine::testing {

inline constexpr char kSimBoot[] = "sim-boot";

// Total of a call-count map.
inline uint64_t Total(const driver::sim_testing::CallCounts& c) {
  uint64_t n = 0;
  for (const auto& [k, v] : c) n += v;
  return n;
}

inline std::string Describe(const driver::sim_testing::CallCounts& c) {
  std::string s;
  for (const auto& [k, v] : c) s += k.first + "/" + k.second + "=" + std::to_string(v) + " ";
  return s;
}

// Record writes without fsync: still atomic against kill -9 (what the crash
// test exercises), not against power loss; as MIGD_SIM_FSYNC=0 for the sim.
class NoSyncFileOps final : public store::FileOps {
 public:
  Status WriteFileAtomically(const std::string& path, std::string_view data,
                             const AtomicWriteOptions& options) override {
    AtomicWriteOptions o = options;
    o.sync = false;
    return store::FileOps::WriteFileAtomically(path, data, o);
  }
  Status SyncDirectory(const std::string&) override { return OkStatus(); }
};

inline StatusOr<std::unique_ptr<store::RecordStore>> OpenSimStore(const std::string& dir,
                                                                 Clock& clock,
                                                                 bool sync = true) {
  static NoSyncFileOps no_sync;
  store::RecordStoreOptions so;
  so.boot_id = kSimBoot;
  if (!sync) so.file_ops = &no_sync;
  return store::RecordStore::Open(dir, clock, so);
}

}  // namespace migd::engine::testing

#endif  // MIGD_ENGINE_SIM_FIXTURE_H_
