#include "k8s/testing/fake_kubelet.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>

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
  std::lock_guard<std::mutex> lock(kubelet->server_mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    endpoint = std::move(endpoint_);
    ++stream_generation_;
    stream_open_ = false;
  }
  cv_.notify_all();
  StopEndpoint(std::move(endpoint));
}

Status FakeKubelet::Restart(bool cleanup_plugin_sockets) {
  std::lock_guard<std::mutex> lock(server_mu_);
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
  std::lock_guard<std::mutex> lock(server_mu_);
  StopServer();
  ::unlink(kubelet_socket().c_str());
}

void FakeKubelet::StopEndpoint(std::unique_ptr<Endpoint> endpoint) {
  if (endpoint == nullptr) return;
  if (endpoint->stream_context != nullptr) endpoint->stream_context->TryCancel();
  if (endpoint->stream_thread.joinable()) endpoint->stream_thread.join();
}

grpc::Status FakeKubelet::HandleRegister(const v1beta1::RegisterRequest& request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++register_calls_;
    if (register_failure_) {
      cv_.notify_all();
      return *register_failure_;
    }
  }
  cv_.notify_all();
  // kubelet's validation (plugin/v1beta1/server.go).
  if (request.version() != "v1beta1") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unsupported device plugin version " + request.version());
  }
  const std::string& name = request.resource_name();
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
      name.substr(0, slash) == "kubernetes.io") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "invalid extended resource name " + name);
  }
  if (request.endpoint().empty() || request.endpoint().find('/') != std::string::npos) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "endpoint must be a socket file name, got '" + request.endpoint() + "'");
  }

  std::lock_guard<std::mutex> register_lock(register_mu_);
  // Dial back synchronously, inside Register, as kubelet does.
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->channel = grpc::CreateChannel("unix://" + plugin_dir_ + "/" + request.endpoint(),
                                          grpc::InsecureChannelCredentials());
  if (!endpoint->channel->WaitForConnected(In(dial_timeout_))) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "cannot dial the plugin at " + request.endpoint());
  }
  endpoint->stub = v1beta1::DevicePlugin::NewStub(endpoint->channel);
  v1beta1::DevicePluginOptions options;
  {
    grpc::ClientContext context;
    context.set_deadline(In(dial_timeout_));
    grpc::Status s = endpoint->stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options);
    if (!s.ok()) {
      return grpc::Status(s.error_code(), "GetDevicePluginOptions: " + s.error_message());
    }
  }

  // Open ListAndWatch and keep the latest list.
  endpoint->stream_context = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<Endpoint> old;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(endpoint_);
    generation = ++stream_generation_;
    // Wait* helpers then see only lists from this registration's stream.
    devices_.clear();
    stream_open_ = false;
  }
  cv_.notify_all();
  StopEndpoint(std::move(old));
  Endpoint* ep = endpoint.get();
  ep->stream_thread = std::thread([this, ep, generation] {
    auto reader = ep->stub->ListAndWatch(ep->stream_context.get(), v1beta1::Empty());
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      std::lock_guard<std::mutex> lock(mu_);
      ++list_updates_;
      if (generation == stream_generation_) {
        stream_open_ = true;
        devices_.assign(response.devices().begin(), response.devices().end());
      }
      cv_.notify_all();
    }
    reader->Finish().ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (generation == stream_generation_) stream_open_ = false;
    cv_.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint_ = std::move(endpoint);
    registrations_.push_back(request);
    dialed_options_ = options;
  }
  cv_.notify_all();
  return grpc::Status::OK;
}

void FakeKubelet::SetRegisterFailure(std::optional<grpc::Status> status) {
  std::lock_guard<std::mutex> lock(mu_);
  register_failure_ = std::move(status);
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

int FakeKubelet::register_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return register_calls_;
}

std::optional<v1beta1::DevicePluginOptions> FakeKubelet::dialed_options() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dialed_options_;
}

std::vector<v1beta1::Device> FakeKubelet::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return devices_;
}

int FakeKubelet::list_updates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return list_updates_;
}

bool FakeKubelet::stream_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_open_;
}

bool FakeKubelet::WaitFor(const std::function<bool()>& condition,
                          std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, condition);
}

bool FakeKubelet::WaitForRegistration(int n, std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return static_cast<int>(registrations_.size()) >= n; }, timeout);
}

bool FakeKubelet::WaitForDevices(
    const std::function<bool(const std::vector<v1beta1::Device>&)>& predicate,
    std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return stream_open_ && predicate(devices_); }, timeout);
}

bool FakeKubelet::WaitForListUpdates(int n, std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return list_updates_ >= n; }, timeout);
}

bool FakeKubelet::WaitForStreamClosed(std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return !stream_open_; }, timeout);
}

std::shared_ptr<grpc::Channel> FakeKubelet::CurrentChannel() const {
  std::lock_guard<std::mutex> lock(mu_);
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
