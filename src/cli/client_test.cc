// migctl's client subcommands through RunMigctl (flags, requests, output
// formats, exit codes, error messages) against an in-process fake
// MigManager server on a unix socket in a per-test temp dir.
#include "cli/client.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "cli/app.h"
#include "cli/connection.h"
#include "cli/exit_codes.h"
#include "migd/v1/migd.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::cli {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// The canned answers a test sets, and the last request of each kind the
// fake received.
struct Answers {
  migd::v1::ListResponse list;
  migd::v1::GetStatusResponse status;
  migd::v1::AllocateResponse allocate;
  migd::v1::ReleaseResponse release;
  migd::v1::PlanResponse plan;
  migd::v1::ReclaimResponse reclaim;
  migd::v1::ClearHealthResponse clear_health;
};
struct Received {
  migd::v1::ListRequest list;
  migd::v1::AllocateRequest allocate;
  migd::v1::ReleaseRequest release;
  migd::v1::PlanRequest plan;
  migd::v1::ReclaimRequest reclaim;
  migd::v1::ClearHealthRequest clear_health;
};

// Answers every call with the canned response, or with `error` when set;
// records the last request of each kind. Thread-safe: the test thread and
// gRPC's handler threads meet only under mu_.
class FakeMigManager final : public migd::v1::MigManager::Service {
 public:
  // Runs `edit` on the canned answers.
  template <typename F>
  void EditAnswers(F edit) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    edit(answers_);
  }
  Answers answers() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return answers_;
  }
  Received received() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return received_;
  }
  void SetError(grpc::Status error) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    error_ = std::move(error);
  }
  // Plan blocks until UnblockPlan (the client's deadline passes meanwhile).
  void BlockPlan() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    block_plan_ = true;
  }
  void UnblockPlan() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    block_plan_ = false;
    unblocked_.SignalAll();
  }
  int calls() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return calls_;
  }

  grpc::Status List(grpc::ServerContext*, const migd::v1::ListRequest* request,
                    migd::v1::ListResponse* response) override {
    MutexLock lock(&mu_);
    return Answer(*request, &received_.list, answers_.list, response);
  }
  grpc::Status GetStatus(grpc::ServerContext*, const migd::v1::GetStatusRequest* request,
                         migd::v1::GetStatusResponse* response) override {
    MutexLock lock(&mu_);
    migd::v1::GetStatusRequest ignored;
    return Answer(*request, &ignored, answers_.status, response);
  }
  grpc::Status Allocate(grpc::ServerContext*, const migd::v1::AllocateRequest* request,
                        migd::v1::AllocateResponse* response) override {
    MutexLock lock(&mu_);
    return Answer(*request, &received_.allocate, answers_.allocate, response);
  }
  grpc::Status Release(grpc::ServerContext*, const migd::v1::ReleaseRequest* request,
                       migd::v1::ReleaseResponse* response) override {
    MutexLock lock(&mu_);
    return Answer(*request, &received_.release, answers_.release, response);
  }
  grpc::Status Plan(grpc::ServerContext*, const migd::v1::PlanRequest* request,
                    migd::v1::PlanResponse* response) override {
    MutexLock lock(&mu_);
    if (block_plan_) {
      unblocked_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !block_plan_; });
      return grpc::Status::CANCELLED;
    }
    return Answer(*request, &received_.plan, answers_.plan, response);
  }
  grpc::Status Reclaim(grpc::ServerContext*, const migd::v1::ReclaimRequest* request,
                       migd::v1::ReclaimResponse* response) override {
    MutexLock lock(&mu_);
    return Answer(*request, &received_.reclaim, answers_.reclaim, response);
  }
  grpc::Status ClearHealth(grpc::ServerContext*, const migd::v1::ClearHealthRequest* request,
                           migd::v1::ClearHealthResponse* response) override {
    MutexLock lock(&mu_);
    return Answer(*request, &received_.clear_health, answers_.clear_health, response);
  }

 private:
  template <typename Req, typename Resp>
  grpc::Status Answer(const Req& request, Req* last, const Resp& canned, Resp* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++calls_;
    *last = request;
    if (!error_.ok()) return error_;
    *response = canned;
    return grpc::Status::OK;
  }

  Mutex mu_;
  CondVar unblocked_;
  Answers answers_ ABSL_GUARDED_BY(mu_);
  Received received_ ABSL_GUARDED_BY(mu_);
  grpc::Status error_ ABSL_GUARDED_BY(mu_);
  bool block_plan_ ABSL_GUARDED_BY(mu_) = false;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

migd::v1::Instance MakeInstance(uint32_t gpu, uint32_t start, uint32_t size,
                                const std::string& profile, migd::v1::InstanceState state) {
  migd::v1::Instance i;
  i.set_gpu_index(gpu);
  i.mutable_placement()->set_start(start);
  i.mutable_placement()->set_size(size);
  i.set_profile(profile);
  i.set_state(state);
  i.set_mig_uuid("MIG-" + std::to_string(gpu) + "-" + std::to_string(start));
  return i;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("api.sock");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);

    fake_.EditAnswers([](Answers& a) {
      migd::v1::Gpu* gpu = a.list.add_gpus();
      gpu->set_index(0);
      gpu->set_uuid("GPU-0");
      gpu->set_name("NVIDIA A100-SXM4-40GB");
      gpu->set_mig_enabled(true);
      gpu->set_memory_slices(8);
      *a.list.add_instances() = MakeInstance(0, 0, 4, "3g.20gb", migd::v1::INSTANCE_STATE_ACTIVE);
      a.list.mutable_instances(0)->mutable_owner()->set_opaque_id("job-7");
      a.list.mutable_instances(0)->set_request_id("job-7");
      a.status.set_version("0.1.0");
      migd::v1::GpuStatus* gs = a.status.add_gpus();
      *gs->mutable_gpu() = *gpu;
      gs->set_free_slices(4);
      gs->set_active_slices(4);
    });
  }
  void TearDown() override {
    fake_.UnblockPlan();
    server_->Shutdown();
  }

  Result Run(const std::vector<std::string>& args, Environment env) {
    std::ostringstream out;
    std::ostringstream err;
    Result r;
    r.rc = RunMigctl(args, env, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  Result Run(const std::vector<std::string>& args) {
    Environment env;
    env.migd_socket = socket_;
    env.columns = 80;
    return Run(args, env);
  }

  TempDir dir_;
  std::string socket_;
  FakeMigManager fake_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClientTest, StatusDrawsThePicture) {
  const Result r = Run({"status"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU 0  NVIDIA A100-SXM4-40GB  GPU-0  MIG enabled  8 slices"));
  EXPECT_THAT(r.out, HasSubstr("|3g.20gb"));
  EXPECT_THAT(r.out, HasSubstr("slices: 4 free, 0 idle, 4 active, 0 foreign"));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));  // not a TTY
}

TEST_F(ClientTest, StatusColourFollowsTtyNoColorAndFlag) {
  Environment tty;
  tty.migd_socket = socket_;
  tty.stdout_is_tty = true;
  EXPECT_THAT(Run({"status"}, tty).out, HasSubstr("\x1b[30;42m"));
  EXPECT_THAT(Run({"status", "--color", "never"}, tty).out, Not(HasSubstr("\x1b[")));
  Environment no_color = tty;
  no_color.no_color = true;
  EXPECT_THAT(Run({"status"}, no_color).out, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(Run({"status", "--color=always"}, no_color).out, HasSubstr("\x1b[30;42m"));
  EXPECT_THAT(Run({"--color", "always", "status"}).out, HasSubstr("\x1b[30;42m"));
}

TEST_F(ClientTest, StatusWidthFlagSizesTheCells) {
  const Result r = Run({"status", "--width", "200"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // 16 columns per slice: the 4-slice block spans 63 dashes.
  EXPECT_THAT(r.out, HasSubstr("  +" + std::string(63, '-') + "+"));
  EXPECT_EQ(Run({"status", "--width", "5"}).rc, kExitUsage);
}

TEST_F(ClientTest, StatusGpuFilter) {
  const Result r = Run({"status", "--gpu", "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(fake_.received().list.has_gpu());
  EXPECT_EQ(fake_.received().list.gpu(), 0u);
}

TEST_F(ClientTest, StatusJsonAndYamlHoldBothReplies) {
  Result r = Run({"status", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["status"]["version"], "0.1.0");
  EXPECT_EQ(doc["list"]["instances"][0]["profile"], "3g.20gb");
  r = Run({"-o", "yaml", "status"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const YAML::Node yaml = YAML::Load(r.out);
  EXPECT_EQ(yaml["status"]["version"].as<std::string>(), "0.1.0");
  EXPECT_EQ(yaml["list"]["gpus"][0]["memorySlices"].as<int>(), 8);
}

TEST_F(ClientTest, ListSendsFiltersAndPrintsATable) {
  fake_.EditAnswers([](Answers& a) {
    migd::v1::ForeignInstance* f = a.list.add_foreign();
    f->set_profile("1g.5gb");
    f->mutable_placement()->set_start(7);
    f->mutable_placement()->set_size(1);
    f->set_gi_id(9);
    f->add_ci_ids(0);
  });
  const Result r = Run({"list", "--gpu", "0", "--state", "active,idle", "--state", "Error"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(fake_.received().list.gpu(), 0u);
  ASSERT_EQ(fake_.received().list.states_size(), 3);
  EXPECT_EQ(fake_.received().list.states(0), migd::v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(fake_.received().list.states(1), migd::v1::INSTANCE_STATE_IDLE);
  EXPECT_EQ(fake_.received().list.states(2), migd::v1::INSTANCE_STATE_ERROR);
  EXPECT_EQ(r.out,
            "GPU  PLACEMENT  PROFILE  STATE   OWNER  REQUEST  MIG\n"
            "0    0:4        3g.20gb  Active  job-7  job-7    MIG-0-0\n"
            "\n"
            "foreign (not created by migd, preserved):\n"
            "GPU  PLACEMENT  PROFILE  GI  CI\n"
            "0    7:1        1g.5gb   9   0\n");
}

TEST_F(ClientTest, ListJsonRoundTrips) {
  const Result r = Run({"list", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  migd::v1::ListResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &back).ok()) << r.out;
  EXPECT_TRUE(MessageDifferencer::Equals(back, fake_.answers().list)) << back.DebugString();
}

TEST_F(ClientTest, ListRejectsUnknownStateWithoutCallingMigd) {
  const Result r = Run({"list", "--state", "busy"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--state: unknown state 'busy'"));
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ClientTest, ListOfNothing) {
  fake_.EditAnswers([](Answers& a) { a.list.clear_instances(); });
  const Result r = Run({"list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "no instances\n");
}

TEST_F(ClientTest, AllocateBuildsTheRequest) {
  fake_.EditAnswers([](Answers& a) {
    migd::v1::AllocatedInstance* inst = a.allocate.add_instances();
    *inst->mutable_instance() = MakeInstance(0, 4, 4, "3g.20gb", migd::v1::INSTANCE_STATE_ACTIVE);
    inst->mutable_instance()->set_cdi_device("hami.io/mig=MIG-0-4");
    inst->set_path(migd::v1::ALLOCATION_PATH_CREATE);
    a.allocate.set_request_id("job-8");
    migd::v1::EnvVar* env = a.allocate.add_envs();
    env->set_name("NVIDIA_VISIBLE_DEVICES");
    env->set_value("MIG-0-4");
    a.allocate.add_cdi_devices("hami.io/mig=MIG-0-4");
    migd::v1::DeviceNode* node = a.allocate.add_device_nodes();
    node->set_host_path("/dev/nvidia0");
    node->set_container_path("/dev/nvidia0");
    node->set_permissions("rw");
    node = a.allocate.add_device_nodes();
    node->set_host_path("/dev/nvidia-caps/nvidia-cap21");
    node->set_container_path("/dev/caps/21");
    node->set_permissions("r");
  });
  const Result r =
      Run({"allocate", "--id", "job-8", "--owner", "team-x", "3g.20gb", "gpu1/1g.5gb@6:1,1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const migd::v1::AllocateRequest req = fake_.received().allocate;
  EXPECT_EQ(req.request_id(), "job-8");
  EXPECT_EQ(req.owner().opaque_id(), "team-x");
  ASSERT_EQ(req.instances_size(), 3);
  EXPECT_EQ(req.instances(0).profile(), "3g.20gb");
  EXPECT_FALSE(req.instances(0).has_gpu());
  EXPECT_FALSE(req.instances(0).has_placement());
  EXPECT_EQ(req.instances(1).profile(), "1g.5gb");
  EXPECT_EQ(req.instances(1).gpu(), 1u);
  EXPECT_EQ(req.instances(1).placement().start(), 6u);
  EXPECT_EQ(req.instances(1).placement().size(), 1u);
  EXPECT_EQ(req.instances(2).profile(), "1g.5gb");
  EXPECT_EQ(r.out,
            "allocated job-8: 1 instance(s)\n"
            "GPU  PLACEMENT  PROFILE  PATH    MIG\n"
            "0    4:4        3g.20gb  create  MIG-0-4\n"
            "cdi hami.io/mig=MIG-0-4\n"
            "env NVIDIA_VISIBLE_DEVICES=MIG-0-4\n"
            "devices /dev/nvidia0 /dev/nvidia-caps/nvidia-cap21->/dev/caps/21:r\n");
}

TEST_F(ClientTest, AllocateForAPod) {
  fake_.EditAnswers([](Answers& a) { a.allocate.set_replayed(true); });
  const Result r = Run({"allocate", "--id", "r1", "--pod", "ns/web-0/uid-1/main", "1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const migd::v1::AllocateRequest req = fake_.received().allocate;
  const migd::v1::PodOwner& pod = req.owner().pod();
  EXPECT_EQ(pod.namespace_(), "ns");
  EXPECT_EQ(pod.name(), "web-0");
  EXPECT_EQ(pod.uid(), "uid-1");
  EXPECT_EQ(pod.container(), "main");
  EXPECT_THAT(r.out, HasSubstr("(replayed"));
}

TEST_F(ClientTest, AllocateUsageErrorsNeverReachMigd) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"allocate", "--owner", "a", "1g.5gb"}, "--id"},
      {{"allocate", "--id", "r", "1g.5gb"}, "exactly one owner"},
      {{"allocate", "--id", "r", "--owner", "a", "--pod", "n/p/u", "1g.5gb"}, "exactly one owner"},
      {{"allocate", "--id", "r", "--pod", "n/p", "1g.5gb"}, "--pod: want NAMESPACE/NAME/UID"},
      {{"allocate", "--id", "r", "--pod", "n//u", "1g.5gb"}, "the name is empty"},
      {{"allocate", "--id", "r", "--owner", "a"}, "instances"},
      {{"allocate", "--id", "r", "--owner", "a", "gpux/1g.5gb"}, "bad GPU index"},
      {{"allocate", "--id", "r", "--owner", "a", "1g.5gb@0:1"}, "a placement needs a GPU"},
      {{"allocate", "--id", "r", "--owner", "a", "1g.5gb,"}, "empty"},
  };
  for (const Case& c : cases) {
    const Result r = Run(c.args);
    EXPECT_EQ(r.rc, kExitUsage) << c.args.back();
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args.back();
  }
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ClientTest, ReleaseByRequestOrMig) {
  fake_.EditAnswers([](Answers& a) {
    *a.release.add_instances() = MakeInstance(0, 0, 4, "3g.20gb", migd::v1::INSTANCE_STATE_IDLE);
  });
  Result r = Run({"release", "--id", "job-7"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(fake_.received().release.request_id(), "job-7");
  EXPECT_EQ(r.out,
            "released 1 instance(s); now Idle, kept for reuse\n"
            "GPU  PLACEMENT  PROFILE  STATE  OWNER  REQUEST  MIG\n"
            "0    0:4        3g.20gb  Idle   -      -        MIG-0-0\n");
  r = Run({"release", "--mig", "MIG-0-0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(fake_.received().release.mig_uuid(), "MIG-0-0");
}

TEST_F(ClientTest, ReleaseNeedsExactlyOneTarget) {
  Result r = Run({"release"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("exactly one of --id REQUEST or --mig MIG-UUID"));
  r = Run({"release", "--id", "a", "--mig", "b"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ClientTest, PlanAsksMigdWithoutLayout) {
  fake_.EditAnswers([](Answers& a) {
    migd::v1::PlannedInstance* p = a.plan.add_instances();
    p->set_path(migd::v1::ALLOCATION_PATH_RECLAIM_CREATE);
    p->set_gpu_index(0);
    p->set_profile("3g.20gb");
    p->mutable_placement()->set_start(4);
    p->mutable_placement()->set_size(4);
    migd::v1::ReclaimedInstance* rec = p->add_reclaims();
    rec->set_gpu_index(0);
    rec->set_profile("1g.5gb");
    rec->mutable_placement()->set_start(4);
    rec->mutable_placement()->set_size(1);
    rec->set_mig_uuid("MIG-x");
    migd::v1::PlannedInstance* q = a.plan.add_instances();
    q->set_path(migd::v1::ALLOCATION_PATH_REUSE);
    q->set_profile("1g.5gb");
    q->mutable_placement()->set_start(7);
    q->mutable_placement()->set_size(1);
    q->set_reuse_mig_uuid("MIG-y");
    a.plan.set_search("greedy");
  });
  const Result r = Run({"plan", "--request", "3g.20gb", "1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(fake_.received().plan.instances_size(), 2);
  EXPECT_EQ(fake_.received().plan.instances(0).profile(), "3g.20gb");
  EXPECT_EQ(fake_.received().plan.instances(1).profile(), "1g.5gb");
  EXPECT_EQ(r.out,
            "plan (greedy search; dry run, nothing changed):\n"
            "#  GPU  PLACEMENT  PROFILE  PATH            DETAIL\n"
            "0  0    4:4        3g.20gb  reclaim+create  after destroying 1g.5gb@gpu0:4:1 "
            "(MIG-x)\n"
            "1  0    7:1        1g.5gb   reuse           reuses Idle MIG-y\n");
}

TEST_F(ClientTest, PlanWithoutInstancesIsAUsageError) {
  const Result r = Run({"plan"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("no instances"));
  EXPECT_THAT(r.err, HasSubstr("--layout"));
}

TEST_F(ClientTest, PlanOfflineWithLayoutNeedsNoMigd) {
  const std::string layout = dir_.Join("layout.json");
  migd::testing::WriteFileOrDie(layout, R"({"gpus": [{"index": 0, "model": "a100-40gb"}]})");
  Environment nowhere;
  nowhere.migd_socket = dir_.Join("absent.sock");
  Result r = Run({"plan", "--layout", layout, "3g.20gb"}, nowhere);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("3g.20gb"));
  r = Run({"plan", "--layout", layout, "--request", "1g.5gb", "-o", "yaml"}, nowhere);
  ASSERT_EQ(r.rc, 0) << r.err;
  const YAML::Node yaml = YAML::Load(r.out);
  EXPECT_EQ(yaml["instances"][0]["profile"].as<std::string>(), "1g.5gb");
  r = Run({"plan", "--layout", layout, "--request", "7g.40gb,7g.40gb"}, nowhere);
  EXPECT_EQ(r.rc, kExitNoPlan) << r.err;
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ClientTest, ReclaimSendsFiltersAndFailsWhenADestroyFailed) {
  fake_.EditAnswers([](Answers& a) {
    *a.reclaim.add_destroyed() = MakeInstance(0, 4, 1, "1g.5gb", migd::v1::INSTANCE_STATE_IDLE);
  });
  Result r = Run({"reclaim", "--gpu", "0", "--profile", "1g.5gb"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(fake_.received().reclaim.has_gpu());
  EXPECT_EQ(fake_.received().reclaim.profile(), "1g.5gb");
  EXPECT_THAT(r.out, HasSubstr("destroyed 1 Idle instance(s)\n"));
  fake_.EditAnswers([](Answers& a) {
    *a.reclaim.add_failed() = MakeInstance(0, 5, 1, "1g.5gb", migd::v1::INSTANCE_STATE_ERROR);
  });
  r = Run({"reclaim"});
  EXPECT_EQ(r.rc, kExitServerError);
  EXPECT_FALSE(fake_.received().reclaim.has_gpu());
  EXPECT_THAT(r.out, HasSubstr("failed to destroy 1 instance(s)"));
  EXPECT_THAT(r.err, HasSubstr("could not be destroyed"));
  fake_.EditAnswers([](Answers& a) { a.reclaim.Clear(); });
  r = Run({"reclaim"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "nothing to reclaim: no Idle instance matches\n");
}

TEST_F(ClientTest, HealthClearSendsTheGpuAndPrintsWhatWasCleared) {
  fake_.EditAnswers([](Answers& a) {
    a.clear_health.set_gpu_was_unhealthy(true);
    a.clear_health.set_instances_cleared(2);
  });
  Result r = Run({"health", "clear", "--gpu", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(fake_.received().clear_health.gpu(), 3u);
  EXPECT_EQ(r.out,
            "GPU 3: cleared the GPU's health mark and 2 instance mark(s); it takes new "
            "allocations again\n");
  r = Run({"health", "clear", "--gpu", "3", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["gpuWasUnhealthy"], true);
  EXPECT_EQ(doc["instancesCleared"], 2);
  fake_.EditAnswers([](Answers& a) { a.clear_health.Clear(); });
  r = Run({"health", "clear", "--gpu", "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "GPU 0: nothing to clear (no health marks)\n");
}

TEST_F(ClientTest, HealthClearUsageErrorsNeverReachMigd) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"health", "clear"}, {"health"}, {"health", "clear", "--gpu", "x"},
        {"health", "reset", "--gpu", "0"}}) {
    const Result r = Run(args);
    EXPECT_EQ(r.rc, kExitUsage) << args.size() << r.err;
  }
  EXPECT_EQ(fake_.calls(), 0);
}

TEST_F(ClientTest, HealthClearOfAnUnknownGpuExitsNotFoundPointingAtStatus) {
  fake_.SetError(grpc::Status(grpc::StatusCode::NOT_FOUND, "GPU 9 is not on this node"));
  const Result r = Run({"health", "clear", "--gpu", "9"});
  EXPECT_EQ(r.rc, kExitNotFound);
  EXPECT_THAT(r.err, HasSubstr("migctl health clear: NOT_FOUND: GPU 9 is not on this node"));
  EXPECT_THAT(r.err, HasSubstr("`migctl status` lists the GPUs"));
  EXPECT_THAT(r.err, Not(HasSubstr("request ids")));
}

// Server errors end to end: exit code, the code's name, migd's message and
// the hint.
TEST_F(ClientTest, ServerErrorsMapToExitCodesAndSayWhatToDo) {
  struct Case {
    grpc::StatusCode code;
    int rc;
    std::string hint;
  };
  const std::vector<Case> cases = {
      {grpc::StatusCode::RESOURCE_EXHAUSTED, kExitNoPlacement, "`migctl reclaim`"},
      {grpc::StatusCode::NOT_FOUND, kExitNotFound, "`migctl list` shows request ids"},
      {grpc::StatusCode::INVALID_ARGUMENT, kExitUsage, "INVALID_ARGUMENT: boom"},
      {grpc::StatusCode::FAILED_PRECONDITION, kExitServerError, "FAILED_PRECONDITION: boom"},
      {grpc::StatusCode::ALREADY_EXISTS, kExitServerError, "use a new --id"},
      {grpc::StatusCode::ABORTED, kExitServerError, "retry with the same --id"},
      {grpc::StatusCode::INTERNAL, kExitServerError, "migd's log"},
      {grpc::StatusCode::UNIMPLEMENTED, kExitServerError, "older than migctl"},
      {grpc::StatusCode::PERMISSION_DENIED, kExitServerError, "api.socketGroup"},
  };
  for (const Case& c : cases) {
    fake_.SetError(grpc::Status(c.code, "boom"));
    const Result r = Run({"allocate", "--id", "r", "--owner", "o", "1g.5gb"});
    EXPECT_EQ(r.rc, c.rc) << c.code;
    EXPECT_THAT(r.err, HasSubstr("migctl allocate: ")) << c.code;
    EXPECT_THAT(r.err, HasSubstr("boom")) << c.code;
    EXPECT_THAT(r.err, HasSubstr(c.hint)) << c.code;
  }
}

TEST_F(ClientTest, UnavailableFromAReachableMigd) {
  fake_.SetError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "NVML is not usable"));
  const Result r = Run({"list"});
  EXPECT_EQ(r.rc, kExitUnreachable);
  EXPECT_THAT(r.err, HasSubstr("migd at " + socket_ + " is unavailable: NVML is not usable"));
  EXPECT_THAT(r.err, Not(HasSubstr("cannot reach")));
}

TEST_F(ClientTest, DeadlineExceeded) {
  fake_.BlockPlan();
  const Result r = Run({"--timeout", "200ms", "plan", "1g.5gb"});
  EXPECT_EQ(r.rc, kExitUnreachable);
  EXPECT_THAT(r.err, HasSubstr("did not answer within 200ms; raise --timeout"));
}

TEST_F(ClientTest, FlagsMayFollowTheSubcommandAndOverrideTheEnvironment) {
  Environment env;
  env.migd_socket = dir_.Join("wrong.sock");
  Result r = Run({"list", "--socket", socket_, "-o", "json"}, env);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  r = Run({"--socket", socket_, "list"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST_F(ClientTest, UsageErrors) {
  EXPECT_EQ(Run({}).rc, kExitUsage);
  EXPECT_EQ(Run({"frobnicate"}).rc, kExitUsage);
  EXPECT_EQ(Run({"-o", "xml", "list"}).rc, kExitUsage);
  EXPECT_EQ(Run({"--color", "sometimes", "status"}).rc, kExitUsage);
  Result r = Run({"--timeout", "0", "list"});
  EXPECT_EQ(r.rc, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--timeout"));
  EXPECT_EQ(Run({"--timeout", "soon", "list"}).rc, kExitUsage);
  EXPECT_EQ(Run({"--log-level", "loud", "list"}).rc, kExitUsage);
  EXPECT_EQ(fake_.calls(), 0);
  r = Run({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("Exit codes: 0 ok, 1 usage"));
}

TEST(UnreachableTest, MissingSocket) {
  TempDir dir;
  const std::string path = dir.Join("none.sock");
  Environment env;
  env.migd_socket = path;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunMigctl({"status"}, env, out, err), kExitUnreachable);
  EXPECT_EQ(err.str(),
            "migctl status: cannot reach migd at " + path +
                ": no such socket; is migd running? (start it with `migd --config "
                "/etc/migd/migd.yaml` or `make run`; use --socket or MIGD_SOCKET for another "
                "path)\n");
  EXPECT_EQ(out.str(), "");
}

TEST(UnreachableTest, StaleSocket) {
  TempDir dir;
  const std::string path = dir.Join("stale.sock");
  // A bound socket file with nobody listening: what a crashed migd leaves.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  EXPECT_EQ(ProbeSocket(path), ECONNREFUSED);
  Environment env;
  env.migd_socket = path;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunMigctl({"list"}, env, out, err), kExitUnreachable);
  EXPECT_THAT(err.str(), HasSubstr("connection refused (a stale socket: nobody is listening); "
                                   "is migd running?"));
}

TEST(UnreachableTest, NotASocket) {
  TempDir dir;
  const std::string path = dir.Join("file");
  migd::testing::WriteFileOrDie(path, "x");
  Environment env;
  env.migd_socket = path;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunMigctl({"list"}, env, out, err), kExitUnreachable);
  EXPECT_EQ(ProbeSocket(path), ENOTSOCK);
  EXPECT_THAT(err.str(), HasSubstr("cannot reach migd at " + path +
                                   ": the path exists but is not a socket; check --socket"));
}

TEST(ColorTest, Decision) {
  ClientOptions o;
  EXPECT_FALSE(UseColor(o));
  o.stdout_is_tty = true;
  EXPECT_TRUE(UseColor(o));
  o.no_color_env = true;
  EXPECT_FALSE(UseColor(o));
  o.color = ColorMode::kAlways;
  EXPECT_TRUE(UseColor(o));
  o.color = ColorMode::kNever;
  o.no_color_env = false;
  EXPECT_FALSE(UseColor(o));
}

TEST(LocalCommandsTest, SimStatsYaml) {
  TempDir dir;
  const std::string state = dir.Join("state.json");
  migd::testing::WriteFileOrDie(
      state, R"({"counters": {"nvmlInit_v2": {"SUCCESS": 2}, "nvmlShutdown": {"SUCCESS": 1}}})");
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(RunMigctl({"sim-stats", "--state", state, "-o", "yaml"}, {}, out, err), 0) << err.str();
  const YAML::Node yaml = YAML::Load(out.str());
  ASSERT_TRUE(yaml.IsDefined()) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("nvmlInit_v2"));
}

TEST(LocalCommandsTest, ProbeWithoutNvml) {
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunMigctl({"probe", "--nvml-library", "/nonexistent/libnvidia-ml.so.1", "-o", "yaml"},
                      {}, out, err),
            kExitNvmlUnavailable);
  EXPECT_THAT(err.str(), Not(HasSubstr("cannot reach migd")));
}

}  // namespace
}  // namespace migd::cli
