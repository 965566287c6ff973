// migctl's client commands (RunMigctl) against the real gRPC service: an
// in-process api::ApiServer over an engine::Manager on simulated GPUs
// (api/api_test_util.h), on a unix socket in a temp dir. Checks that the
// requests migctl builds are accepted, that the replies print, and that the
// server's real error codes map to migctl's exit codes.
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "api/api_test_util.h"
#include "cli/app.h"
#include "cli/exit_codes.h"

namespace migd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

class MigctlApiTest : public api::testing::ApiTest {
 protected:
  Result Run(const std::vector<std::string>& args) {
    Environment env;
    env.migd_socket = socket_path();
    env.columns = 80;
    std::ostringstream out;
    std::ostringstream err;
    Result r;
    r.rc = RunMigctl(args, env, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
};

TEST_F(MigctlApiTest, Lifecycle) {
  Boot("a100-40gb:2", {}, [](sim::FakeGpuDriver& d) {
    // A GI migd did not create: 1g.5gb (profile id 19) at slice 6 of GPU 1.
    auto gi = d.CreateGi(GpuIndex(1), GiProfileId(19), {.start = 6, .size = 1});
    ASSERT_TRUE(gi.ok()) << gi.status();
    ASSERT_TRUE(d.CreateCi(GpuIndex(1), gi->id).ok());
  });

  Result r = Run({"allocate", "--id", "job-7", "--owner", "job-7", "gpu0/3g.20gb@4:4",
                  "gpu0/1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("allocated job-7: 2 instance(s)\n"));
  EXPECT_THAT(r.out, HasSubstr("0    4:4        3g.20gb  create"));
  EXPECT_THAT(r.out, HasSubstr("env NVIDIA_VISIBLE_DEVICES=MIG-"));

  // Same request again: replayed.
  r = Run({"allocate", "--id", "job-7", "--owner", "job-7", "gpu0/3g.20gb@4:4", "gpu0/1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(replayed"));

  r = Run({"status"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("migd 1.2.3-test  driver 550.54.15  simulated  2 GPUs\n"));
  EXPECT_THAT(r.out, HasSubstr("|3g.20gb"));
  EXPECT_THAT(r.out, HasSubstr("|Active"));
  EXPECT_THAT(r.out, HasSubstr("|job-7"));
  EXPECT_THAT(r.out, HasSubstr("|foreign"));  // GPU 1's preserved GI
  EXPECT_THAT(r.out, HasSubstr("slices: 3 free, 0 idle, 5 active, 0 foreign"));
  EXPECT_THAT(r.out, HasSubstr("slices: 7 free, 0 idle, 0 active, 1 foreign"));

  r = Run({"list", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list["instances"].size(), 2u);
  EXPECT_EQ(list["foreign"].size(), 1u);
  const std::string mig = list["instances"][0]["migUuid"];

  r = Run({"release", "--mig", mig});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("released 1 instance(s)"));
  r = Run({"release", "--id", "job-7"});
  ASSERT_EQ(r.rc, 0) << r.err;

  r = Run({"list", "--state", "idle", "-o", "yaml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(YAML::Load(r.out)["instances"].size(), 2u);

  // A dry run reuses an Idle instance.
  r = Run({"plan", "gpu0/1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("reuse"));

  r = Run({"reclaim", "--gpu", "0", "--profile", "1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("destroyed 1 Idle instance(s)"));
  r = Run({"status"});
  EXPECT_THAT(r.out, HasSubstr("slices: 4 free, 4 idle, 0 active, 0 foreign"));
}

TEST_F(MigctlApiTest, ServerErrorsGiveTheDocumentedExitCodes) {
  Boot("a100-40gb:1");
  // Nothing fits: RESOURCE_EXHAUSTED with the planner's reason.
  Result r = Run({"allocate", "--id", "big", "--owner", "o", "7g.40gb", "7g.40gb"});
  EXPECT_EQ(r.rc, kExitNoPlacement) << r.err;
  EXPECT_THAT(r.err, HasSubstr("RESOURCE_EXHAUSTED"));
  r = Run({"plan", "7g.40gb,7g.40gb"});
  EXPECT_EQ(r.rc, kExitNoPlacement) << r.err;
  // Unknown request id and MIG UUID: NOT_FOUND.
  r = Run({"release", "--id", "nope"});
  EXPECT_EQ(r.rc, kExitNotFound) << r.err;
  r = Run({"release", "--mig", "MIG-00000000-0000-0000-0000-000000000000"});
  EXPECT_EQ(r.rc, kExitNotFound) << r.err;
  // Unknown profile: INVALID_ARGUMENT naming the field.
  r = Run({"allocate", "--id", "x", "--owner", "o", "9g.1gb"});
  EXPECT_EQ(r.rc, kExitUsage) << r.err;
  EXPECT_THAT(r.err, HasSubstr("instances[0]"));
  // Same id, different owner: ALREADY_EXISTS.
  ASSERT_EQ(Run({"allocate", "--id", "y", "--owner", "o", "1g.5gb"}).rc, 0);
  r = Run({"allocate", "--id", "y", "--owner", "someone-else", "1g.5gb"});
  EXPECT_EQ(r.rc, kExitServerError) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ALREADY_EXISTS"));
}

TEST_F(MigctlApiTest, HealthClearMakesAnUnhealthyGpuAllocatableAgain) {
  Boot("a100-40gb:2");
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "GPU 1: xid 79");
  Result r = Run({"allocate", "--id", "a", "--owner", "o", "gpu1/1g.5gb"});
  EXPECT_EQ(r.rc, kExitServerError) << r.err;  // FAILED_PRECONDITION: the GPU is unhealthy
  r = Run({"status"});
  EXPECT_THAT(r.out, HasSubstr("UNHEALTHY: GPU 1: xid 79"));
  r = Run({"health", "clear", "--gpu", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "GPU 1: cleared the GPU's health mark and 0 instance mark(s); it takes new "
            "allocations again\n");
  r = Run({"status"});
  EXPECT_THAT(r.out, Not(HasSubstr("UNHEALTHY")));
  r = Run({"allocate", "--id", "a", "--owner", "o", "gpu1/1g.5gb"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = Run({"health", "clear", "--gpu", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "GPU 1: nothing to clear (no health marks)\n");
}

TEST_F(MigctlApiTest, HealthClearOfAGpuThisNodeDoesNotHaveIsNotFound) {
  Boot("a100-40gb:1");
  const Result r = Run({"health", "clear", "--gpu", "4"});
  EXPECT_EQ(r.rc, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, HasSubstr("NOT_FOUND: GPU 4 is not on this node (GPUs: 0; migctl status "
                               "lists the GPUs)"));
}

TEST_F(MigctlApiTest, UnreachableAfterShutdown) {
  Boot("a100-40gb:1");
  server_->Shutdown(std::chrono::milliseconds(0));
  const Result r = Run({"status"});
  EXPECT_EQ(r.rc, kExitUnreachable);
  EXPECT_THAT(r.err, HasSubstr("cannot reach migd at " + socket_path()));
  EXPECT_THAT(r.err, HasSubstr("is migd running?"));
  EXPECT_THAT(r.out, Not(HasSubstr("GPU")));
}

}  // namespace
}  // namespace migd::cli
