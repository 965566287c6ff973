#include "k8s/testing/fake_kubelet.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "k8s/resource_name.h"

namespace migd::k8s::testing {
namespace {

constexpr std::chrono::seconds kCallTimeout{60};

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

}  // namespace

class FakeKubelet::Registration final : public v1beta1::Registration::Service {
 public:
  explicit Registration(FakeKubelet* owner) : owner_(owner) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    return owner_->HandleRegister(*request);
  }

 private:
  FakeKubelet* const owner_;
};

FakeKubelet::FakeKubelet(std::string plugin_dir, std::chrono::milliseconds dial_timeout)
    : plugin_dir_(std::move(plugin_dir)), dial_timeout_(dial_timeout) {}

FakeKubelet::~FakeKubelet() { Stop(); }

StatusOr<std::unique_ptr<FakeKubelet>> FakeKubelet::Start(const std::string& plugin_dir,
                                                          std::chrono::milliseconds dial_timeout) {
  std::unique_ptr<FakeKubelet> kubelet(new FakeKubelet(plugin_dir, dial_timeout));
  MutexLock lock(&kubelet->server_mu_);
  Status s = kubelet->Serve();
  if (!s.ok()) return s;
  return kubelet;
}

Status FakeKubelet::Serve() {
  std::error_code ec;
  std::filesystem::create_directories(plugin_dir_, ec);
  ::unlink(kubelet_socket().c_str());
  service_ = std::make_unique<Registration>(this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + kubelet_socket(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) return UnavailableError("FakeKubelet: cannot bind " + kubelet_socket());
  return OkStatus();
}

void FakeKubelet::StopServer() {
  if (server_ != nullptr) {
    server_->Shutdown(In(std::chrono::seconds(2)));
    server_.reset();
  }
  service_.reset();
  // The kubelet process is gone: so are its connections to the plugin.
  std::unique_ptr<Endpoint> endpoint;
  {
    MutexLock lock(&mu_);
    endpoint = std::move(endpoint_);
    ++stream_generation_;
    stream_open_ = false;
    cv_.SignalAll();
  }
  StopEndpoint(std::move(endpoint));
}

Status FakeKubelet::Restart(bool cleanup_plugin_sockets) {
  MutexLock lock(&server_mu_);
  StopServer();
  ::unlink(kubelet_socket().c_str());
  if (cleanup_plugin_sockets) {
    // CleanupPluginDirectory: socket files go, the checkpoint and
    // directories stay.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(plugin_dir_, ec)) {
      struct stat st {};
      if (::lstat(entry.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
        ::unlink(entry.path().c_str());
      }
    }
  }
  return Serve();
}

void FakeKubelet::Stop() {
  MutexLock lock(&server_mu_);
  StopServer();
  ::unlink(kubelet_socket().c_str());
}

void FakeKubelet::StopEndpoint(std::unique_ptr<Endpoint> endpoint) {
  if (endpoint == nullptr) return;
  if (endpoint->stream_context != nullptr) endpoint->stream_context->TryCancel();
  if (endpoint->stream_thread.joinable()) endpoint->stream_thread.join();
}

grpc::Status FakeKubelet::Validate(const v1beta1::RegisterRequest& request) {
  // kubelet's Register (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go)
  // returns plain Go errors, which gRPC answers as UNKNOWN, with the texts
  // of api.go's errUnsupportedVersion and errInvalidResourceName. It does not
  // check the endpoint: it joins it to the socket directory and dials.
  if (request.version() != "v1beta1") {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "requested API version \"" + request.version() +
                            "\" is not supported by kubelet. Supported version is [\"v1beta1\"]");
  }
  if (!CheckExtendedResourceName(request.resource_name()).ok()) {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "the ResourceName \"" + request.resource_name() + "\" is invalid");
  }
  return grpc::Status::OK;
}

StatusOr<std::unique_ptr<FakeKubelet::Endpoint>> FakeKubelet::Dial(
    const std::string& endpoint_name, v1beta1::DevicePluginOptions* options) {
  // kubelet's client.go dial (blocking, 10 s) and manager.go PluginConnected
  // (GetDevicePluginOptions); both failures fail Register.
  auto endpoint = std::make_unique<Endpoint>();
  const std::string path = plugin_dir_ + "/" + endpoint_name;
  endpoint->channel = grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials());
  if (!endpoint->channel->WaitForConnected(In(dial_timeout_))) {
    return Status(StatusCode::kUnknown,
                  "failed to dial device plugin: context deadline exceeded (" + path + ")");
  }
  endpoint->stub = v1beta1::DevicePlugin::NewStub(endpoint->channel);
  grpc::ClientContext context;
  context.set_deadline(In(dial_timeout_));
  const grpc::Status s =
      endpoint->stub->GetDevicePluginOptions(&context, v1beta1::Empty(), options);
  if (!s.ok()) {
    return Status(StatusCode::kUnknown,
                  "failed to get device plugin options: " + s.error_message());
  }
  return endpoint;
}

void FakeKubelet::OpenStream(Endpoint* ep, uint64_t generation) {
  ep->stream_context = std::make_unique<grpc::ClientContext>();
  ep->stream_thread = std::thread([this, ep, generation] {
    auto reader = ep->stub->ListAndWatch(ep->stream_context.get(), v1beta1::Empty());
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      MutexLock lock(&mu_);
      ++list_updates_;
      if (generation == stream_generation_) {
        stream_open_ = true;
        devices_.assign(response.devices().begin(), response.devices().end());
      }
      cv_.SignalAll();
    }
    reader->Finish().ok();
    MutexLock lock(&mu_);
    if (generation == stream_generation_) stream_open_ = false;
    cv_.SignalAll();
  });
}

grpc::Status FakeKubelet::HandleRegister(const v1beta1::RegisterRequest& request) {
  {
    MutexLock lock(&mu_);
    ++register_calls_;
    cv_.SignalAll();
    if (register_failure_) return *register_failure_;
  }
  if (grpc::Status s = Validate(request); !s.ok()) return s;

  MutexLock register_lock(&register_mu_);
  v1beta1::DevicePluginOptions options;
  StatusOr<std::unique_ptr<Endpoint>> endpoint = Dial(request.endpoint(), &options);
  if (!endpoint.ok()) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, std::string(endpoint.status().message()));
  }
  // A new registration of the resource replaces the endpoint (kubelet's
  // registerEndpoint), ending the old stream.
  std::unique_ptr<Endpoint> old;
  uint64_t generation;
  {
    MutexLock lock(&mu_);
    old = std::move(endpoint_);
    generation = ++stream_generation_;
    // Wait* helpers then see only lists from this registration's stream.
    devices_.clear();
    stream_open_ = false;
    cv_.SignalAll();
  }
  StopEndpoint(std::move(old));
  OpenStream(endpoint->get(), generation);
  MutexLock lock(&mu_);
  endpoint_ = std::move(*endpoint);
  registrations_.push_back(request);
  dialed_options_ = options;
  cv_.SignalAll();
  return grpc::Status::OK;
}

void FakeKubelet::SetRegisterFailure(std::optional<grpc::Status> status) {
  MutexLock lock(&mu_);
  register_failure_ = std::move(status);
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() const {
  MutexLock lock(&mu_);
  return registrations_;
}

int FakeKubelet::register_calls() const {
  MutexLock lock(&mu_);
  return register_calls_;
}

std::optional<v1beta1::DevicePluginOptions> FakeKubelet::dialed_options() const {
  MutexLock lock(&mu_);
  return dialed_options_;
}

std::vector<v1beta1::Device> FakeKubelet::devices() const {
  MutexLock lock(&mu_);
  return devices_;
}

int FakeKubelet::list_updates() const {
  MutexLock lock(&mu_);
  return list_updates_;
}

bool FakeKubelet::stream_open() const {
  MutexLock lock(&mu_);
  return stream_open_;
}

bool FakeKubelet::WaitFor(const std::function<bool()>& condition,
                          std::chrono::milliseconds timeout) const {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout, condition);
}

bool FakeKubelet::WaitForRegistration(int n, std::chrono::milliseconds timeout) const {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                     mu_) { return static_cast<int>(registrations_.size()) >= n; },
                 timeout);
}

bool FakeKubelet::WaitForDevices(
    const std::function<bool(const std::vector<v1beta1::Device>&)>& predicate,
    std::chrono::milliseconds timeout) const {
  return WaitFor(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stream_open_ && predicate(devices_); },
      timeout);
}

bool FakeKubelet::WaitForListUpdates(int n, std::chrono::milliseconds timeout) const {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return list_updates_ >= n; }, timeout);
}

bool FakeKubelet::WaitForStreamClosed(std::chrono::milliseconds timeout) const {
  return WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !stream_open_; }, timeout);
}

std::shared_ptr<grpc::Channel> FakeKubelet::CurrentChannel() const {
  MutexLock lock(&mu_);
  return endpoint_ == nullptr ? nullptr : endpoint_->channel;
}

grpc::Status FakeKubelet::AllocateRaw(const v1beta1::AllocateRequest& request,
                                      v1beta1::AllocateResponse* response) {
  auto channel = CurrentChannel();
  if (channel == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  }
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(kCallTimeout));
  return stub->Allocate(&context, request, response);
}

grpc::Status FakeKubelet::Allocate(const std::vector<std::string>& device_ids,
                                   v1beta1::ContainerAllocateResponse* response) {
  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();  // one container per call
  for (const std::string& id : device_ids) container->add_devices_ids(id);
  v1beta1::AllocateResponse all;
  grpc::Status s = AllocateRaw(request, &all);
  if (!s.ok()) return s;
  if (all.container_responses_size() != 1) {
    return grpc::Status(
        grpc::StatusCode::INTERNAL,
        "expected one container response, got " + std::to_string(all.container_responses_size()));
  }
  *response = all.container_responses(0);
  return s;
}

grpc::Status FakeKubelet::GetPreferredAllocation(const std::vector<std::string>& available,
                                                 const std::vector<std::string>& must_include,
                                                 int size, std::vector<std::string>* device_ids) {
  auto channel = CurrentChannel();
  if (channel == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  }
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  for (const std::string& id : available) container->add_available_deviceids(id);
  for (const std::string& id : must_include) container->add_must_include_deviceids(id);
  container->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse response;
  grpc::ClientContext context;
  context.set_deadline(In(kCallTimeout));
  grpc::Status s =
      v1beta1::DevicePlugin::NewStub(channel)->GetPreferredAllocation(&context, request, &response);
  if (!s.ok()) return s;
  if (response.container_responses_size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "expected one container response");
  }
  device_ids->assign(response.container_responses(0).deviceids().begin(),
                     response.container_responses(0).deviceids().end());
  return s;
}

grpc::Status FakeKubelet::PreStartContainer(const std::vector<std::string>& device_ids) {
  auto channel = CurrentChannel();
  if (channel == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no plugin registered");
  }
  v1beta1::PreStartContainerRequest request;
  for (const std::string& id : device_ids) request.add_devices_ids(id);
  v1beta1::PreStartContainerResponse response;
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(30)));  // kubelet's PreStart timeout
  return v1beta1::DevicePlugin::NewStub(channel)->PreStartContainer(&context, request, &response);
}

}  // namespace migd::k8s::testing
