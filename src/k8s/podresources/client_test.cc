#include "k8s/podresources/client.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "k8s/podresources/testing/fake_pod_resources.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

PodResourcesEntry Pod(std::string ns, std::string name, std::string container, std::string resource,
                      std::vector<std::string> ids) {
  return PodResourcesEntry{.pod_namespace = std::move(ns),
                           .pod_name = std::move(name),
                           .containers = {ContainerEntry{.name = std::move(container),
                                                         .devices = {ContainerDevicesEntry{
                                                             .resource_name = std::move(resource),
                                                             .device_ids = std::move(ids)}}}}};
}

class PodResourcesClientTest : public ::testing::Test {
 protected:
  void SetUp() override { MIGD_ASSERT_OK_AND_ASSIGN(fake_, FakePodResources::Start(dir_.path())); }
  PodResourcesClientOptions Options(int attempts = 4) {
    return {.socket_path = fake_->socket_path(),
            .attempts = attempts,
            .initial_backoff = std::chrono::milliseconds(1)};
  }
  migd::testing::TempDir dir_;
  std::unique_ptr<FakePodResources> fake_;
};

TEST_F(PodResourcesClientTest, SocketPathIsInThePodResourcesDir) {
  EXPECT_EQ(PodResourcesSocketPath("/var/lib/kubelet/pod-resources"),
            "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(fake_->socket_path(), dir_.path() + "/pod-resources/kubelet.sock");
}

TEST_F(PodResourcesClientTest, ListReturnsPodsContainersAndDevices) {
  PodResourcesEntry two = Pod("ns", "b", "c1", "nvidia.com/gpu", {"GPU-1-0", "GPU-1-1"});
  two.containers.push_back(ContainerEntry{.name = "c2", .devices = {}});
  fake_->SetPods({Pod("ns", "a", "main", "nvidia.com/gpu", {"GPU-1-3"}), two});
  PodResourcesClient client(Options());
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<PodResourcesEntry> pods, client.List());
  EXPECT_THAT(pods, ElementsAre(Pod("ns", "a", "main", "nvidia.com/gpu", {"GPU-1-3"}), two));
}

TEST_F(PodResourcesClientTest, EmptyListIsOk) {
  PodResourcesClient client(Options());
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<PodResourcesEntry> pods, client.List());
  EXPECT_THAT(pods, IsEmpty());
}

TEST_F(PodResourcesClientTest, RetriesUnavailableAndRateLimit) {
  fake_->FailNext(1, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  PodResourcesClient client(Options());
  fake_->SetPods({Pod("ns", "a", "c", "r.io/x", {"1"})});
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<PodResourcesEntry> pods, client.List());
  EXPECT_EQ(pods.size(), 1u);
  EXPECT_EQ(fake_->list_calls(), 2);

  fake_->FailNext(2, static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  MIGD_ASSERT_OK_AND_ASSIGN(pods, client.List());
  EXPECT_EQ(pods.size(), 1u);
  EXPECT_EQ(fake_->list_calls(), 5);
}

TEST_F(PodResourcesClientTest, GivesUpAfterAttempts) {
  fake_->FailNext(10, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  PodResourcesClient client(Options(/*attempts=*/3));
  EXPECT_THAT(client.List(), StatusIs(StatusCode::kUnavailable, HasSubstr(fake_->socket_path())));
  EXPECT_EQ(fake_->list_calls(), 3);
}

TEST_F(PodResourcesClientTest, OtherErrorsAreNotRetried) {
  fake_->FailNext(1, static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  PodResourcesClient client(Options());
  EXPECT_THAT(client.List(), StatusIs(StatusCode::kPermissionDenied, HasSubstr("injected")));
  EXPECT_EQ(fake_->list_calls(), 1);
}

TEST_F(PodResourcesClientTest, MissingSocketIsUnavailable) {
  PodResourcesClient client({.socket_path = dir_.Join("nowhere/kubelet.sock"),
                             .attempts = 2,
                             .initial_backoff = std::chrono::milliseconds(1)});
  EXPECT_THAT(client.List(), StatusIs(StatusCode::kUnavailable, HasSubstr("is kubelet running")));
}

TEST_F(PodResourcesClientTest, OversizedResponseIsRejected) {
  std::vector<PodResourcesEntry> many;
  for (int i = 0; i < 100; ++i) {
    many.push_back(Pod("ns", "pod-" + std::to_string(i), "c", "nvidia.com/gpu", {"GPU-1-0"}));
  }
  fake_->SetPods(many);
  PodResourcesClientOptions options = Options(/*attempts=*/1);
  options.max_response_bytes = 512;
  PodResourcesClient client(options);
  EXPECT_THAT(client.List(), StatusIs(StatusCode::kResourceExhausted, ::testing::_));
}

TEST_F(PodResourcesClientTest, BadOptionsAreInvalidArgument) {
  PodResourcesClient relative({.socket_path = "pod-resources/kubelet.sock"});
  EXPECT_THAT(relative.List(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("absolute")));
  PodResourcesClientOptions zero = Options();
  zero.attempts = 0;
  PodResourcesClient no_attempts(zero);
  EXPECT_THAT(no_attempts.List(), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST_F(PodResourcesClientTest, ReconnectsAfterKubeletRestart) {
  PodResourcesClient client(Options());
  fake_->SetPods({Pod("ns", "a", "c", "r.io/x", {"1"})});
  MIGD_ASSERT_OK(client.List().status());
  fake_->Stop();
  EXPECT_THAT(client.List(), StatusIs(StatusCode::kUnavailable, ::testing::_));
  MIGD_ASSERT_OK(fake_->Restart());
  // The channel reconnects with backoff; generous attempts, no timing assumption.
  PodResourcesClientOptions options = Options(/*attempts=*/30);
  options.initial_backoff = std::chrono::milliseconds(50);
  PodResourcesClient patient(options);
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<PodResourcesEntry> pods, patient.List());
  EXPECT_EQ(pods.size(), 1u);
  // The first client's channel recovers as well.
  bool recovered = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!recovered && std::chrono::steady_clock::now() < deadline) recovered = client.List().ok();
  EXPECT_TRUE(recovered);
}

}  // namespace
}  // namespace migd::k8s
