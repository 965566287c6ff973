#include "k8s/dra/testing/fake_dra_kubelet.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "k8s.io/kubelet/pkg/apis/dra-health/v1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1beta1/api.grpc.pb.h"
#include "k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.grpc.pb.h"

namespace migd::k8s::dra::testing {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

template <typename Req>
void FillClaims(const std::vector<ClaimRequest>& claims, Req* req) {
  for (const ClaimRequest& c : claims) {
    auto* out = req->add_claims();
    out->set_namespace_(c.ns);
    out->set_name(c.name);
    out->set_uid(c.uid);
  }
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

grpc::Status NotRegistered(const std::string& driver) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "DRA driver " + driver + " is not registered");
}

// Calls `v1_call` when kubelet chose v1.DRAPlugin, else `beta_call`, whose
// response converts to v1 through the wire format (v1beta1 is v1 without
// field 5). kubelet's deadline is `timeout`.
template <typename V1Req, typename V1Resp, typename BetaReq, typename BetaResp>
grpc::Status CallService(
    const std::string& service, const std::shared_ptr<grpc::Channel>& channel,
    std::chrono::milliseconds timeout, const std::vector<ClaimRequest>& claims,
    grpc::Status (drav1::DRAPlugin::Stub::*v1_call)(grpc::ClientContext*, const V1Req&, V1Resp*),
    grpc::Status (drav1beta1::DRAPlugin::Stub::*beta_call)(grpc::ClientContext*, const BetaReq&,
                                                           BetaResp*),
    V1Resp* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  if (service == "v1.DRAPlugin") {
    V1Req req;
    FillClaims(claims, &req);
    return (drav1::DRAPlugin::NewStub(channel).get()->*v1_call)(&ctx, req, out);
  }
  BetaReq req;
  FillClaims(claims, &req);
  BetaResp resp;
  grpc::Status s = (drav1beta1::DRAPlugin::NewStub(channel).get()->*beta_call)(&ctx, req, &resp);
  if (s.ok()) out->ParseFromString(resp.SerializeAsString());
  return s;
}

}  // namespace

struct FakeDraKubelet::Plugin {
  RegisteredPlugin info;
  ino_t ino = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::ClientContext> health_ctx;
  std::thread health_thread;
};

StatusOr<std::unique_ptr<FakeDraKubelet>> FakeDraKubelet::Start(FakeDraKubeletOptions options) {
  std::unique_ptr<FakeDraKubelet> k(new FakeDraKubelet(std::move(options)));
  if (k->options_.on_start) k->options_.on_start();
  Status s = k->Discover();
  (void)s;  // no plugin yet is fine; errors are in refusals()
  return k;
}

FakeDraKubelet::~FakeDraKubelet() { DropAll(); }

Status FakeDraKubelet::Discover() {
  MutexLock rl(&register_mu_);
  std::error_code ec;
  Status first = OkStatus();
  std::vector<std::string> sockets;
  for (const auto& e : std::filesystem::recursive_directory_iterator(options_.registry_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockets.push_back(e.path().string());
  }
  std::sort(sockets.begin(), sockets.end());
  for (const std::string& socket : sockets) {
    struct stat st {};
    if (::lstat(socket.c_str(), &st) != 0) continue;
    bool known = false;
    std::shared_ptr<Plugin> replaced;
    {
      MutexLock l(&mu_);
      for (auto it = plugins_.begin(); it != plugins_.end(); ++it) {
        if ((*it)->info.socket != socket) continue;
        if ((*it)->ino == st.st_ino) {
          known = true;
        } else {
          replaced = *it;
          plugins_.erase(it);
        }
        break;
      }
    }
    if (replaced) {
      if (replaced->health_ctx) replaced->health_ctx->TryCancel();
      if (replaced->health_thread.joinable()) replaced->health_thread.join();
    }
    if (known) continue;
    Status s = RegisterSocket(socket);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

// Picks the DRA and health services as kubelet does; "" or the refusal.
std::string FakeDraKubelet::ChooseServices(RegisteredPlugin& info) const {
  for (const std::string& v : info.supported_versions) {
    if (Contains(options_.known_services, v)) {
      info.service = v;
      break;
    }
  }
  if (info.service.empty()) {
    return "none of services supported by the plugin are supported by the kubelet";
  }
  {
    MutexLock l(&mu_);
    for (const auto& other : plugins_) {
      if (other->info.name == info.name && other->info.endpoint == info.endpoint) {
        return "endpoint " + info.endpoint + " already registered for DRA driver plugin " +
               info.name;
      }
    }
  }
  switch (options_.health) {
    case HealthMode::kOff:
      break;
    case HealthMode::kAlways:
      info.health_service = "v1alpha1.DRAResourceHealth";
      break;
    case HealthMode::kAdvertised:
      for (const char* h : {"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}) {
        if (info.health_service.empty() && Contains(info.supported_versions, h)) {
          info.health_service = h;
        }
      }
      break;
  }
  return "";
}

Status FakeDraKubelet::RegisterSocket(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(Deadline(std::chrono::seconds(10)))) {
    return UnavailableError("cannot dial registration socket " + socket);
  }
  auto reg = ::pluginregistration::Registration::NewStub(channel);
  ::pluginregistration::PluginInfo info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options_.get_info_timeout));
    ::pluginregistration::InfoRequest req;
    grpc::Status s = reg->GetInfo(&ctx, req, &info);
    if (!s.ok()) return UnavailableError("GetInfo on " + socket + ": " + s.error_message());
  }
  auto refuse = [&](const std::string& error) -> Status {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(std::chrono::seconds(5)));
    ::pluginregistration::RegistrationStatus st;
    st.set_plugin_registered(false);
    st.set_error(error);
    ::pluginregistration::RegistrationStatusResponse resp;
    reg->NotifyRegistrationStatus(&ctx, st, &resp);
    MutexLock l(&mu_);
    refusals_.push_back(error);
    return FailedPreconditionError(error);
  };
  if (info.type() != "DRAPlugin") return refuse("plugin type " + info.type() + " is not DRAPlugin");
  auto p = std::make_shared<Plugin>();
  p->info.socket = socket;
  struct stat sock_stat {};
  if (::lstat(socket.c_str(), &sock_stat) == 0) p->ino = sock_stat.st_ino;
  p->info.name = info.name();
  p->info.endpoint = info.endpoint().empty() ? socket : info.endpoint();
  p->info.supported_versions.assign(info.supported_versions().begin(),
                                    info.supported_versions().end());
  if (p->info.supported_versions.empty()) {
    return refuse("empty list of supported gRPC services (aka supported versions)");
  }
  if (std::string error = ChooseServices(p->info); !error.empty()) return refuse(error);
  p->channel = grpc::CreateChannel("unix:" + p->info.endpoint, grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(std::chrono::seconds(5)));
    ::pluginregistration::RegistrationStatus ok;
    ok.set_plugin_registered(true);
    ::pluginregistration::RegistrationStatusResponse resp;
    grpc::Status s = reg->NotifyRegistrationStatus(&ctx, ok, &resp);
    if (!s.ok()) return UnavailableError("NotifyRegistrationStatus: " + s.error_message());
  }
  {
    MutexLock l(&mu_);
    plugins_.push_back(p);
    ++registrations_;
    cv_.SignalAll();
  }
  if (!p->info.health_service.empty()) StartHealth(*p);
  return OkStatus();
}

void FakeDraKubelet::StartHealth(Plugin& p) {
  p.health_ctx = std::make_unique<grpc::ClientContext>();
  grpc::ClientContext* ctx = p.health_ctx.get();
  const std::string driver = p.info.name;
  const bool v1 = p.info.health_service == "v1.DRAResourceHealth";
  std::shared_ptr<grpc::Channel> channel = p.channel;
  p.health_thread = std::thread([this, ctx, driver, v1, channel] {
    auto publish = [&](std::vector<::v1::DeviceHealth> list) {
      MutexLock l(&mu_);
      health_[driver] = std::move(list);
      ++health_updates_[driver];
      cv_.SignalAll();
    };
    if (v1) {
      auto stub = ::v1::DRAResourceHealth::NewStub(channel);
      auto reader = stub->NodeWatchResources(ctx, ::v1::NodeWatchResourcesRequest());
      ::v1::NodeWatchResourcesResponse resp;
      while (reader->Read(&resp)) publish({resp.devices().begin(), resp.devices().end()});
      reader->Finish();
    } else {
      auto stub = ::v1alpha1::DRAResourceHealth::NewStub(channel);
      auto reader = stub->NodeWatchResources(ctx, ::v1alpha1::NodeWatchResourcesRequest());
      ::v1alpha1::NodeWatchResourcesResponse resp;
      while (reader->Read(&resp)) {
        std::vector<::v1::DeviceHealth> list;
        for (const auto& d : resp.devices()) {
          // Field-identical messages: convert through the wire format.
          ::v1::DeviceHealth h;
          h.ParseFromString(d.SerializeAsString());
          list.push_back(std::move(h));
        }
        publish(std::move(list));
      }
      reader->Finish();
    }
  });
}

void FakeDraKubelet::DropAll() {
  std::vector<std::shared_ptr<Plugin>> old;
  {
    MutexLock l(&mu_);
    old.swap(plugins_);
  }
  for (auto& p : old) {
    if (p->health_ctx) p->health_ctx->TryCancel();
    if (p->health_thread.joinable()) p->health_thread.join();
  }
}

Status FakeDraKubelet::Restart() {
  DropAll();
  if (options_.on_start) options_.on_start();
  return Discover();
}

std::vector<RegisteredPlugin> FakeDraKubelet::plugins() const {
  MutexLock l(&mu_);
  std::vector<RegisteredPlugin> out;
  for (const auto& p : plugins_) out.push_back(p->info);
  return out;
}

int FakeDraKubelet::registrations() const {
  MutexLock l(&mu_);
  return registrations_;
}

std::vector<std::string> FakeDraKubelet::refusals() const {
  MutexLock l(&mu_);
  return refusals_;
}

std::shared_ptr<FakeDraKubelet::Plugin> FakeDraKubelet::Find(const std::string& driver) const {
  MutexLock l(&mu_);
  // The most recent registration of the driver (kubelet's heuristic).
  for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) {
    if ((*it)->info.name == driver) return *it;
  }
  return nullptr;
}

grpc::Status FakeDraKubelet::Prepare(const std::string& driver,
                                     const std::vector<ClaimRequest>& claims,
                                     drav1::NodePrepareResourcesResponse* out) {
  std::shared_ptr<Plugin> p = Find(driver);
  if (p == nullptr) return NotRegistered(driver);
  return CallService(p->info.service, p->channel, options_.call_timeout, claims,
                     &drav1::DRAPlugin::Stub::NodePrepareResources,
                     &drav1beta1::DRAPlugin::Stub::NodePrepareResources, out);
}

grpc::Status FakeDraKubelet::Unprepare(const std::string& driver,
                                       const std::vector<ClaimRequest>& claims,
                                       drav1::NodeUnprepareResourcesResponse* out) {
  std::shared_ptr<Plugin> p = Find(driver);
  if (p == nullptr) return NotRegistered(driver);
  return CallService(p->info.service, p->channel, options_.call_timeout, claims,
                     &drav1::DRAPlugin::Stub::NodeUnprepareResources,
                     &drav1beta1::DRAPlugin::Stub::NodeUnprepareResources, out);
}

std::vector<::v1::DeviceHealth> FakeDraKubelet::health(const std::string& driver) const {
  MutexLock l(&mu_);
  auto it = health_.find(driver);
  return it == health_.end() ? std::vector<::v1::DeviceHealth>{} : it->second;
}

int FakeDraKubelet::health_updates(const std::string& driver) const {
  MutexLock l(&mu_);
  auto it = health_updates_.find(driver);
  return it == health_updates_.end() ? 0 : it->second;
}

bool FakeDraKubelet::WaitForHealth(
    const std::string& driver,
    const std::function<bool(const std::vector<::v1::DeviceHealth>&)>& pred,
    std::chrono::milliseconds timeout) const {
  MutexLock l(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = health_.find(driver);
    return it != health_.end() && pred(it->second);
  });
}

bool FakeDraKubelet::WaitForHealthUpdates(const std::string& driver, int n,
                                          std::chrono::milliseconds timeout) const {
  MutexLock l(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = health_updates_.find(driver);
    return it != health_updates_.end() && it->second >= n;
  });
}

}  // namespace migd::k8s::dra::testing
