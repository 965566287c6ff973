#include "bench/latency/harness.h"

#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/status_macros.h"

namespace migd::bench::latency {

namespace {
constexpr char kBootId[] = "bench-boot";
}  // namespace

CallCounts ToCounts(const std::vector<driver::NvmlCallCount>& rows) {
  CallCounts c;
  for (const auto& r : rows) c[{r.function, r.result}] += r.count;
  return c;
}

CallCounts Delta(const CallCounts& before, const CallCounts& after) {
  CallCounts d;
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    const uint64_t b = it == before.end() ? 0 : it->second;
    if (v > b) d[k] = v - b;
  }
  return d;
}

uint64_t Total(const CallCounts& c) {
  uint64_t n = 0;
  for (const auto& [k, v] : c) n += v;
  return n;
}

uint64_t Calls(const CallCounts& c, const std::string& function) {
  uint64_t n = 0;
  for (const auto& [k, v] : c) {
    if (k.first == function) n += v;
  }
  return n;
}

HwOps HwOpsOf(const CallCounts& c) {
  auto ok = [&](const char* f) {
    auto it = c.find({f, "SUCCESS"});
    return it == c.end() ? uint64_t{0} : it->second;
  };
  HwOps h;
  h.gi_creates = ok("nvmlDeviceCreateGpuInstanceWithPlacement") + ok("nvmlDeviceCreateGpuInstance");
  h.ci_creates = ok("nvmlGpuInstanceCreateComputeInstance") +
                 ok("nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  h.gi_destroys = ok("nvmlGpuInstanceDestroy");
  h.ci_destroys = ok("nvmlComputeInstanceDestroy");
  return h;
}

Status CountingFileOps::WriteFileAtomically(const std::string& path, std::string_view data,
                                            const AtomicWriteOptions& options) {
  ++writes_;
  AtomicWriteOptions o = options;
  if (o.sync) fsyncs_ += 2;  // the file, then its directory (base/file_util.h)
  if (!sync_) o.sync = false;
  return store::FileOps::WriteFileAtomically(path, data, o);
}

Status CountingFileOps::RemoveFile(const std::string& path) {
  ++removes_;
  return store::FileOps::RemoveFile(path);
}

Status CountingFileOps::SyncDirectory(const std::string& dir) {
  ++fsyncs_;
  if (!sync_) return OkStatus();
  return store::FileOps::SyncDirectory(dir);
}

CountingFileOps::Counts CountingFileOps::counts() const {
  return Counts{writes_.load(), fsyncs_.load(), removes_.load()};
}

SimEnv::SimEnv(const std::string& base_dir, const std::string& gpus, const LatencyModel& model) {
  std::filesystem::create_directories(base_dir);
  std::string tmpl = base_dir + "/migd-latency-XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  for (const char* v : {"MIGD_SIM_FAULTS", "MIGD_SIM_GI_IDS", "MIGD_SIM_PROC_ROOT",
                        "MIGD_SIM_PROFILE_INFO_MAX_VERSION"}) {
    unsetenv(v);
  }
  setenv("MIGD_SIM_STATE", (dir_ + "/sim/state.json").c_str(), 1);
  setenv("MIGD_SIM_GPUS", gpus.c_str(), 1);
  setenv("MIGD_SIM_FSYNC", "0", 1);
  setenv("MIGD_SIM_NONCE", "1", 1);
  SetLatency(model);
}

SimEnv::~SimEnv() {
  for (const char* v : {"MIGD_SIM_STATE", "MIGD_SIM_GPUS", "MIGD_SIM_FSYNC", "MIGD_SIM_NONCE",
                        "MIGD_SIM_LATENCY_MS"}) {
    unsetenv(v);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void SimEnv::SetLatency(const LatencyModel& model) {
  const std::string v = model.EnvValue();
  if (v.empty()) {
    unsetenv("MIGD_SIM_LATENCY_MS");
  } else {
    setenv("MIGD_SIM_LATENCY_MS", v.c_str(), 1);
  }
}

StatusOr<std::unique_ptr<Rig>> Rig::Open(RigOptions options) {
  std::unique_ptr<Rig> rig(new Rig());
  rig->options_ = std::move(options);
  rig->options_.manager.boot_id = kBootId;
  const std::string sim_dir =
      rig->options_.sim_dir.empty() ? rig->options_.base_dir : rig->options_.sim_dir;
  rig->env_ = std::make_unique<SimEnv>(sim_dir, rig->options_.gpus, rig->options_.latency);
  if (rig->env_->dir().empty()) return InternalError("mkdtemp under " + sim_dir);
  std::string tmpl = rig->options_.base_dir + "/migd-records-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return InternalError("mkdtemp under " + rig->options_.base_dir);
  }
  rig->records_root_ = tmpl;
  rig->file_ops_ = std::make_unique<CountingFileOps>(rig->options_.store_sync);
  MIGD_RETURN_IF_ERROR(rig->OpenAll());
  return rig;
}

Rig::~Rig() {
  mgr_.reset();
  store_.reset();
  driver_.reset();
  std::error_code ec;
  if (!records_root_.empty()) std::filesystem::remove_all(records_root_, ec);
}

Status Rig::OpenAll() {
  MIGD_ASSIGN_OR_RETURN(driver_, driver::NvmlDriver::Open(options_.library));
  store::RecordStoreOptions so;
  so.boot_id = kBootId;
  so.file_ops = file_ops_.get();
  MIGD_ASSIGN_OR_RETURN(store_,
                        store::RecordStore::Open(records_root_ + "/records", EngineClock(), so));
  MIGD_ASSIGN_OR_RETURN(
      mgr_, engine::Manager::Create(options_.manager, *driver_, *store_, EngineClock(), owners_));
  return OkStatus();
}

StatusOr<std::chrono::nanoseconds> Rig::RestartManager() {
  mgr_.reset();
  store_.reset();
  Stopwatch sw;
  store::RecordStoreOptions so;
  so.boot_id = kBootId;
  so.file_ops = file_ops_.get();
  MIGD_ASSIGN_OR_RETURN(store_,
                        store::RecordStore::Open(records_root_ + "/records", EngineClock(), so));
  MIGD_ASSIGN_OR_RETURN(
      mgr_, engine::Manager::Create(options_.manager, *driver_, *store_, EngineClock(), owners_));
  return sw.Elapsed();
}

Status Rig::Reopen(const LatencyModel& model) {
  mgr_.reset();
  store_.reset();
  driver_.reset();
  env_->SetLatency(model);
  options_.latency = model;
  return OpenAll();
}

engine::AllocateRequest OneInstance(const std::string& id, const std::string& profile,
                                    std::optional<uint32_t> gpu,
                                    std::optional<mig::Placement> placement) {
  engine::AllocateRequest r;
  r.request_id = id;
  r.owner = store::Owner::Opaque("bench-" + id);
  engine::InstanceSpec s;
  s.profile = profile;
  if (gpu) s.gpu = GpuIndex(*gpu);
  s.placement = placement;
  r.instances.push_back(std::move(s));
  return r;
}

Summary Summarize(std::vector<double> ms) {
  Summary s;
  s.n = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / static_cast<double>(ms.size());
  // Nearest-rank percentiles.
  auto rank = [&](double q) {
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(ms.size())));
    return ms[std::min(ms.size() - 1, k == 0 ? 0 : k - 1)];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = ms.back();
  return s;
}

ProcUsage SelfUsage() {
  ProcUsage u;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream in(line.substr(6));
      in >> u.rss_kb;
    }
  }
  std::ifstream stat("/proc/self/stat");
  std::string all;
  std::getline(stat, all);
  // Fields after the ")" that ends the command name: utime is field 14,
  // stime 15 (1-based, man 5 proc), i.e. the 12th and 13th after ")".
  const size_t close = all.rfind(')');
  if (close != std::string::npos) {
    std::istringstream in(all.substr(close + 2));
    std::string f;
    uint64_t utime = 0, stime = 0;
    for (int i = 1; i <= 13 && in >> f; ++i) {
      if (i == 12) utime = std::stoull(f);
      if (i == 13) stime = std::stoull(f);
    }
    u.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return u;
}

uint64_t HeapInUse() { return mallinfo2().uordblks; }

}  // namespace migd::bench::latency
