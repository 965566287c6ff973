// ClearHealth over the API: a real Manager over FakeGpuDriver behind the
// ApiServer on a unix socket (api/api_test_util.h), called through the stub.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/service.h"

namespace migd::api {
namespace {

using ::testing::HasSubstr;

class ClearHealthTest : public testing::ApiTest {
 protected:
  grpc::Status Clear(uint32_t gpu, v1::ClearHealthResponse* resp) {
    grpc::ClientContext ctx;
    v1::ClearHealthRequest req;
    req.set_gpu(gpu);
    return stub_->ClearHealth(&ctx, req, resp);
  }
  v1::Gpu GpuOf(uint32_t index) {
    grpc::ClientContext ctx;
    v1::ListResponse list;
    EXPECT_TRUE(stub_->List(&ctx, v1::ListRequest(), &list).ok());
    for (const v1::Gpu& g : list.gpus()) {
      if (g.index() == index) return g;
    }
    ADD_FAILURE() << "no GPU " << index;
    return {};
  }
};

TEST_F(ClearHealthTest, ClearsAMarkedGpuAndItsInstances) {
  Boot();
  grpc::ClientContext actx;
  v1::AllocateResponse a;
  ASSERT_TRUE(stub_->Allocate(&actx, AllocReq("r1", "1g.5gb", 1), &a).ok());
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(1), "GPU 1: xid 79");
  ASSERT_TRUE(GpuOf(1).unhealthy());

  v1::ClearHealthResponse resp;
  const grpc::Status s = Clear(1, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.gpu_was_unhealthy());
  EXPECT_EQ(resp.instances_cleared(), 1u);
  EXPECT_FALSE(GpuOf(1).unhealthy());
  EXPECT_EQ(GpuOf(1).health_reason(), "");
  // The GPU takes allocations again.
  grpc::ClientContext bctx;
  v1::AllocateResponse b;
  EXPECT_TRUE(stub_->Allocate(&bctx, AllocReq("r2", "1g.5gb", 1), &b).ok());
}

TEST_F(ClearHealthTest, ClearsOnlyInstanceMarksOfAHealthyGpu) {
  Boot();
  grpc::ClientContext actx;
  v1::AllocateResponse a;
  ASSERT_TRUE(stub_->Allocate(&actx, AllocReq("r1", "1g.5gb", 0), &a).ok());
  const engine::InstanceView v = mgr_->List().instances[0];
  mgr_->health_sink().MarkInstanceUnhealthy(v.gpu, v.gi_id, v.ci_id, 94);
  v1::ClearHealthResponse resp;
  ASSERT_TRUE(Clear(0, &resp).ok());
  EXPECT_FALSE(resp.gpu_was_unhealthy());
  EXPECT_EQ(resp.instances_cleared(), 1u);
  EXPECT_FALSE(mgr_->List().instances[0].unhealthy);
}

TEST_F(ClearHealthTest, AHealthyGpuChangesNothing) {
  Boot();
  v1::ClearHealthResponse resp;
  ASSERT_TRUE(Clear(0, &resp).ok());
  EXPECT_FALSE(resp.gpu_was_unhealthy());
  EXPECT_EQ(resp.instances_cleared(), 0u);
}

TEST_F(ClearHealthTest, AnUnknownGpuIsNotFoundNamingTheGpusAndTheFix) {
  Boot();
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  v1::ClearHealthResponse resp;
  const grpc::Status s = Clear(7, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("GPU 7 is not on this node (GPUs: 0, 1"));
  EXPECT_THAT(s.error_message(), HasSubstr("migctl status lists the GPUs"));
  EXPECT_TRUE(GpuOf(0).unhealthy());  // nothing else was touched
}

TEST_F(ClearHealthTest, WatchStreamsAHealthClearedEventPerClearedInstance) {
  Boot("a100-40gb:1");
  grpc::ClientContext actx;
  v1::AllocateResponse a;
  ASSERT_TRUE(stub_->Allocate(&actx, AllocReq("r1", "1g.5gb"), &a).ok());
  grpc::ClientContext ctx;
  auto reader = stub_->Watch(&ctx, v1::WatchRequest());
  ASSERT_TRUE(hub_.WaitForSubscribers(1, std::chrono::seconds(30)));
  mgr_->health_sink().MarkGpuUnhealthy(GpuIndex(0), "GPU 0: xid 79");
  v1::ClearHealthResponse resp;
  ASSERT_TRUE(Clear(0, &resp).ok());
  v1::InstanceEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), "marked-unhealthy");
  EXPECT_TRUE(ev.instance().unhealthy());
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.reason(), "health-cleared");
  EXPECT_EQ(ev.from(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(ev.to(), v1::INSTANCE_STATE_ACTIVE);
  EXPECT_EQ(ev.instance().mig_uuid(), a.instances(0).instance().mig_uuid());
  EXPECT_FALSE(ev.instance().unhealthy());
  EXPECT_EQ(ev.instance().health_reason(), "");
  ctx.TryCancel();
}

}  // namespace
}  // namespace migd::api
