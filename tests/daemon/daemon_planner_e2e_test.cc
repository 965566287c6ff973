// End-to-end tests of the planner's value policy in the real migd binary
// over libnvidia-ml-sim.so.1: the `planner:` keys reach the service the
// daemon builds, and its counters reach /metrics (planner.policy: value), or
// have no samples (cost).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "migd/v1/migd.grpc.pb.h"
#include "testing/daemon_process.h"
#include "testing/eventually.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::Eventually;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;

class DaemonPlannerE2eTest : public ::testing::Test {
 protected:
  // Starts migd on two simulated A100-40GBs with `yaml` as its config file.
  void Start(const std::string& yaml) {
    const std::string config = dir_.Join("migd.yaml");
    migd::testing::WriteFileOrDie(config, yaml);
    DaemonOptions o;
    o.args = {"--simulate",       "a100-40gb:2",      "--socket",       Socket(),
              "--state-dir",      dir_.Join("state"), "--cdi-spec-dir", dir_.Join("cdi"),
              "--metrics-listen", "127.0.0.1:0",      "--config",       config};
    o.env = migd::testing::SimulatedMachineEnv(dir_.Join("sim"));
    o.socket_path = Socket();
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(o, dir_.path());
    ASSERT_TRUE(d.ok()) << d.status();
    migd_ = std::move(*d);
    // The port migd bound, from its ready line.
    const std::string err = migd_->Stderr();
    const size_t at = err.find("metrics=127.0.0.1:");
    ASSERT_NE(at, std::string::npos) << err;
    port_ = std::stoi(err.substr(at + 18, err.find(' ', at) - at - 18));
  }

  void TearDown() override {
    if (migd_ != nullptr) {
      EXPECT_EQ(migd_->Stop().exit_code, 0);
    }
  }

  std::string Socket() const { return dir_.Join("api.socket"); }

  grpc::Status Allocate(const std::string& request_id, const std::string& profile) {
    auto stub = v1::MigManager::NewStub(
        grpc::CreateChannel("unix:" + Socket(), grpc::InsecureChannelCredentials()));
    v1::AllocateRequest req;
    req.set_request_id(request_id);
    req.mutable_owner()->set_opaque_id("owner-" + request_id);
    req.add_instances()->set_profile(profile);
    v1::AllocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->Allocate(&ctx, req, &resp);
  }

  std::string Scrape() const {
    httplib::Client client("127.0.0.1", port_);
    auto res = client.Get("/metrics");
    return res && res->status == 200 ? res->body : "";
  }

  // The value of the sample `series` in `text`; -1 if absent.
  static double Sample(const std::string& text, const std::string& series) {
    const std::string needle = "\n" + series + " ";
    const size_t at = text.find(needle);
    if (at == std::string::npos) return -1;
    const size_t start = at + needle.size();
    return std::stod(text.substr(start, text.find('\n', start) - start));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> migd_;
  int port_ = 0;
};

// Two arrivals with planner.minArrivals: 2 start one solve (one GPU model) on
// the daemon's solve thread; the scrape shows it with exact counts.
TEST_F(DaemonPlannerE2eTest, TheValueServicesSolveReachesTheMetricsEndpoint) {
  Start("planner:\n  minArrivals: 2\n  halfLifeArrivals: 100\n  multiGpu: separable\n");
  EXPECT_THAT(migd_->Stderr(), HasSubstr("multi_gpu=separable half_life_arrivals=100 "
                                         "min_arrivals=2"));
  std::string text = Scrape();
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), 0) << text;
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 0);

  ASSERT_TRUE(Allocate("r1", "1g.5gb").ok());
  ASSERT_TRUE(Allocate("r2", "1g.5gb").ok());
  ASSERT_TRUE(Eventually([&] {
    text = Scrape();
    return Sample(text, "migd_planner_value_solves_total") == 1;
  })) << text;
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), 2);
  EXPECT_EQ(Sample(text, "migd_planner_value_table_version"), 1);
  EXPECT_EQ(Sample(text, "migd_planner_value_solve_failures_total"), 0);
  EXPECT_EQ(Sample(text, "migd_planner_value_drift_solves_total"), 0);
  EXPECT_GT(Sample(text, "migd_planner_value_max_table_states"), 0);
  EXPECT_GT(Sample(text, "migd_planner_value_max_table_bytes"), 0);
}

TEST_F(DaemonPlannerE2eTest, TheCostPolicyHasNoPlannerSamples) {
  Start("planner:\n  policy: cost\n");
  ASSERT_TRUE(Allocate("r1", "1g.5gb").ok());
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("# TYPE migd_planner_value_solves_total counter\n"));
  EXPECT_EQ(Sample(text, "migd_planner_value_solves_total"), -1) << text;
  EXPECT_EQ(Sample(text, "migd_planner_value_arrivals_total"), -1);
}

}  // namespace
}  // namespace migd
