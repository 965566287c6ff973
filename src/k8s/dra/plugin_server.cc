#include "k8s/dra/plugin_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/logging.h"
#include "base/status_macros.h"
#include "k8s.io/kubelet/pkg/apis/dra-health/v1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1beta1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.grpc.pb.h"

namespace migd::k8s::dra {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// PluginInfo.type for DRA (k8s.io/kubelet pluginregistration/v1 constants.go).
constexpr char kDraPluginType[] = "DRAPlugin";
// supported_versions entries (dra/v1 and dra/v1beta1 types.go
// DRAPluginService; dra-health v1 and v1alpha1 DRAResourceHealthService).
constexpr char kDraV1[] = "v1.DRAPlugin";
constexpr char kDraV1beta1[] = "v1beta1.DRAPlugin";
constexpr char kHealthV1[] = "v1.DRAResourceHealth";
constexpr char kHealthV1alpha1[] = "v1alpha1.DRAResourceHealth";
// How often a health stream looks at its call's cancellation (the sync API
// has no cancellation callback).
constexpr std::chrono::milliseconds kCancelPoll{100};
constexpr std::chrono::seconds kShutdownGrace{2};
// kubelet truncates longer messages (dra-health api.proto).
constexpr size_t kMaxHealthMessage = 1024;

std::string Errno(int err) { return std::strerror(err); }

Status ValidateOptions(const DraPluginOptions& o) {
  if (o.driver.empty()) return InvalidArgumentError("the DRA driver name is required");
  for (const std::string* dir : {&o.registry_dir, &o.plugin_dir}) {
    if (dir->empty() || dir->front() != '/') {
      return InvalidArgumentError("DRA plugin directory '" + *dir + "' is not an absolute path");
    }
  }
  for (const std::string* name : {&o.registration_socket_name, &o.dra_socket_name}) {
    if (name->empty() || name->find('/') != std::string::npos || name->front() == '.') {
      return InvalidArgumentError("socket name '" + *name +
                                  "' must be a plain file name not starting with '.' (kubelet's "
                                  "plugin watcher ignores those)");
    }
  }
  for (const std::string& path : {o.registry_dir + "/" + o.registration_socket_name,
                                  o.plugin_dir + "/" + o.dra_socket_name}) {
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return InvalidArgumentError("socket path " + path + " exceeds the unix socket limit of " +
                                  std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes");
    }
  }
  if (o.watch_period.count() <= 0 || o.health_heartbeat.count() <= 0) {
    return InvalidArgumentError("DRA plugin watch period and health heartbeat must be positive");
  }
  return OkStatus();
}

template <typename E>
E ToProto(Health h) {
  switch (h) {
    case Health::kHealthy:
      return E::HEALTHY;
    case Health::kUnhealthy:
      return E::UNHEALTHY;
    default:
      return E::UNKNOWN;
  }
}

template <typename Response>
void FillHealth(const std::vector<DeviceHealthReport>& reports, Response* out) {
  using HealthEnum = decltype(out->devices(0).health());
  for (const DeviceHealthReport& r : reports) {
    auto* d = out->add_devices();
    d->mutable_device()->set_pool_name(r.pool);
    d->mutable_device()->set_device_name(r.device);
    d->set_health(ToProto<HealthEnum>(r.health));
    d->set_last_updated_time(r.updated_unix_s);
    d->set_message(r.message.size() > kMaxHealthMessage ? r.message.substr(0, kMaxHealthMessage)
                                                        : r.message);
  }
}

template <typename Request, typename Response>
void PrepareAll(ClaimHandler& handler, const Request& request, Response* response) {
  for (const auto& c : request.claims()) {
    const std::string key = c.uid().empty() ? c.name() : c.uid();
    auto& entry = (*response->mutable_claims())[key];
    if (c.uid().empty() || c.namespace_().empty() || c.name().empty()) {
      entry.set_error("claim " + c.namespace_() + "/" + c.name() +
                      ": namespace, name and uid are required");
      continue;
    }
    StatusOr<std::vector<PreparedDevice>> devices =
        handler.Prepare({c.namespace_(), c.name(), c.uid()});
    if (!devices.ok()) {
      entry.set_error(std::string(devices.status().message()));
      continue;
    }
    for (const PreparedDevice& d : *devices) {
      auto* out = entry.add_devices();
      out->add_request_names(d.request);
      out->set_pool_name(d.pool);
      out->set_device_name(d.device);
      for (const std::string& id : d.cdi_ids) out->add_cdi_device_ids(id);
    }
  }
}

template <typename Request, typename Response>
void UnprepareAll(ClaimHandler& handler, const Request& request, Response* response) {
  for (const auto& c : request.claims()) {
    const std::string key = c.uid().empty() ? c.name() : c.uid();
    auto& entry = (*response->mutable_claims())[key];
    if (c.uid().empty()) {
      entry.set_error("claim " + c.namespace_() + "/" + c.name() + ": uid is required");
      continue;
    }
    Status s = handler.Unprepare({c.namespace_(), c.name(), c.uid()});
    if (!s.ok()) entry.set_error(std::string(s.message()));
  }
}

// Removes a stale socket at `path`; an error for anything else there.
Status ClearSocketPath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPreconditionError(path +
                                   " exists and is not a socket; remove it or choose "
                                   "another DRA plugin directory");
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FailedPreconditionError("cannot remove the stale socket " + path + ": " + Errno(errno));
  }
  return OkStatus();
}

}  // namespace

// pluginregistration.Registration on the registration socket.
class DraPluginServer::Registration final : public ::pluginregistration::Registration::Service {
 public:
  explicit Registration(DraPluginServer* s) : s_(s) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type(kDraPluginType);
    info->set_name(s_->options_.driver);
    info->set_endpoint(s_->dra_socket());
    for (const std::string& v : s_->supported_versions()) info->add_supported_versions(v);
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
      ::pluginregistration::RegistrationStatusResponse*) override {
    if (!status->plugin_registered()) {
      {
        MutexLock l(&s_->mu_);
        ++s_->rejections_;
      }
      spdlog::error("kubelet refused the DRA plugin registration{}",
                    Fields().Add("driver", s_->options_.driver).Add("error", status->error()));
      return grpc::Status::OK;
    }
    int n;
    {
      MutexLock l(&s_->mu_);
      n = ++s_->registrations_;
    }
    spdlog::info("registered with kubelet as DRA plugin{}",
                 Fields().Add("driver", s_->options_.driver).Add("registration", n));
    if (s_->on_registered_) s_->on_registered_();
    return grpc::Status::OK;
  }

 private:
  DraPluginServer* const s_;
};

// The services of the DRA socket.
class DraPluginServer::Dra {
 public:
  explicit Dra(DraPluginServer* s) : v1_(s), v1beta1_(s), health_v1_(s), health_v1alpha1_(s) {}
  void Register(grpc::ServerBuilder& b, bool health) {
    b.RegisterService(&v1_);
    b.RegisterService(&v1beta1_);
    if (health) {
      b.RegisterService(&health_v1_);
      b.RegisterService(&health_v1alpha1_);
    }
  }

 private:
  class V1 final : public drav1::DRAPlugin::Service {
   public:
    explicit V1(DraPluginServer* s) : s_(s) {}
    grpc::Status NodePrepareResources(grpc::ServerContext*,
                                      const drav1::NodePrepareResourcesRequest* req,
                                      drav1::NodePrepareResourcesResponse* resp) override {
      PrepareAll(*s_->handler_, *req, resp);
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                        const drav1::NodeUnprepareResourcesRequest* req,
                                        drav1::NodeUnprepareResourcesResponse* resp) override {
      UnprepareAll(*s_->handler_, *req, resp);
      return grpc::Status::OK;
    }

   private:
    DraPluginServer* const s_;
  };
  class V1beta1 final : public drav1beta1::DRAPlugin::Service {
   public:
    explicit V1beta1(DraPluginServer* s) : s_(s) {}
    grpc::Status NodePrepareResources(grpc::ServerContext*,
                                      const drav1beta1::NodePrepareResourcesRequest* req,
                                      drav1beta1::NodePrepareResourcesResponse* resp) override {
      PrepareAll(*s_->handler_, *req, resp);
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                        const drav1beta1::NodeUnprepareResourcesRequest* req,
                                        drav1beta1::NodeUnprepareResourcesResponse* resp) override {
      UnprepareAll(*s_->handler_, *req, resp);
      return grpc::Status::OK;
    }

   private:
    DraPluginServer* const s_;
  };
  template <typename Service, typename Request, typename Response>
  class HealthService final : public Service {
   public:
    explicit HealthService(DraPluginServer* s) : s_(s) {}
    grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const Request*,
                                    grpc::ServerWriter<Response>* writer) override {
      s_->StreamHealth(
          [writer](const std::vector<DeviceHealthReport>& reports) {
            Response response;
            FillHealth(reports, &response);
            return writer->Write(response);
          },
          [ctx] { return ctx->IsCancelled(); });
      return grpc::Status::OK;
    }

   private:
    DraPluginServer* const s_;
  };

  V1 v1_;
  V1beta1 v1beta1_;
  HealthService<::v1::DRAResourceHealth::Service, ::v1::NodeWatchResourcesRequest,
                ::v1::NodeWatchResourcesResponse>
      health_v1_;
  HealthService<::v1alpha1::DRAResourceHealth::Service, ::v1alpha1::NodeWatchResourcesRequest,
                ::v1alpha1::NodeWatchResourcesResponse>
      health_v1alpha1_;
};

DraPluginServer::DraPluginServer(DraPluginOptions options, ClaimHandler* handler, HealthFeed health,
                                 std::function<void()> on_registered)
    : options_(std::move(options)),
      handler_(handler),
      health_(health),
      on_registered_(std::move(on_registered)) {}

StatusOr<std::unique_ptr<DraPluginServer>> DraPluginServer::Start(
    DraPluginOptions options, ClaimHandler* handler, HealthFeed health,
    std::function<void()> on_registered) {
  if (options.plugin_dir.empty()) {
    options.plugin_dir = std::string(kDefaultPluginsDir) + "/" + options.driver;
  }
  if (options.registration_socket_name.empty()) {
    options.registration_socket_name = options.driver + "-reg.sock";
  }
  MIGD_RETURN_IF_ERROR(ValidateOptions(options));
  if (handler == nullptr) return InvalidArgumentError("the DRA plugin needs a claim handler");
  for (const std::string& dir : {options.registry_dir, options.plugin_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return FailedPreconditionError("cannot create " + dir + ": " + ec.message());
  }
  if (health.source != nullptr && !health.reports) {
    return InvalidArgumentError("a DRA health source needs a device report function");
  }
  DeviceHealthSource* source = health.source;
  std::unique_ptr<DraPluginServer> s(new DraPluginServer(
      std::move(options), handler, std::move(health), std::move(on_registered)));
  if (source != nullptr) {
    DraPluginServer* raw = s.get();
    s->health_listener_ = source->AddListener([raw] { raw->HealthChanged(); });
  }
  {
    MutexLock l(&s->serve_mu_);
    // The DRA socket first: kubelet dials it right after registration.
    MIGD_RETURN_IF_ERROR(s->ServeDra());
    MIGD_RETURN_IF_ERROR(s->ServeRegistration());
  }
  s->watcher_ = std::thread([raw = s.get()] { raw->WatchLoop(); });
  return s;
}

DraPluginServer::~DraPluginServer() { Stop(); }

std::string DraPluginServer::registration_socket() const {
  return options_.registry_dir + "/" + options_.registration_socket_name;
}
std::string DraPluginServer::dra_socket() const {
  return options_.plugin_dir + "/" + options_.dra_socket_name;
}

std::vector<std::string> DraPluginServer::supported_versions() const {
  std::vector<std::string> v = {kDraV1, kDraV1beta1};
  if (has_health()) {
    v.push_back(kHealthV1);
    v.push_back(kHealthV1alpha1);
  }
  return v;
}

int DraPluginServer::registrations() const {
  MutexLock l(&mu_);
  return registrations_;
}
int DraPluginServer::rejections() const {
  MutexLock l(&mu_);
  return rejections_;
}
int DraPluginServer::registration_serves() const {
  MutexLock l(&mu_);
  return registration_serves_;
}
int DraPluginServer::dra_serves() const {
  MutexLock l(&mu_);
  return dra_serves_;
}

Status DraPluginServer::ServeDra() {
  const std::string path = dra_socket();
  MIGD_RETURN_IF_ERROR(ClearSocketPath(path));
  dra_service_ = std::make_unique<Dra>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  dra_service_->Register(b, has_health());
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr) return UnavailableError("cannot listen on unix:" + path);
  struct stat st {};
  ::lstat(path.c_str(), &st);
  dra_ = {std::move(server), st.st_dev, st.st_ino};
  int n;
  {
    MutexLock l(&mu_);
    n = ++dra_serves_;
  }
  spdlog::info("DRA plugin serving{}", Fields().Add("socket", path).Add("serve", n));
  return OkStatus();
}

Status DraPluginServer::ServeRegistration() {
  const std::string path = registration_socket();
  MIGD_RETURN_IF_ERROR(ClearSocketPath(path));
  registration_service_ = std::make_unique<Registration>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(registration_service_.get());
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr) return UnavailableError("cannot listen on unix:" + path);
  struct stat st {};
  ::lstat(path.c_str(), &st);
  registration_ = {std::move(server), st.st_dev, st.st_ino};
  int n;
  {
    MutexLock l(&mu_);
    n = ++registration_serves_;
  }
  spdlog::info("DRA plugin registration socket serving{}",
               Fields().Add("socket", path).Add("driver", options_.driver).Add("serve", n));
  return OkStatus();
}

bool DraPluginServer::StillOurs(const Served& s, const std::string& path) const {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  return S_ISSOCK(st.st_mode) && st.st_dev == s.dev && st.st_ino == s.ino;
}

void DraPluginServer::Shutdown(Served& s, const std::string& path) {
  if (s.server == nullptr) return;
  s.server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  s.server.reset();
  if (StillOurs(s, path)) ::unlink(path.c_str());
  s = Served{};
}

void DraPluginServer::HealthChanged() {
  MutexLock l(&mu_);
  ++health_generation_;
  cv_.SignalAll();
}

void DraPluginServer::StreamHealth(
    const std::function<bool(const std::vector<DeviceHealthReport>&)>& write,
    const std::function<bool()>& cancelled) {
  uint64_t sent_generation = 0;
  {
    MutexLock l(&mu_);
    sent_generation = health_generation_;
  }
  while (true) {
    if (!write(health_.reports())) return;  // kubelet went away
    const auto heartbeat = std::chrono::steady_clock::now() + options_.health_heartbeat;
    while (true) {
      if (cancelled()) return;
      MutexLock l(&mu_);
      if (stopping_) return;
      if (health_generation_ != sent_generation) {
        sent_generation = health_generation_;
        break;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= heartbeat) break;
      cv_.WaitUntil(&mu_, std::min(heartbeat, now + kCancelPoll));
    }
  }
}

void DraPluginServer::WatchLoop() {
  while (true) {
    {
      MutexLock l(&mu_);
      cv_.WaitFor(&mu_, options_.watch_period,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
      if (stopping_) return;
    }
    MutexLock l(&serve_mu_);
    if (!StillOurs(dra_, dra_socket())) {
      spdlog::warn("DRA socket gone or replaced; serving it again{}",
                   Fields().Add("socket", dra_socket()));
      Shutdown(dra_, dra_socket());
      if (Status s = ServeDra(); !s.ok()) {
        spdlog::error("cannot serve the DRA socket{}", Fields().Add("error", s));
      }
    }
    if (!StillOurs(registration_, registration_socket())) {
      spdlog::warn("DRA registration socket gone or replaced; serving it again{}",
                   Fields().Add("socket", registration_socket()));
      Shutdown(registration_, registration_socket());
      if (Status s = ServeRegistration(); !s.ok()) {
        spdlog::error("cannot serve the DRA registration socket{}", Fields().Add("error", s));
      }
    }
  }
}

void DraPluginServer::Stop() {
  {
    MutexLock l(&mu_);
    if (stopping_ && !watcher_.joinable()) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  if (watcher_.joinable()) watcher_.join();
  if (has_health() && health_listener_ != 0) {
    health_.source->RemoveListener(health_listener_);
    health_listener_ = 0;
  }
  MutexLock l(&serve_mu_);
  // Registration first: kubelet should stop seeing us before the DRA socket goes.
  Shutdown(registration_, registration_socket());
  Shutdown(dra_, dra_socket());
}

}  // namespace migd::k8s::dra
