// File: k8s/podresources/testing/fake_pod_resources.h
//
// FakePodResources: kubelet's PodResources v1 service over real gRPC on a
// unix socket `<dir>/pod-resources/kubelet.sock` (the layout under a kubelet
// directory), for tests of the client, the owner source and the daemon.
// It serves List from a settable pod list and can fail the next calls with a
// chosen code, or stop (socket removed) to look like a restarting kubelet.
// Get and GetAllocatableResources answer UNIMPLEMENTED (feature gates off).
//
// Example:
//   testing::TempDir dir;
//   MIGD_ASSERT_OK_AND_ASSIGN(auto fake, k8s::FakePodResources::Start(dir.path()));
//   fake->SetPods({{.pod_namespace = "ns", .pod_name = "p", .containers = {...}}});
//   k8s::PodResourcesClient client({.socket_path = fake->socket_path()});
//
// Thread-safety: all methods are thread-safe.
#ifndef MIGD_K8S_PODRESOURCES_TESTING_FAKE_POD_RESOURCES_H_
#define MIGD_K8S_PODRESOURCES_TESTING_FAKE_POD_RESOURCES_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "k8s/podresources/client.h"

namespace migd::k8s {

class FakePodResources {
 public:
  // Creates <kubelet_dir>/pod-resources/ and serves on kubelet.sock there.
  static StatusOr<std::unique_ptr<FakePodResources>> Start(const std::string& kubelet_dir);
  ~FakePodResources();
  FakePodResources(const FakePodResources&) = delete;
  FakePodResources& operator=(const FakePodResources&) = delete;

  const std::string& socket_path() const;
  void SetPods(std::vector<PodResourcesEntry> pods);
  // The next `count` List calls fail with `code` (a grpc::StatusCode value).
  void FailNext(int count, int code);
  // Pods returned by the List calls after the first one (models a pod that
  // appears between two Lists); cleared by SetPods.
  void SetPodsAfterFirstCall(std::vector<PodResourcesEntry> pods);
  // List calls received (failed ones included).
  int list_calls() const;
  // Stops serving and removes the socket (kubelet gone); Restart serves again.
  void Stop();
  Status Restart();

 private:
  struct Impl;
  explicit FakePodResources(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace migd::k8s

#endif  // MIGD_K8S_PODRESOURCES_TESTING_FAKE_POD_RESOURCES_H_
