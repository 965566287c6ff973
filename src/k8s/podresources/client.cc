#include "k8s/podresources/client.h"

#include <grpcpp/grpcpp.h>

#include <thread>
#include <utility>

#include "k8s.io/kubelet/pkg/apis/podresources/v1/api.grpc.pb.h"

namespace migd::k8s {
namespace {

bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

PodResourcesEntry FromProto(const ::v1::PodResources& pod) {
  PodResourcesEntry out;
  out.pod_namespace = pod.namespace_();
  out.pod_name = pod.name();
  for (const ::v1::ContainerResources& c : pod.containers()) {
    ContainerEntry container;
    container.name = c.name();
    for (const ::v1::ContainerDevices& d : c.devices()) {
      container.devices.push_back(
          ContainerDevicesEntry{.resource_name = d.resource_name(),
                                .device_ids = {d.device_ids().begin(), d.device_ids().end()}});
    }
    out.containers.push_back(std::move(container));
  }
  return out;
}

}  // namespace

std::string PodResourcesSocketPath(const std::string& pod_resources_dir) {
  return pod_resources_dir + "/kubelet.sock";
}

struct PodResourcesClient::Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<::v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(PodResourcesClientOptions options)
    : options_(std::move(options)) {}

PodResourcesClient::~PodResourcesClient() = default;

StatusOr<std::vector<PodResourcesEntry>> PodResourcesClient::List() {
  if (options_.socket_path.empty() || options_.socket_path[0] != '/') {
    return InvalidArgumentError("pod-resources socket path must be absolute, got \"" +
                                options_.socket_path + "\"");
  }
  if (options_.attempts < 1 || options_.max_response_bytes < 1 ||
      options_.call_timeout.count() <= 0) {
    return InvalidArgumentError(
        "pod-resources client: attempts, max_response_bytes and "
        "call_timeout must be positive");
  }
  std::shared_ptr<Channel> ch;
  {
    MutexLock lock(&mu_);
    if (!channel_) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(options_.max_response_bytes);
      // kubelet's server checks :authority loosely; "localhost" is what its
      // own clients send over unix sockets.
      args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "localhost");
      // kubelet recreates the socket when it restarts; reconnect promptly
      // rather than after gRPC's default 1 s..120 s backoff.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
      auto c = std::make_shared<Channel>();
      c->channel = grpc::CreateCustomChannel("unix://" + options_.socket_path,
                                             grpc::InsecureChannelCredentials(), args);
      c->stub = ::v1::PodResourcesLister::NewStub(c->channel);
      channel_ = std::move(c);
    }
    ch = channel_;
  }

  std::chrono::milliseconds backoff = options_.initial_backoff;
  grpc::Status last;
  for (int attempt = 1; attempt <= options_.attempts; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    ::v1::ListPodResourcesRequest request;
    ::v1::ListPodResourcesResponse response;
    last = ch->stub->List(&context, request, &response);
    if (last.ok()) {
      std::vector<PodResourcesEntry> out;
      out.reserve(response.pod_resources_size());
      for (const ::v1::PodResources& pod : response.pod_resources()) out.push_back(FromProto(pod));
      return out;
    }
    if (!Retryable(last.error_code()) || attempt == options_.attempts) break;
    std::this_thread::sleep_for(backoff);  // backoff between attempts, not synchronisation
    backoff *= 2;
  }
  std::string message = "kubelet pod-resources socket " + options_.socket_path + ": List failed (" +
                        std::to_string(options_.attempts) +
                        " attempts max): " + last.error_message();
  if (last.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message += " (is kubelet running, and is its pod-resources directory mounted into migd?)";
  }
  return Status(static_cast<StatusCode>(last.error_code()), message);
}

}  // namespace migd::k8s
