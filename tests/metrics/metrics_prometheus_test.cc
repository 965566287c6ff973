// /metrics against the real Prometheus tools:
//   * `promtool check metrics` (lint warnings included) on a populated
//     registry plus the migd collector over a Manager on the in-process
//     simulator;
//   * a real Prometheus server on loopback scraping MetricsHttpServer: the
//     target is "up" and migd_build_info reads 1, and a label value with
//     quotes, backslashes and a newline comes back unchanged (escaping as the
//     real parser reads it).
// The tools come from Debian's `prometheus` package, which `make test`
// installs (scripts/install-deps.sh metrics-check); without it the tests fail
// saying so.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status_macros.h"
#include "cdi/host_reader.h"
#include "cdi/publisher.h"
#include "engine/manager.h"
#include "engine/owner_source.h"
#include "metrics/http_server.h"
#include "metrics/migd_collector.h"
#include "metrics/registry.h"
#include "planner/solve_executor.h"
#include "planner/value_service.h"
#include "sim/fake_gpu_driver.h"
#include "store/record_store.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::metrics {
namespace {

using ::testing::HasSubstr;

constexpr char kBoot[] = "boot-1";
constexpr char kTricky[] = "a \"quoted\" \\ back\nslash";

bool Executable(const char* path) { return ::access(path, X_OK) == 0; }

constexpr char kInstallPrometheus[] =
    MIGD_PROMTOOL " and " MIGD_PROMETHEUS " come from Debian's prometheus package: run "
    "scripts/install-deps.sh metrics-check (make test does)";

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
}

// A registry holding every migd family with samples in most of them: a
// Manager on a simulated A100 + H100 with Active, Idle and pod-owned
// instances, listener events, injected NVML counts, CDI operations, the
// planner's value service after one solve, plus a test family with a label
// value that needs escaping.
class PopulatedRegistry {
 public:
  Status Init(const std::string& dir) {
    MigdMetricsOptions o;
    o.version = "0.6.0-test";
    o.revision = "deadbeef";
    o.driver = "simulated";
    o.node_name = "node-a";
    o.nvml_call_counts = [] {
      return std::vector<driver::NvmlCallCount>{
          {"nvmlInit_v2", "SUCCESS", 1},
          {"nvmlDeviceCreateGpuInstanceWithPlacement", "SUCCESS", 3},
          {"nvmlDeviceCreateGpuInstanceWithPlacement", "ERROR_INSUFFICIENT_RESOURCES", 1}};
    };
    o.nvml_sessions_opened = [] { return uint64_t{1}; };
    cdi::Options co;
    co.spec_dir = dir + "/cdi";
    co.sync = false;
    publisher_ = std::make_unique<cdi::Publisher>(co, &reader_);
    o.publisher = publisher_.get();
    planner::ValueOptions vo;
    vo.min_arrivals = 1;
    auto executor = std::make_unique<planner::ManualExecutor>();
    executor_ = executor.get();
    values_ = std::make_shared<planner::ValueService>(vo, std::move(executor));
    o.values = values_;
    MIGD_ASSIGN_OR_RETURN(metrics_, MigdMetrics::Create(&registry_, o));

    MIGD_ASSIGN_OR_RETURN(fake_, sim::FakeGpuDriver::Create("a100-40gb:1,h100-80gb:1", {}, 7));
    store::RecordStoreOptions so;
    so.boot_id = kBoot;
    MIGD_ASSIGN_OR_RETURN(store_, store::RecordStore::Open(dir + "/state", clock_, so));
    engine::ManagerOptions opts;
    opts.boot_id = kBoot;
    opts.listener = metrics_.get();
    opts.values = values_;
    MIGD_ASSIGN_OR_RETURN(mgr_, engine::Manager::Create(opts, *fake_, *store_, clock_, owners_));
    metrics_->AttachManager(mgr_.get());

    auto req = [](const std::string& id, const std::string& profile, bool pod) {
      engine::AllocateRequest r;
      r.request_id = id;
      r.owner = pod ? store::Owner::Pod("ns", "pod-" + id, PodUid("uid-" + id), "c")
                    : store::Owner::Opaque(id);
      engine::InstanceSpec s;
      s.profile = profile;
      r.instances.push_back(s);
      return r;
    };
    MIGD_RETURN_IF_ERROR(mgr_->Allocate(req("p1", "3g.20gb", true)).status());
    MIGD_RETURN_IF_ERROR(mgr_->Allocate(req("o1", "1g.5gb", false)).status());
    MIGD_RETURN_IF_ERROR(mgr_->Allocate(req("o2", "1g.10gb", false)).status());
    MIGD_RETURN_IF_ERROR(mgr_->Release("o1"));
    (void)mgr_->Allocate(req("big", "7g.40gb", false));  // fails: RESOURCE_EXHAUSTED
    MIGD_RETURN_IF_ERROR(mgr_->ReconcileOnce().status());
    executor_->RunPending();
    (void)publisher_->writer().Remove("MIG-00000000-0000-0000-0000-000000000000");

    MIGD_ASSIGN_OR_RETURN(GaugeFamily * tricky,
                          registry_.AddGauge("migd_test_escape_info",
                                             "Label escaping check: \\ and\nnewline.", {"value"}));
    tricky->WithLabels({kTricky}).Set(1);
    return OkStatus();
  }
  ~PopulatedRegistry() {
    if (metrics_) metrics_->AttachManager(nullptr);
    mgr_.reset();
  }
  Registry& registry() { return registry_; }

 private:
  Registry registry_;
  cdi::OsHostReader reader_;
  std::unique_ptr<cdi::Publisher> publisher_;
  planner::ManualExecutor* executor_ = nullptr;
  std::shared_ptr<planner::ValueService> values_;
  std::unique_ptr<MigdMetrics> metrics_;
  FakeClock clock_;
  std::unique_ptr<sim::FakeGpuDriver> fake_;
  std::unique_ptr<store::RecordStore> store_;
  engine::RecordsOwnerSource owners_;
  std::unique_ptr<engine::Manager> mgr_;
};

TEST(PromtoolTest, CheckMetricsReportsNoProblem) {
  ASSERT_TRUE(Executable(MIGD_PROMTOOL)) << kInstallPrometheus;
  migd::testing::TempDir dir;
  PopulatedRegistry populated;
  ASSERT_THAT(populated.Init(dir.path()), migd::testing::IsOk());
  const std::string text = populated.registry().Expose();
  // The families that must have samples here.
  for (const char* series :
       {"migd_allocations_total{result=\"ok\",path=\"create\"} 3",
        "migd_allocations_total{result=\"resource_exhausted\",path=\"none\"} 1",
        "migd_allocation_duration_seconds_count{path=\"create\"} 3",
        "migd_instances{gpu=\"0\",profile=\"3g.20gb\",state=\"active\"} 1",
        "migd_gpu_free_slices{gpu=\"1\"}", "migd_gpu_fragmentation{gpu=\"0\"}",
        "migd_nvml_sessions_opened_total 1", "migd_cdi_operations_total{kind=\"remove\"",
        "migd_cdi_pending_removals 0", "migd_reconcile_runs_total 1", "hami_mig_device_info{",
        "hami_node_gpu_mig_instance_info{", "migd_build_info{",
        "migd_planner_value_solves_total ", "migd_planner_value_table_version ",
        "migd_planner_value_last_solve_seconds ", "migd_planner_value_max_table_bytes ",
        "migd_planner_value_arrivals_total 4"}) {
    EXPECT_THAT(text, HasSubstr(series));
  }
  const std::string file = dir.Join("metrics.txt");
  WriteFile(file, text);
  migd::testing::CommandResult r = migd::testing::RunCommand(
      {"/bin/sh", "-c", std::string(MIGD_PROMTOOL) + " check metrics < " + file}, dir.path());
  EXPECT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(r.out + r.err, "") << "promtool reported problems";
}

// The promtool check must be able to fail: a counter without _total and a
// family without help are lint problems.
TEST(PromtoolTest, CheckMetricsCatchesLintProblems) {
  ASSERT_TRUE(Executable(MIGD_PROMTOOL)) << kInstallPrometheus;
  migd::testing::TempDir dir;
  Registry r;
  ASSERT_TRUE(r.AddCounter("migd_bad_counter", "", {}).ok());
  const std::string file = dir.Join("bad.txt");
  WriteFile(file, r.Expose());
  migd::testing::CommandResult res = migd::testing::RunCommand(
      {"/bin/sh", "-c", std::string(MIGD_PROMTOOL) + " check metrics < " + file}, dir.path());
  EXPECT_NE(res.exit_code, 0);
  EXPECT_THAT(res.out + res.err, HasSubstr("migd_bad_counter"));
}

// A free TCP port on 127.0.0.1 (bound then released: a small race with other
// processes, acceptable in a test).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// A child process killed (SIGTERM, then SIGKILL) and reaped on destruction.
class Child {
 public:
  bool Spawn(const std::vector<std::string>& argv, const std::string& log) {
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0) ::_exit(126);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return true;
  }
  // True while the child has not exited.
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {  // up to ~20 s for a clean shutdown
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
};

std::string ReadLog(const std::string& path) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
}

TEST(PrometheusServerTest, ScrapesMetricsEndpoint) {
  ASSERT_TRUE(Executable(MIGD_PROMETHEUS)) << kInstallPrometheus;
  migd::testing::TempDir dir;
  PopulatedRegistry populated;
  ASSERT_THAT(populated.Init(dir.path()), migd::testing::IsOk());
  MetricsHttpServer server(&populated.registry());
  MIGD_ASSERT_OK_AND_ASSIGN(int metrics_port, server.Start("127.0.0.1:0"));

  const int prom_port = FreePort();
  ASSERT_GT(prom_port, 0);
  const std::string config = dir.Join("prometheus.yml");
  WriteFile(config,
            "global:\n"
            "  scrape_interval: 1s\n"
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: migd\n"
            "    scrape_interval: 1s\n"
            "    scrape_timeout: 1s\n"
            "    static_configs:\n"
            "      - targets: ['127.0.0.1:" +
                std::to_string(metrics_port) + "']\n");
  const std::string log = dir.Join("prometheus.log");
  Child prometheus;
  ASSERT_TRUE(prometheus.Spawn({MIGD_PROMETHEUS, "--config.file=" + config,
                                "--storage.tsdb.path=" + dir.Join("tsdb"),
                                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                               log));

  httplib::Client client("127.0.0.1", prom_port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  bool up = false;
  bool build_info = false;
  bool escaped = false;
  std::string last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && !(up && build_info && escaped)) {
    ASSERT_TRUE(prometheus.Running()) << "prometheus exited:\n" << ReadLog(log);
    if (!up) {
      if (auto res = client.Get("/api/v1/targets"); res && res->status == 200) {
        last = res->body;
        nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
        if (!j.is_discarded()) {
          for (const auto& t : j["data"]["activeTargets"]) {
            if (t.value("health", "") == "up") up = true;
          }
        }
      }
    }
    if (!build_info) {
      if (auto res = client.Get("/api/v1/query?query=migd_build_info");
          res && res->status == 200) {
        last = res->body;
        nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
        if (!j.is_discarded() && j["data"]["result"].is_array() && !j["data"]["result"].empty()) {
          const auto& r = j["data"]["result"][0];
          build_info = r["value"][1] == "1" && r["metric"]["version"] == "0.6.0-test";
        }
      }
    }
    if (!escaped) {
      if (auto res = client.Get("/api/v1/query?query=migd_test_escape_info");
          res && res->status == 200) {
        nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
        if (!j.is_discarded() && j["data"]["result"].is_array() && !j["data"]["result"].empty()) {
          EXPECT_EQ(j["data"]["result"][0]["metric"]["value"], kTricky);
          escaped = true;
        }
      }
    }
    if (!(up && build_info && escaped)) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(up) << "target never healthy; last answer: " << last << "\nlog:\n" << ReadLog(log);
  EXPECT_TRUE(build_info) << "migd_build_info never 1; last answer: " << last;
  EXPECT_TRUE(escaped) << "migd_test_escape_info never scraped";
  server.Stop();
}

}  // namespace
}  // namespace migd::metrics
