#include "k8s/deviceplugin/device_plugin_server.h"

#include <errno.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/status_macros.h"
#include "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.grpc.pb.h"
#include "k8s/resource_name.h"

namespace migd::k8s {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kVersion[] = "v1beta1";
constexpr char kHealthy[] = "Healthy";
constexpr char kUnhealthy[] = "Unhealthy";
// How often blocked handlers look at their call's cancellation: gRPC's sync
// API has no cancellation callback for them.
constexpr std::chrono::milliseconds kCancelPoll{100};
// How long in-flight calls get when our server stops or restarts.
constexpr std::chrono::seconds kShutdownGrace{2};

std::string Errno(int err) { return std::strerror(err); }

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(s.code())),
                      std::string(s.message()));
}

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) {
    if (!out.empty()) out += ",";
    out += id;
  }
  return out;
}

v1beta1::ListAndWatchResponse ToResponse(const std::vector<AdvertisedDevice>& devices) {
  v1beta1::ListAndWatchResponse response;
  for (const AdvertisedDevice& d : devices) {
    v1beta1::Device* device = response.add_devices();
    device->set_id(d.id);
    device->set_health(d.healthy ? kHealthy : kUnhealthy);
    if (d.numa_node) device->mutable_topology()->add_nodes()->set_id(*d.numa_node);
  }
  return response;
}

void FillContainerResponse(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse* r) {
  for (const std::string& name : a.cdi_devices) r->add_cdi_devices()->set_name(name);
  for (const auto& [key, value] : a.envs) (*r->mutable_envs())[key] = value;
  for (const cdi::LegacyDeviceNode& node : a.device_nodes) {
    v1beta1::DeviceSpec* spec = r->add_devices();
    spec->set_container_path(node.container_path);
    spec->set_host_path(node.host_path);
    spec->set_permissions(node.permissions);
  }
  for (const auto& [key, value] : a.annotations) (*r->mutable_annotations())[key] = value;
}

Status ValidateOptions(const DevicePluginOptions& o) {
  if (o.plugin_dir.empty() || o.plugin_dir.front() != '/') {
    return InvalidArgumentError("device plugin directory '" + o.plugin_dir +
                                "' is not an absolute path");
  }
  for (const std::string* name : {&o.socket_name, &o.kubelet_socket_name}) {
    if (name->empty() || name->find('/') != std::string::npos || *name == "." || *name == "..") {
      return InvalidArgumentError("socket name '" + *name + "' must be a plain file name inside " +
                                  o.plugin_dir);
    }
  }
  if (o.socket_name == o.kubelet_socket_name) {
    return InvalidArgumentError("the plugin socket cannot be named like kubelet's (" +
                                o.kubelet_socket_name + ")");
  }
  const std::string path = o.plugin_dir + "/" + o.socket_name;
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return InvalidArgumentError("socket path " + path + " exceeds the unix socket limit of " +
                                std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
  }
  // kubelet's own rule (Register: v1helper.IsExtendedResourceName).
  MIGD_RETURN_IF_ERROR(CheckExtendedResourceName(o.resource_name));
  using std::chrono::milliseconds;
  if (o.allocate_timeout <= milliseconds(0) || o.register_timeout <= milliseconds(0) ||
      o.register_retry_initial <= milliseconds(0) ||
      o.register_retry_max < o.register_retry_initial || o.watch_period <= milliseconds(0) ||
      o.list_refresh_period <= milliseconds(0)) {
    return InvalidArgumentError(
        "device plugin timeouts and periods must be positive, and register_retry_max >= "
        "register_retry_initial");
  }
  return OkStatus();
}

// One backend Allocate running on its own thread so the handler can give up
// at the deadline.
struct BackendCall {
  Mutex mu;
  CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  bool abandoned ABSL_GUARDED_BY(mu) = false;
  std::optional<StatusOr<ContainerAllocation>> result ABSL_GUARDED_BY(mu);
};

}  // namespace

// Shared with the backend's devices-changed callback, which may outlive the
// server; hence a shared_ptr.
struct DevicePluginServer::Notifier {
  Mutex mu;
  CondVar cv;
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;  // bumped per backend change
  uint64_t epoch ABSL_GUARDED_BY(mu) = 0;       // bumped when streams must end
  void Notify() ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    ++generation;
    cv.SignalAll();
  }
};

// The DevicePlugin service of one served socket. A fresh one per (re)start,
// so streams of an old socket end with it (epoch).
class DevicePluginServer::Service final : public v1beta1::DevicePlugin::Service {
 public:
  Service(DevicePluginServer* owner, uint64_t epoch) : owner_(owner), epoch_(epoch) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* response) override {
    response->set_pre_start_required(owner_->options_.pre_start_required);
    response->set_get_preferred_allocation_available(
        owner_->options_.get_preferred_allocation_available);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    Notifier& n = *owner_->notifier_;
    uint64_t seen;
    {
      MutexLock lock(&n.mu);
      seen = n.generation;
    }
    std::vector<AdvertisedDevice> last = owner_->backend_->Devices();
    if (!writer->Write(ToResponse(last))) return grpc::Status::OK;  // kubelet went away
    spdlog::info("ListAndWatch stream opened{}", Fields().Add("devices", last.size()));
    const auto period = owner_->options_.list_refresh_period;
    Clock::time_point next_refresh = Clock::now() + period;
    while (true) {
      bool changed = false;
      {
        MutexLock lock(&n.mu);
        const Clock::time_point until = std::min(next_refresh, Clock::now() + kCancelPoll);
        while (n.generation == seen && n.epoch == epoch_) {
          if (!n.cv.WaitUntil(&n.mu, until)) break;  // refresh or cancellation check due
        }
        if (n.epoch != epoch_) return grpc::Status::OK;  // server stopping or restarting
        if (n.generation != seen) {
          seen = n.generation;
          changed = true;
        }
      }
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      const bool refresh = Clock::now() >= next_refresh;
      if (!changed && !refresh) continue;
      if (refresh) next_refresh = Clock::now() + period;
      std::vector<AdvertisedDevice> devices = owner_->backend_->Devices();
      if (!changed && devices == last) continue;
      last = std::move(devices);
      if (!writer->Write(ToResponse(last))) return grpc::Status::OK;
    }
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    if (!owner_->options_.get_preferred_allocation_available) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "GetPreferredAllocation is disabled in this plugin's options");
    }
    for (const auto& creq : request->container_requests()) {
      std::vector<std::string> available(creq.available_deviceids().begin(),
                                         creq.available_deviceids().end());
      std::vector<std::string> must(creq.must_include_deviceids().begin(),
                                    creq.must_include_deviceids().end());
      StatusOr<std::vector<std::string>> ids =
          owner_->backend_->PreferredAllocation(available, must, creq.allocation_size());
      if (!ids.ok()) return ToGrpc(ids.status());
      auto* cresp = response->add_container_responses();
      for (const std::string& id : *ids) cresp->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    if (request->container_requests_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "Allocate without container requests");
    }
    const Clock::time_point deadline = Clock::now() + owner_->options_.allocate_timeout;
    for (const auto& creq : request->container_requests()) {
      std::vector<std::string> ids(creq.devices_ids().begin(), creq.devices_ids().end());
      if (ids.empty()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "Allocate: a container request names no devices");
      }
      StatusOr<ContainerAllocation> allocation = AllocateBounded(ids, deadline, context);
      if (!allocation.ok()) {
        spdlog::warn(
            "Allocate failed{}",
            Fields().Add("devices", JoinIds(ids)).Add("error", allocation.status().ToString()));
        return ToGrpc(allocation.status());
      }
      FillContainerResponse(*allocation, response->add_container_responses());
      spdlog::info(
          "Allocate{}",
          Fields().Add("devices", JoinIds(ids)).Add("cdi", JoinIds(allocation->cdi_devices)));
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    if (!owner_->options_.pre_start_required) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "PreStartContainer is disabled in this plugin's options");
    }
    // Nothing to prepare: Allocate already realised the instances and their
    // CDI specs.
    return grpc::Status::OK;
  }

 private:
  // Runs the backend call on its own thread; gives up at `deadline` or when
  // kubelet cancels (the call then finishes in the background, see header).
  StatusOr<ContainerAllocation> AllocateBounded(const std::vector<std::string>& ids,
                                                Clock::time_point deadline,
                                                grpc::ServerContext* context) {
    auto call = std::make_shared<BackendCall>();
    DevicePluginServer* owner = owner_;
    {
      MutexLock lock(&owner->mu_);
      ++owner->inflight_backend_calls_;
    }
    std::thread([owner, call, ids] {
      StatusOr<ContainerAllocation> result = owner->backend_->AllocateContainer(ids);
      bool abandoned;
      {
        MutexLock lock(&call->mu);
        abandoned = call->abandoned;
        if (abandoned) {
          spdlog::warn(
              "abandoned Allocate finished; kubelet's retry will see its effect{}",
              Fields().Add("devices", JoinIds(ids)).Add("result", result.status().ToString()));
        }
        call->result.emplace(std::move(result));
        call->done = true;
        call->cv.SignalAll();
      }
      // Notify under the lock: Stop() may destroy the owner as soon as it
      // sees zero, so nothing may touch `owner` after this block.
      MutexLock lock(&owner->mu_);
      --owner->inflight_backend_calls_;
      owner->inflight_cv_.SignalAll();
    }).detach();

    MutexLock lock(&call->mu);
    while (!call->done) {
      if (context->IsCancelled()) {
        call->abandoned = true;
        return CancelledError("Allocate for devices " + JoinIds(ids) +
                              " was cancelled by kubelet; the allocation continues in the "
                              "background");
      }
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        call->abandoned = true;
        return DeadlineExceededError(
            "Allocate for devices " + JoinIds(ids) + " did not finish within " +
            std::to_string(owner->options_.allocate_timeout.count()) +
            " ms; the allocation continues in the background and kubelet's retry reuses its "
            "result; check migd's log for the slow step");
      }
      call->cv.WaitUntil(&call->mu, std::min(deadline, now + kCancelPoll));
    }
    return std::move(*call->result);
  }

  DevicePluginServer* const owner_;
  const uint64_t epoch_;
};

DevicePluginServer::DevicePluginServer(DevicePluginOptions options, AllocationBackend* backend)
    : options_(std::move(options)), backend_(backend), notifier_(std::make_shared<Notifier>()) {}

DevicePluginServer::~DevicePluginServer() { Stop(); }

std::string DevicePluginServer::socket_path() const {
  return options_.plugin_dir + "/" + options_.socket_name;
}

std::string DevicePluginServer::kubelet_socket_path() const {
  return options_.plugin_dir + "/" + options_.kubelet_socket_name;
}

int DevicePluginServer::registrations() const {
  MutexLock lock(&mu_);
  return registrations_;
}

int DevicePluginServer::serves() const {
  MutexLock lock(&mu_);
  return serves_;
}

Status DevicePluginServer::last_register_status() const {
  MutexLock lock(&mu_);
  return last_register_status_;
}

DevicePluginServer::FileId DevicePluginServer::Identify(const std::string& path) {
  struct stat st {};
  FileId id;
  if (::lstat(path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

StatusOr<std::unique_ptr<DevicePluginServer>> DevicePluginServer::Start(
    DevicePluginOptions options, AllocationBackend* backend) {
  if (backend == nullptr) return InvalidArgumentError("device plugin: no allocation backend");
  MIGD_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<DevicePluginServer> server(new DevicePluginServer(std::move(options), backend));
  backend->SetDevicesChangedCallback(
      [notifier = std::shared_ptr<Notifier>(server->notifier_)] { notifier->Notify(); });
  MIGD_RETURN_IF_ERROR(server->Serve());

  server->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->wake_fd_ < 0) {
    const int err = errno;
    server->StopServing();
    return InternalError("eventfd: " + Errno(err));
  }
  server->inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (server->inotify_fd_ < 0) {
    // The stat() fallback still notices kubelet restarts, a period later.
    spdlog::warn("inotify unavailable; watching the device plugin directory by polling{}",
                 Fields().Add("error", Errno(errno)));
  }
  server->watcher_ = std::thread([s = server.get()] { s->WatchLoop(); });
  return server;
}

Status DevicePluginServer::Serve() {
  MutexLock lock(&serve_mu_);
  const std::string path = socket_path();
  std::error_code ec;
  std::filesystem::create_directories(options_.plugin_dir, ec);
  if (ec) {
    return FailedPreconditionError("cannot create the device plugin directory " +
                                   options_.plugin_dir + ": " + ec.message());
  }
  // Our socket name is ours alone: an existing socket is a leftover of an
  // earlier migd (kubelet-apis.md §1.4 "remove a stale file first").
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPreconditionError(path +
                                     " exists and is not a socket; remove it or choose "
                                     "another device plugin socket name");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return FailedPreconditionError("cannot remove the stale socket " + path + ": " +
                                     Errno(errno));
    }
  }
  uint64_t epoch;
  {
    MutexLock nlock(&notifier_->mu);
    epoch = notifier_->epoch;
  }
  auto service = std::make_unique<Service>(this, epoch);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return UnavailableError("cannot listen on unix:" + path + " (gRPC bind failed)");
  }
  service_ = std::move(service);
  server_ = std::move(server);
  our_socket_ = Identify(path);
  int serves;
  {
    MutexLock mlock(&mu_);
    serves = ++serves_;
  }
  spdlog::info(
      "device plugin serving{}",
      Fields().Add("socket", path).Add("resource", options_.resource_name).Add("serve", serves));
  return OkStatus();
}

void DevicePluginServer::StopServing() {
  MutexLock lock(&serve_mu_);
  {
    MutexLock nlock(&notifier_->mu);
    ++notifier_->epoch;
    notifier_->cv.SignalAll();
  }
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_.reset();
  }
  service_.reset();
  // Only remove the file we bound: a new kubelet may have cleaned it up and
  // another process may own the name now.
  const std::string path = socket_path();
  if (our_socket_.exists && Identify(path) == our_socket_) ::unlink(path.c_str());
  our_socket_ = FileId{};
}

Status DevicePluginServer::Register() {
  auto channel =
      grpc::CreateChannel("unix://" + kubelet_socket_path(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.register_timeout);
  {
    MutexLock lock(&mu_);
    if (stopping_) return CancelledError("device plugin stopping");
    register_ctx_ = &context;
  }
  v1beta1::RegisterRequest request;
  request.set_version(kVersion);
  request.set_endpoint(options_.socket_name);
  request.set_resource_name(options_.resource_name);
  request.mutable_options()->set_pre_start_required(options_.pre_start_required);
  request.mutable_options()->set_get_preferred_allocation_available(
      options_.get_preferred_allocation_available);
  v1beta1::Empty response;
  const grpc::Status s = stub->Register(&context, request, &response);
  Status result;
  if (!s.ok()) {
    result = Status(static_cast<StatusCode>(static_cast<int>(s.error_code())),
                    "Register with kubelet at " + kubelet_socket_path() + ": " + s.error_message());
  }
  MutexLock lock(&mu_);
  register_ctx_ = nullptr;
  last_register_status_ = result;
  if (result.ok()) ++registrations_;
  return result;
}

struct DevicePluginServer::WatchState {
  std::string kubelet_path;
  std::string our_path;
  int wd = -1;  // inotify watch of the plugin directory; -1 = not armed
  FileId kubelet_seen;
  bool need_restart = false;
  bool need_register = true;
  std::chrono::milliseconds backoff{0};
  Clock::time_point next_attempt;

  void Retry(const DevicePluginOptions& o) {
    next_attempt = Clock::now() + backoff;
    backoff = std::min(backoff * 2, o.register_retry_max);
  }
  void Reset(const DevicePluginOptions& o) {
    backoff = o.register_retry_initial;
    next_attempt = Clock::now();
  }
};

void DevicePluginServer::WatchLoop() {
  WatchState w;
  w.kubelet_path = kubelet_socket_path();
  w.our_path = socket_path();
  w.kubelet_seen = Identify(w.kubelet_path);
  w.Reset(options_);
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) break;
    }
    if (inotify_fd_ >= 0 && w.wd < 0) {
      // (Re-)arm: the directory may not exist yet or may have been replaced.
      w.wd = ::inotify_add_watch(
          inotify_fd_, options_.plugin_dir.c_str(),
          IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF);
    }
    WatchRound(&w);
    WatchWait(&w);
  }
}

void DevicePluginServer::WatchRound(WatchState* w) {
  // Detect kubelet restarts and the loss of our socket by file identity.
  const FileId kubelet_now = Identify(w->kubelet_path);
  if (kubelet_now.exists && !(kubelet_now == w->kubelet_seen)) {
    if (w->kubelet_seen.exists || !w->need_register) {
      spdlog::info("kubelet.sock recreated (kubelet restarted); re-registering{}",
                   Fields().Add("path", w->kubelet_path));
    }
    w->kubelet_seen = kubelet_now;
    w->need_restart = w->need_register = true;
    w->Reset(options_);
  }
  {
    MutexLock lock(&serve_mu_);
    if (!w->need_restart && !(Identify(w->our_path) == our_socket_)) {
      spdlog::info("device plugin socket removed or replaced; restarting and re-registering{}",
                   Fields().Add("path", w->our_path));
      w->need_restart = w->need_register = true;
      w->Reset(options_);
    }
  }
  if (w->need_restart && Clock::now() >= w->next_attempt) {
    StopServing();
    const Status s = Serve();
    if (s.ok()) {
      w->need_restart = false;
    } else {
      spdlog::error("cannot serve the device plugin socket; retrying{}",
                    Fields().Add("error", s.ToString()).Add("retry_ms", w->backoff.count()));
      w->Retry(options_);
    }
  }
  if (w->need_restart || !w->need_register || Clock::now() < w->next_attempt) return;
  const FileId kubelet_before = Identify(w->kubelet_path);
  const Status s = Register();
  if (s.ok()) {
    w->need_register = false;
    if (kubelet_before.exists) w->kubelet_seen = kubelet_before;
    w->backoff = options_.register_retry_initial;
    spdlog::info(
        "registered with kubelet{}",
        Fields().Add("resource", options_.resource_name).Add("endpoint", options_.socket_name));
    return;
  }
  if (s.code() != StatusCode::kCancelled) {
    spdlog::warn("device plugin registration failed; retrying{}",
                 Fields().Add("error", s.ToString()).Add("retry_ms", w->backoff.count()));
  }
  w->Retry(options_);
}

void DevicePluginServer::WatchWait(WatchState* w) {
  auto timeout = options_.watch_period;
  if (w->need_restart || w->need_register) {
    const auto until_retry =
        std::chrono::duration_cast<std::chrono::milliseconds>(w->next_attempt - Clock::now());
    timeout = std::clamp(until_retry, std::chrono::milliseconds(0), timeout);
  }
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int nfds = inotify_fd_ >= 0 ? 2 : 1;
  const int rc = ::poll(fds, nfds, static_cast<int>(timeout.count()));
  if (rc <= 0 || nfds != 2 || !(fds[1].revents & POLLIN)) return;
  alignas(inotify_event) char buf[4096];
  ssize_t n;
  while ((n = ::read(inotify_fd_, buf, sizeof(buf))) > 0) {
    for (char* p = buf; p < buf + n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(p);
      if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
        if (w->wd >= 0) ::inotify_rm_watch(inotify_fd_, w->wd);
        w->wd = -1;
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  // The events only wake us up; WatchRound's identity checks decide.
}

void DevicePluginServer::Stop() {
  std::call_once(stop_once_, [this] {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      if (register_ctx_ != nullptr) register_ctx_->TryCancel();
    }
    if (wake_fd_ >= 0) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof(one));
    }
    if (watcher_.joinable()) watcher_.join();
    StopServing();
    {
      // Abandoned Allocate calls still use the backend; wait for them so
      // the caller may destroy it after Stop.
      MutexLock lock(&mu_);
      inflight_cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return inflight_backend_calls_ == 0;
      });
    }
    if (inotify_fd_ >= 0) ::close(inotify_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    inotify_fd_ = wake_fd_ = -1;
    spdlog::info("device plugin stopped{}", Fields().Add("socket", socket_path()));
  });
}

}  // namespace migd::k8s
