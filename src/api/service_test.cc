// api/service end to end: a real Manager over FakeGpuDriver, the ApiServer on
// a unix socket, called through the generated stub. Every RPC, its error
// codes and messages, and Watch.
#include "api/service.h"

#include <absl/base/thread_annotations.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "api/api_test_util.h"
#include "base/mutex.h"
#include "testing/status_matchers.h"

namespace migd::api {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ServiceTest : public testing::ApiTest {
 protected:
  v1::AllocateResponse MustAllocate(const v1::AllocateRequest& req) {
    v1::AllocateResponse resp;
    grpc::Status s = Allocate(req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  v1::ReleaseResponse MustRelease(const std::string& id) {
    v1::ReleaseRequest r;
    r.set_request_id(id);
    v1::ReleaseResponse resp;
    grpc::Status s = Release(r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  grpc::Status Plan(const v1::PlanRequest& req, v1::PlanResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Plan(&ctx, req, resp);
  }
  grpc::Status Reclaim(const v1::ReclaimRequest& req, v1::ReclaimResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Reclaim(&ctx, req, resp);
  }
  // Waits (generous deadline) until the hub has `n` subscribers.
  bool WaitSubscribers(size_t n) { return hub_.WaitForSubscribers(n, std::chrono::seconds(30)); }
};

#define EXPECT_GRPC(status, code, msg)                                        \
  do {                                                                        \
    const grpc::Status s_ = (status);                                         \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message(); \
    EXPECT_THAT(s_.error_message(), msg);                                     \
  } while (0)

TEST_F(ServiceTest, AllocateCreatesThenReplays) {
  Boot();
  v1::AllocateRequest req = AllocReq("r1", "3g.20gb", 1);
  v1::AllocateResponse a = MustAllocate(req);
  EXPECT_EQ(a.request_id(), "r1");
  EXPECT_FALSE(a.replayed());
  ASSERT_EQ(a.instances_size(), 1);
  const v1::Instance& inst = a.instances(0).instance();
  EXPECT_EQ(a.instances(0).path(), v1::ALLOCATION_PATH_CREATE);
  EXPECT_EQ(inst.state(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(inst.gpu_index(), 1u);
  EXPECT_EQ(inst.profile(), "3g.20gb");
  EXPECT_EQ(inst.placement().size(), 4u);
  EXPECT_THAT(inst.mig_uuid(), StartsWith("MIG-"));
  EXPECT_THAT(inst.gpu_uuid(), StartsWith("GPU-"));
  EXPECT_EQ(inst.owner().opaque_id(), "job-r1");
  EXPECT_EQ(inst.request_id(), "r1");
  EXPECT_EQ(inst.cdi_device(), "");  // no CDI observer
  ASSERT_EQ(a.envs_size(), 1);
  EXPECT_EQ(a.envs(0).name(), "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(a.envs(0).value(), inst.mig_uuid());
  EXPECT_EQ(a.cdi_devices_size(), 0);

  v1::AllocateResponse again = MustAllocate(req);
  EXPECT_TRUE(again.replayed());
  ASSERT_EQ(again.instances_size(), 1);
  EXPECT_EQ(again.instances(0).path(), v1::ALLOCATION_PATH_UNSPECIFIED);
  EXPECT_EQ(again.instances(0).instance().mig_uuid(), inst.mig_uuid());

  // Same id, another owner.
  req.mutable_owner()->set_opaque_id("someone-else");
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(req, &resp), ALREADY_EXISTS, HasSubstr("r1"));
}

TEST_F(ServiceTest, AllocateValidationNamesTheField) {
  Boot();
  v1::AllocateResponse resp;
  v1::AllocateRequest req = AllocReq("", "1g.5gb");
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT, "request_id: required");
  req = AllocReq(std::string(300, 'r'), "1g.5gb");
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT, "request_id: 300 bytes, at most 253");
  req = AllocReq("r1", "1g.5gb");
  req.clear_owner();
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT, StartsWith("owner: required"));
  req = AllocReq("r1", "1g.5gb");
  req.mutable_owner()->mutable_pod()->set_namespace_("ns");
  req.mutable_owner()->mutable_pod()->set_name("p");
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT, "owner.pod.uid: required");
  req = AllocReq("r1", "1g.5gb");
  v1::InstanceSpec* s = req.add_instances();
  s->set_profile("1g.5gb");
  s->mutable_placement()->set_size(1);
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT,
              "instances[1].placement: requires instances[1].gpu");
  req = AllocReq("r1", "1g.5gb");
  for (int i = 0; i < 64; ++i) req.add_instances()->set_profile("1g.5gb");
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT, "instances: 65 entries, at most 64");
  // The planner's field names are the API's.
  req = AllocReq("r1", "1g.5gb");
  req.add_instances()->set_profile("9g.1gb");
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT,
              StartsWith("instances[1].profile: unknown profile \"9g.1gb\"; known on gpu0, gpu1: "
                         "1g.5gb, "));
  req = AllocReq("r1", "1g.5gb");
  v1::InstanceSpec* pinned = req.add_instances();
  pinned->set_profile("2g.10gb");
  pinned->set_gpu(0);
  pinned->mutable_placement()->set_start(1);
  pinned->mutable_placement()->set_size(2);
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT,
              StartsWith("instances[1].placement: 1:2 is not listed for 2g.10gb"));
  req = AllocReq("r1", "1g.5gb", 7);
  EXPECT_GRPC(Allocate(req, &resp), INVALID_ARGUMENT,
              "instances[0].gpu: unknown GPU 7 (GPUs: 0, 1)");
  EXPECT_TRUE(mgr_->List().instances.empty());
}

TEST_F(ServiceTest, NoPlacementIsResourceExhaustedWithThePlannersMessage) {
  Boot();
  MustAllocate(AllocReq("big0", "7g.40gb", 0));
  MustAllocate(AllocReq("big1", "7g.40gb", 1));
  StatusOr<planner::Plan> plan = mgr_->Plan(
      {engine::InstanceSpec{.profile = "1g.5gb", .gpu = std::nullopt, .placement = std::nullopt}});
  ASSERT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb"), &resp), RESOURCE_EXHAUSTED,
              std::string(plan.status().message()));
  v1::PlanRequest pr;
  pr.add_instances()->set_profile("1g.5gb");
  v1::PlanResponse presp;
  EXPECT_GRPC(Plan(pr, &presp), RESOURCE_EXHAUSTED, std::string(plan.status().message()));
}

TEST_F(ServiceTest, MigDisabledGpuIsFailedPrecondition) {
  Boot("a100-40gb:1,a100-40gb:1:mig-off");
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb", 1), &resp), FAILED_PRECONDITION,
              "gpu1: MIG mode is disabled; enable it with nvidia-smi -i 1 -mig 1 (a GPU reset may "
              "be needed); migd takes it over at its next reconcile pass");
  v1::PlanRequest pr;
  v1::InstanceSpec* s = pr.add_instances();
  s->set_profile("1g.5gb");
  s->set_gpu(1);
  v1::PlanResponse presp;
  EXPECT_GRPC(Plan(pr, &presp), FAILED_PRECONDITION, StartsWith("gpu1: MIG mode is disabled"));
  // GPU 0 still works, and List shows both.
  MustAllocate(AllocReq("r2", "1g.5gb", 0));
  v1::ListResponse list;
  ASSERT_TRUE(ListAll(&list).ok());
  ASSERT_EQ(list.gpus_size(), 2);
  EXPECT_TRUE(list.gpus(0).mig_enabled());
  EXPECT_FALSE(list.gpus(1).mig_enabled());
  EXPECT_EQ(list.gpus(1).profiles_size(), 0);
}

TEST_F(ServiceTest, NoMigGpuAtAllIsFailedPrecondition) {
  Boot("a100-40gb:1:mig-off");
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb"), &resp), FAILED_PRECONDITION,
              "no GPU has MIG mode enabled (MIG-capable: gpu0); enable it with nvidia-smi -i 0 "
              "-mig 1 (a GPU reset may be needed); migd takes it over at its next reconcile pass");
}

TEST_F(ServiceTest, GpuWithoutMigIsFailedPrecondition) {
  no_mig_from_ = 1;
  Boot("a100-40gb:2");
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb", 1), &resp), FAILED_PRECONDITION,
              "gpu1 (NVIDIA A100-SXM4-40GB) does not support MIG; pin a MIG-capable GPU");
  MustAllocate(AllocReq("r2", "1g.5gb"));
}

TEST_F(ServiceTest, NodeWithoutMigIsFailedPrecondition) {
  no_mig_from_ = 0;
  Boot("a100-40gb:2");
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb"), &resp), FAILED_PRECONDITION,
              "no GPU on this node supports MIG (GPUs: 0, 1)");
}

TEST_F(ServiceTest, AllowlistRefusalPassesThrough) {
  Boot();
  engine::ManagerPolicy p = mgr_->policy();
  p.profile_allowlist = {"1g.5gb"};
  ASSERT_TRUE(mgr_->SetPolicy(p).ok());
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "3g.20gb"), &resp), PERMISSION_DENIED,
              HasSubstr("is not in migProfileAllowlist"));
}

TEST_F(ServiceTest, ReleaseByRequestAndByUuidThenReuse) {
  Boot();
  v1::AllocateRequest two = AllocReq("r1", "1g.5gb", 0);
  two.add_instances()->set_profile("2g.10gb");
  v1::AllocateResponse a = MustAllocate(two);
  ASSERT_EQ(a.instances_size(), 2);
  v1::ReleaseResponse rel = MustRelease("r1");
  ASSERT_EQ(rel.instances_size(), 2);
  for (const v1::Instance& i : rel.instances()) {
    EXPECT_EQ(i.state(), v1::INSTANCE_STATE_IDLE);
    EXPECT_FALSE(i.has_owner());
    EXPECT_EQ(i.request_id(), "");
  }
  // Reuse: same profile, no NVML.
  v1::AllocateResponse b = MustAllocate(AllocReq("r2", "1g.5gb"));
  ASSERT_EQ(b.instances_size(), 1);
  EXPECT_EQ(b.instances(0).path(), v1::ALLOCATION_PATH_REUSE);
  EXPECT_EQ(b.instances(0).instance().mig_uuid(), a.instances(0).instance().mig_uuid());

  v1::ReleaseRequest by_uuid;
  by_uuid.set_mig_uuid(b.instances(0).instance().mig_uuid());
  v1::ReleaseResponse r2;
  ASSERT_TRUE(Release(by_uuid, &r2).ok());
  ASSERT_EQ(r2.instances_size(), 1);
  EXPECT_EQ(r2.instances(0).mig_uuid(), b.instances(0).instance().mig_uuid());
  EXPECT_EQ(r2.instances(0).state(), v1::INSTANCE_STATE_IDLE);
  EXPECT_GT(r2.instances(0).last_used_unix_ms(), 0);

  v1::ReleaseRequest bad;
  bad.set_request_id("nope");
  EXPECT_GRPC(Release(bad, &r2), NOT_FOUND, HasSubstr("nope"));
  bad.set_mig_uuid("MIG-0a1b2c3d-0000-4000-8000-00000000abcd");
  EXPECT_GRPC(Release(bad, &r2), NOT_FOUND, HasSubstr("MIG-0a1b2c3d-0000-4000-8000-00000000abcd"));
  // A parent GPU's UUID in place of a MIG UUID is refused, naming that GPU.
  const std::string gpu_uuid = a.instances(0).instance().gpu_uuid();
  bad.set_mig_uuid(gpu_uuid);
  EXPECT_GRPC(Release(bad, &r2), INVALID_ARGUMENT,
              HasSubstr("mig_uuid: '" + gpu_uuid + "' is the UUID of GPU " +
                        std::to_string(a.instances(0).instance().gpu_index()) + " (" + gpu_uuid +
                        "), the parent of MIG instances"));
  // Every MIG UUID the API hands out names a MIG device of its GPU.
  for (const v1::AllocatedInstance& ai : {a.instances(0), b.instances(0)}) {
    EXPECT_THAT(ai.instance().mig_uuid(), StartsWith("MIG-"));
    EXPECT_NE(ai.instance().mig_uuid(), ai.instance().gpu_uuid());
  }
  bad.set_mig_uuid("GPU-x");
  EXPECT_GRPC(Release(bad, &r2), INVALID_ARGUMENT,
              StartsWith("mig_uuid: 'GPU-x' is not a MIG UUID"));
  EXPECT_GRPC(Release(v1::ReleaseRequest(), &r2), INVALID_ARGUMENT,
              "target: required (request_id or mig_uuid)");
}

TEST_F(ServiceTest, ListFiltersAndShowsForeign) {
  Boot("a100-40gb:2", {}, [](sim::FakeGpuDriver& d) {
    // A GI that migd did not create: 1g.5gb (profile id 19) at slice 6.
    auto gi = d.CreateGi(GpuIndex(1), GiProfileId(19), {.start = 6, .size = 1});
    ASSERT_TRUE(gi.ok()) << gi.status();
    ASSERT_TRUE(d.CreateCi(GpuIndex(1), gi->id).ok());
  });
  MustAllocate(AllocReq("a", "1g.5gb", 0));
  MustAllocate(AllocReq("b", "2g.10gb", 1));
  MustRelease("b");
  v1::ListResponse all;
  ASSERT_TRUE(ListAll(&all).ok());
  ASSERT_EQ(all.gpus_size(), 2);
  EXPECT_EQ(all.gpus(0).memory_slices(), 8u);
  EXPECT_GT(all.gpus(0).profiles_size(), 0);
  EXPECT_GT(all.gpus(0).profiles(0).placements_size(), 0);
  EXPECT_THAT(all.gpus(0).name(), HasSubstr("A100"));
  ASSERT_EQ(all.instances_size(), 2);
  EXPECT_EQ(all.instances(0).gpu_index(), 0u);  // sorted by GPU
  EXPECT_EQ(all.instances(1).state(), v1::INSTANCE_STATE_IDLE);
  ASSERT_EQ(all.foreign_size(), 1);
  EXPECT_EQ(all.foreign(0).gpu_index(), 1u);
  EXPECT_EQ(all.foreign(0).placement().start(), 6u);
  EXPECT_EQ(all.foreign(0).ci_ids_size(), 1);

  v1::ListRequest by_gpu;
  by_gpu.set_gpu(0);
  v1::ListResponse g0;
  ASSERT_TRUE(ListAll(&g0, by_gpu).ok());
  EXPECT_EQ(g0.gpus_size(), 1);
  EXPECT_EQ(g0.instances_size(), 1);
  EXPECT_EQ(g0.foreign_size(), 0);

  v1::ListRequest idle;
  idle.add_states(v1::INSTANCE_STATE_IDLE);
  v1::ListResponse only_idle;
  ASSERT_TRUE(ListAll(&only_idle, idle).ok());
  ASSERT_EQ(only_idle.instances_size(), 1);
  EXPECT_EQ(only_idle.instances(0).profile(), "2g.10gb");

  v1::ListRequest bad;
  bad.set_gpu(5);
  v1::ListResponse r;
  EXPECT_GRPC(ListAll(&r, bad), INVALID_ARGUMENT, "gpu: unknown GPU 5 (GPUs: 0, 1)");
  bad.clear_gpu();
  bad.add_states(v1::INSTANCE_STATE_DESTROYED);
  EXPECT_GRPC(ListAll(&r, bad), INVALID_ARGUMENT,
              "states[0]: INSTANCE_STATE_DESTROYED only appears in Watch events");
}

TEST_F(ServiceTest, PlanShowsEachPath) {
  Boot("a100-40gb:1");
  v1::PlanRequest pr;
  pr.add_instances()->set_profile("1g.5gb");
  v1::PlanResponse p;
  ASSERT_TRUE(Plan(pr, &p).ok());
  ASSERT_EQ(p.instances_size(), 1);
  EXPECT_EQ(p.instances(0).path(), v1::ALLOCATION_PATH_CREATE);
  EXPECT_EQ(p.search(), "greedy");
  EXPECT_TRUE(mgr_->List().instances.empty());  // a dry run

  v1::AllocateResponse a = MustAllocate(AllocReq("r1", "1g.5gb"));
  MustRelease("r1");
  p.Clear();
  ASSERT_TRUE(Plan(pr, &p).ok());
  EXPECT_EQ(p.instances(0).path(), v1::ALLOCATION_PATH_REUSE);
  EXPECT_EQ(p.instances(0).reuse_mig_uuid(), a.instances(0).instance().mig_uuid());

  // The whole GPU needs the Idle instance's slice.
  v1::PlanRequest full;
  full.add_instances()->set_profile("7g.40gb");
  p.Clear();
  ASSERT_TRUE(Plan(full, &p).ok());
  ASSERT_EQ(p.instances_size(), 1);
  EXPECT_EQ(p.instances(0).path(), v1::ALLOCATION_PATH_RECLAIM_CREATE);
  ASSERT_EQ(p.instances(0).reclaims_size(), 1);
  EXPECT_EQ(p.instances(0).reclaims(0).mig_uuid(), a.instances(0).instance().mig_uuid());

  EXPECT_GRPC(Plan(v1::PlanRequest(), &p), INVALID_ARGUMENT,
              "instances: required, 1 to 64 entries");
}

TEST_F(ServiceTest, ReclaimDestroysIdleAndReportsFailures) {
  Boot();
  v1::AllocateResponse a = MustAllocate(AllocReq("a", "1g.5gb", 0));
  v1::AllocateResponse b = MustAllocate(AllocReq("b", "2g.10gb", 1));
  MustAllocate(AllocReq("c", "1g.5gb", 1));  // stays Active
  MustRelease("a");
  MustRelease("b");
  // A process on b's device makes its destroy fail.
  ASSERT_TRUE(
      fake_->AttachProcess(MigUuid(b.instances(0).instance().mig_uuid()), 4242, 1 << 20).ok());
  v1::ReclaimResponse r;
  v1::ReclaimRequest bad;
  bad.set_gpu(9);
  EXPECT_GRPC(Reclaim(bad, &r), INVALID_ARGUMENT, "gpu: unknown GPU 9 (GPUs: 0, 1)");
  ASSERT_TRUE(Reclaim(v1::ReclaimRequest(), &r).ok());
  ASSERT_EQ(r.destroyed_size(), 1);
  EXPECT_EQ(r.destroyed(0).mig_uuid(), a.instances(0).instance().mig_uuid());
  EXPECT_EQ(r.destroyed(0).state(), v1::INSTANCE_STATE_DESTROYED);
  ASSERT_EQ(r.failed_size(), 1);
  EXPECT_EQ(r.failed(0).mig_uuid(), b.instances(0).instance().mig_uuid());
  EXPECT_EQ(r.failed(0).state(), v1::INSTANCE_STATE_ERROR);
  v1::ListResponse list;
  ASSERT_TRUE(ListAll(&list).ok());
  EXPECT_EQ(list.instances_size(), 2);  // c Active, b Error
  // An Error instance cannot be released.
  v1::ReleaseRequest rel;
  rel.set_mig_uuid(b.instances(0).instance().mig_uuid());
  v1::ReleaseResponse rr;
  EXPECT_GRPC(Release(rel, &rr), FAILED_PRECONDITION, HasSubstr("Error"));
}

TEST_F(ServiceTest, GetStatusReportsInfoCapacityAndCounters) {
  Boot("a100-40gb:1,a100-40gb:1:mig-off");
  MustAllocate(AllocReq("a", "3g.20gb"));
  MustAllocate(AllocReq("b", "1g.5gb"));
  MustRelease("b");
  grpc::ClientContext ctx;
  v1::GetStatusResponse st;
  ASSERT_TRUE(stub_->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  EXPECT_EQ(st.version(), "1.2.3-test");
  EXPECT_EQ(st.driver_version(), "550.54.15");
  EXPECT_EQ(st.nvml_library(), "/usr/lib/libnvidia-ml-sim.so");
  EXPECT_TRUE(st.simulated());
  EXPECT_EQ(st.started_unix_ms(), 1767225600123);
  EXPECT_EQ(st.boot_id(), testing::kBoot);
  ASSERT_EQ(st.gpus_size(), 2);
  const v1::GpuStatus& g0 = st.gpus(0);
  EXPECT_TRUE(g0.gpu().mig_enabled());
  EXPECT_EQ(g0.active_slices(), 4u);
  EXPECT_EQ(g0.idle_slices(), 1u);
  EXPECT_EQ(g0.free_slices(), 3u);
  EXPECT_EQ(g0.foreign_slices(), 0u);
  EXPECT_GE(g0.fragmentation(), 0.0);
  EXPECT_LE(g0.fragmentation(), 1.0);
  EXPECT_FALSE(st.gpus(1).gpu().mig_enabled());
  EXPECT_EQ(st.gpus(1).free_slices(), 0u);
  EXPECT_EQ(st.counters().allocations(), 2u);
  EXPECT_EQ(st.counters().creates(), 2u);
  EXPECT_EQ(st.counters().releases(), 1u);
  EXPECT_EQ(st.instances_active(), 1u);
  EXPECT_EQ(st.instances_idle(), 1u);
  EXPECT_EQ(st.instances_error(), 0u);
  EXPECT_EQ(st.instances_foreign(), 0u);
}

TEST_F(ServiceTest, NvmlErrorKeepsItsNameAndCode) {
  Boot("a100-40gb:1");
  gated_->FailNextCreateGi(
      UnavailableError("creating GI of profile 19 on GPU 0: NVML_ERROR_GPU_IS_LOST (GPU is lost)"));
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb"), &resp), UNAVAILABLE,
              HasSubstr("NVML_ERROR_GPU_IS_LOST"));
  EXPECT_TRUE(mgr_->List().instances.empty());  // rolled back
  MustAllocate(AllocReq("r1", "1g.5gb"));       // and the id is usable again
}

TEST_F(ServiceTest, SameRequestIdInFlightIsAborted) {
  Boot("a100-40gb:1");
  gated_->Close();
  grpc::Status first;
  std::thread t([&] {
    v1::AllocateResponse r;
    first = Allocate(AllocReq("r1", "1g.5gb"), &r);
  });
  ASSERT_TRUE(gated_->WaitHeld());
  v1::AllocateResponse resp;
  EXPECT_GRPC(Allocate(AllocReq("r1", "1g.5gb"), &resp), ABORTED, HasSubstr("r1"));
  gated_->Open();
  t.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
}

TEST_F(ServiceTest, AllocateReturnsCdiNamesAndLegacyDevices) {
  with_cdi_ = true;
  Boot("a100-40gb:1");
  v1::AllocateRequest req = AllocReq("r1", "1g.5gb");
  req.add_instances()->set_profile("2g.10gb");
  v1::AllocateResponse a = MustAllocate(req);
  ASSERT_EQ(a.instances_size(), 2);
  const std::string u0 = a.instances(0).instance().mig_uuid();
  const std::string u1 = a.instances(1).instance().mig_uuid();
  EXPECT_THAT(a.cdi_devices(), ::testing::ElementsAre("hami.io/mig=" + u0, "hami.io/mig=" + u1));
  EXPECT_EQ(a.instances(0).instance().cdi_device(), "hami.io/mig=" + u0);
  ASSERT_EQ(a.envs_size(), 1);
  EXPECT_EQ(a.envs(0).name(), "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(a.envs(0).value(), u0 + "," + u1);
  std::vector<std::string> nodes;
  for (const v1::DeviceNode& n : a.device_nodes()) {
    nodes.push_back(n.container_path());
    EXPECT_EQ(n.permissions(), "rw");
  }
  EXPECT_THAT(nodes, ::testing::Contains(::testing::HasSubstr("nvidia-caps/nvidia-cap")));
  // List names the CDI device of each instance too.
  v1::ListResponse list;
  ASSERT_TRUE(ListAll(&list).ok());
  ASSERT_EQ(list.instances_size(), 2);
  for (const v1::Instance& i : list.instances()) {
    EXPECT_EQ(i.cdi_device(), "hami.io/mig=" + i.mig_uuid());
  }
}

TEST_F(ServiceTest, CdiDisabledGivesOnlyTheLegacyForm) {
  with_cdi_ = true;
  cdi_enabled_ = false;
  Boot("a100-40gb:1");
  v1::AllocateResponse a = MustAllocate(AllocReq("r1", "1g.5gb"));
  EXPECT_EQ(a.cdi_devices_size(), 0);
  EXPECT_EQ(a.instances(0).instance().cdi_device(), "");
  ASSERT_EQ(a.envs_size(), 1);
  EXPECT_EQ(a.envs(0).value(), a.instances(0).instance().mig_uuid());
  EXPECT_GT(a.device_nodes_size(), 0);
}

TEST_F(ServiceTest, AllocatedInstanceWithoutAPublishedSpecIsInternal) {
  // The service reads specs from an observer the Manager never publishes
  // to: the instance exists but has no spec, a broken invariant (never the
  // client's to fix), reported as INTERNAL naming the instance.
  engine::CdiObserver unpublished(/*publisher=*/nullptr);
  ServiceOptions sopts;
  sopts.cdi = &unpublished;
  Boot("a100-40gb:1", sopts);
  v1::AllocateResponse a;
  grpc::Status s = Allocate(AllocReq("r1", "1g.5gb"), &a);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), HasSubstr("no CDI spec published for MIG-"));
  EXPECT_THAT(s.error_message(), HasSubstr("after allocation r1"));
  // Before `unpublished` goes (TearDown runs after it).
  server_->Shutdown(std::chrono::milliseconds(0));
  server_.reset();
}

// Reads a Watch stream on its own thread, as a real watcher does (so that it
// never falls 1024 events behind), checking that sequences only increase.
class SequenceWatcher {
 public:
  // `ctx` is the stream's context; it must outlive the watcher.
  SequenceWatcher(grpc::ClientContext* ctx,
                  std::unique_ptr<grpc::ClientReader<v1::InstanceEvent>> stream)
      : ctx_(ctx), stream_(std::move(stream)), thread_([this] { Run(); }) {}
  ~SequenceWatcher() {
    ctx_->TryCancel();
    thread_.join();
  }
  // Waits until the watcher has read event `sequence` (generous deadline).
  bool WaitFor(uint64_t sequence) {
    MutexLock lock(&mu_);
    return cv_.WaitFor(&mu_, std::chrono::seconds(30),
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return seen_ == sequence; });
  }
  uint64_t seen() {
    MutexLock lock(&mu_);
    return seen_;
  }
  int out_of_order() {
    MutexLock lock(&mu_);
    return out_of_order_;
  }

 private:
  void Run() {
    v1::InstanceEvent ev;
    while (stream_->Read(&ev)) {
      MutexLock lock(&mu_);
      if (ev.sequence() <= seen_) ++out_of_order_;
      seen_ = ev.sequence();
      cv_.SignalAll();
    }
  }
  grpc::ClientContext* const ctx_;
  std::unique_ptr<grpc::ClientReader<v1::InstanceEvent>> stream_;
  Mutex mu_;
  CondVar cv_;
  uint64_t seen_ ABSL_GUARDED_BY(mu_) = 0;
  int out_of_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// No two listed instances of one GPU overlap; Active ones have an owner,
// Idle ones none, and nothing else is left.
void ExpectListInvariants(const v1::ListResponse& list) {
  for (int i = 0; i < list.instances_size(); ++i) {
    const v1::Instance& a = list.instances(i);
    EXPECT_TRUE(a.state() == v1::INSTANCE_STATE_ACTIVE || a.state() == v1::INSTANCE_STATE_IDLE)
        << a.ShortDebugString();
    EXPECT_EQ(a.has_owner(), a.state() == v1::INSTANCE_STATE_ACTIVE) << a.ShortDebugString();
    for (int j = i + 1; j < list.instances_size(); ++j) {
      const v1::Instance& b = list.instances(j);
      if (a.gpu_index() != b.gpu_index()) continue;
      const bool overlap = a.placement().start() < b.placement().start() + b.placement().size() &&
                           b.placement().start() < a.placement().start() + a.placement().size();
      EXPECT_FALSE(overlap) << a.ShortDebugString() << " / " << b.ShortDebugString();
    }
  }
}

class ConcurrentServiceTest : public ServiceTest {
 protected:
  // One client: allocate, mostly release, sometimes reclaim.
  void RunClient(int c, int ops) {
    auto stub = NewStub();
    const char* profiles[] = {"1g.5gb", "2g.10gb", "1g.5gb", "3g.20gb"};
    for (int op = 0; op < ops; ++op) {
      const std::string id = "c" + std::to_string(c) + "-" + std::to_string(op);
      v1::AllocateResponse a;
      grpc::ClientContext ctx;
      grpc::Status s = stub->Allocate(&ctx, AllocReq(id, profiles[(c + op) % 4]), &a);
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) continue;
      if (!s.ok()) {
        ++unexpected_;
        ADD_FAILURE() << id << ": " << s.error_message();
        continue;
      }
      ++allocated_;
      if (op % 5 == 4) continue;  // keep some Active
      v1::ReleaseRequest r;
      r.set_request_id(id);
      v1::ReleaseResponse rr;
      grpc::ClientContext rctx;
      s = stub->Release(&rctx, r, &rr);
      if (!s.ok() || rr.instances_size() > 1) {
        ++unexpected_;
        ADD_FAILURE() << id << ": " << s.error_message();
      }
      if (op % 7 == 6) {
        v1::ReclaimResponse rec;
        grpc::ClientContext cctx;
        if (!stub->Reclaim(&cctx, v1::ReclaimRequest(), &rec).ok()) ++unexpected_;
      }
    }
  }
  std::atomic<int> unexpected_{0};
  std::atomic<int> allocated_{0};
};

TEST_F(ConcurrentServiceTest, ConcurrentClientsKeepInvariants) {
  Boot("a100-40gb:2");
  // A watcher sees every event of the run, in strictly increasing order.
  grpc::ClientContext wctx;
  auto watcher = std::make_unique<SequenceWatcher>(&wctx, stub_->Watch(&wctx, v1::WatchRequest()));
  ASSERT_TRUE(WaitSubscribers(1));
  constexpr int kClients = 8;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) clients.emplace_back([this, c] { RunClient(c, 40); });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(unexpected_.load(), 0);
  EXPECT_GT(allocated_.load(), kClients);
  v1::ListResponse list;
  ASSERT_TRUE(ListAll(&list).ok());
  ExpectListInvariants(list);
  // The watcher reaches the last event the hub saw.
  const uint64_t last = hub_.last_sequence();
  EXPECT_TRUE(watcher->WaitFor(last)) << "watcher at " << watcher->seen() << ", hub at " << last;
  EXPECT_EQ(watcher->out_of_order(), 0);
  watcher.reset();
}

// --- Watch --------------------------------------------------------------------

TEST_F(ServiceTest, WatchSnapshotThenLiveEventsInOrder) {
  Boot();
  v1::AllocateResponse first = MustAllocate(AllocReq("r0", "1g.5gb", 0));
  grpc::ClientContext ctx;
  v1::WatchRequest wr;
  wr.set_initial_snapshot(true);
  auto reader = stub_->Watch(&ctx, wr);
  v1::InstanceEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), "snapshot");
  EXPECT_EQ(ev.sequence(), 0u);
  EXPECT_EQ(ev.from(), v1::INSTANCE_STATE_UNSPECIFIED);
  EXPECT_EQ(ev.to(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(ev.instance().mig_uuid(), first.instances(0).instance().mig_uuid());
  ASSERT_TRUE(WaitSubscribers(1));

  v1::AllocateResponse a = MustAllocate(AllocReq("r1", "2g.10gb", 1));
  MustRelease("r1");
  const std::string uuid = a.instances(0).instance().mig_uuid();
  // Creating -> Active for the allocation, Active -> Idle for the release.
  struct Want {
    v1::InstanceState from, to;
    const char* reason;
  };
  const Want want[] = {
      {v1::INSTANCE_STATE_UNSPECIFIED, v1::INSTANCE_STATE_CREATING, "allocate"},
      {v1::INSTANCE_STATE_CREATING, v1::INSTANCE_STATE_ACTIVE, "allocate"},
      {v1::INSTANCE_STATE_ACTIVE, v1::INSTANCE_STATE_IDLE, "release"},
  };
  uint64_t last_seq = 0;
  for (const Want& w : want) {
    ASSERT_TRUE(reader->Read(&ev));
    EXPECT_EQ(ev.from(), w.from) << ev.ShortDebugString();
    EXPECT_EQ(ev.to(), w.to) << ev.ShortDebugString();
    EXPECT_EQ(ev.reason(), w.reason) << ev.ShortDebugString();
    EXPECT_EQ(ev.instance().state(), w.to);
    EXPECT_GT(ev.sequence(), last_seq);
    EXPECT_GT(ev.time_unix_ms(), 0);
    last_seq = ev.sequence();
  }
  EXPECT_EQ(ev.instance().mig_uuid(), uuid);
  ctx.TryCancel();
  EXPECT_FALSE(reader->Read(&ev));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitSubscribers(0));  // the handler noticed and unsubscribed
}

TEST_F(ServiceTest, WatchReclaimAndDestroyEvents) {
  Boot("a100-40gb:1");
  MustAllocate(AllocReq("r1", "1g.5gb"));
  MustRelease("r1");
  grpc::ClientContext ctx;
  auto reader = stub_->Watch(&ctx, v1::WatchRequest());
  ASSERT_TRUE(WaitSubscribers(1));
  v1::ReclaimResponse r;
  ASSERT_TRUE(Reclaim(v1::ReclaimRequest(), &r).ok());
  ASSERT_EQ(r.destroyed_size(), 1);
  v1::InstanceEvent ev;
  std::vector<std::string> seen;
  while (reader->Read(&ev)) {
    seen.push_back(ev.reason() + ":" + v1::InstanceState_Name(ev.to()));
    if (ev.to() == v1::INSTANCE_STATE_DESTROYED) break;
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().substr(0, 16), "reclaim-operator");
  EXPECT_EQ(seen.back(), "destroy:INSTANCE_STATE_DESTROYED");
  ctx.TryCancel();
}

TEST_F(ServiceTest, SlowWatcherDroppedWithResourceExhausted) {
  Mutex mu;
  CondVar cv;
  bool stalled = false, go = false;
  ServiceOptions so;
  so.before_watch_write = [&](const v1::InstanceEvent&) {
    MutexLock lock(&mu);
    if (go) return;
    stalled = true;
    cv.SignalAll();
    cv.Wait(&mu, [&] { return go; });
  };
  Boot("a100-40gb:1", so);
  grpc::ClientContext ctx;
  auto reader = stub_->Watch(&ctx, v1::WatchRequest());
  ASSERT_TRUE(WaitSubscribers(1));
  // One real event; the handler stalls on it.
  MustAllocate(AllocReq("r1", "1g.5gb"));
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(cv.WaitFor(&mu, std::chrono::seconds(30), [&] { return stalled; }));
  }
  // Overflow its queue through the hub the Manager feeds.
  for (uint64_t s = 0; s <= EventHub::kQueueLimit + 1; ++s) {
    engine::InstanceEvent e;
    e.sequence = 1000000 + s;
    e.to = engine::InstanceState::kIdle;
    hub_.OnInstanceEvent(e);
  }
  {
    MutexLock lock(&mu);
    go = true;
    cv.SignalAll();
  }
  v1::InstanceEvent ev;
  int n = 0;
  while (reader->Read(&ev)) ++n;
  EXPECT_EQ(n, 1);  // the stalled event; the backlog was dropped
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(),
            "watch fell more than 1024 events behind; reconnect and resync with List");
  EXPECT_TRUE(WaitSubscribers(0));
}

TEST_F(ServiceTest, SixtyFifthWatcherRefused) {
  Boot("a100-40gb:1");
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::InstanceEvent>>> readers;
  for (size_t i = 0; i < EventHub::kMaxSubscribers; ++i) {
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub_->Watch(ctxs.back().get(), v1::WatchRequest()));
  }
  ASSERT_TRUE(WaitSubscribers(EventHub::kMaxSubscribers));
  grpc::ClientContext ctx;
  auto extra = stub_->Watch(&ctx, v1::WatchRequest());
  v1::InstanceEvent ev;
  EXPECT_FALSE(extra->Read(&ev));
  grpc::Status s = extra->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("too many Watch streams (at most 64)"));
  for (auto& c : ctxs) c->TryCancel();
  for (auto& r : readers) r->Finish().IgnoreError();
  EXPECT_TRUE(WaitSubscribers(0));
}

TEST_F(ServiceTest, ShutdownEndsWatchStreams) {
  Boot("a100-40gb:1");
  grpc::ClientContext ctx;
  auto reader = stub_->Watch(&ctx, v1::WatchRequest());
  ASSERT_TRUE(WaitSubscribers(1));
  std::thread stopper([&] { server_->Shutdown(std::chrono::seconds(60)); });
  v1::InstanceEvent ev;
  EXPECT_FALSE(reader->Read(&ev));
  grpc::Status s = reader->Finish();
  stopper.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(s.error_message(), "migd is shutting down; reconnect and resync with List");
}

}  // namespace
}  // namespace migd::api
