#include "cli/client.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "cli/connection.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/reply_tables.h"
#include "cli/status_view.h"

namespace migd::cli {
namespace {

using migd::v1::MigManager;

// Prints `message` in the chosen machine format, or `table` for kTable.
int Print(const ClientOptions& client, std::string_view command,
          const google::protobuf::Message& message, const std::string& table, std::ostream& out,
          std::ostream& err) {
  if (client.output == OutputFormat::kTable) {
    out << table;
    return kExitOk;
  }
  StatusOr<nlohmann::ordered_json> doc = ProtoToJson(message);
  if (!doc.ok()) {
    err << "migctl " << command << ": " << doc.status().message() << "\n";
    return kExitServerError;
  }
  out << FormatDocument(*doc, client.output);
  return kExitOk;
}

}  // namespace

bool UseColor(const ClientOptions& options) {
  switch (options.color) {
    case ColorMode::kAlways:
      return true;
    case ColorMode::kNever:
      return false;
    case ColorMode::kAuto:
      return options.stdout_is_tty && !options.no_color_env;
  }
  return false;
}

int RunStatus(const ClientOptions& client, const StatusOptions& options, std::ostream& out,
              std::ostream& err) {
  Connection conn(client);
  migd::v1::ListRequest list_request;
  if (options.gpu.has_value()) list_request.set_gpu(*options.gpu);
  migd::v1::ListResponse list;
  grpc::Status s = conn.Call(&MigManager::Stub::List, list_request, &list);
  if (!s.ok()) return ReportRpcError(client, "status", s, err);
  migd::v1::GetStatusResponse status;
  s = conn.Call(&MigManager::Stub::GetStatus, migd::v1::GetStatusRequest(), &status);
  if (!s.ok()) return ReportRpcError(client, "status", s, err);
  if (options.gpu.has_value()) {
    // GetStatus has no GPU filter; keep the picture's totals to the chosen GPU.
    auto* gpus = status.mutable_gpus();
    gpus->erase(std::remove_if(
                    gpus->begin(), gpus->end(),
                    [&](const migd::v1::GpuStatus& g) { return g.gpu().index() != *options.gpu; }),
                gpus->end());
  }
  if (client.output == OutputFormat::kTable) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    out << RenderStatus(
        list, status,
        RenderOptions{.color = UseColor(client), .width = client.width, .now_unix_ms = now_ms});
    return kExitOk;
  }
  StatusOr<nlohmann::ordered_json> status_doc = ProtoToJson(status);
  StatusOr<nlohmann::ordered_json> list_doc = ProtoToJson(list);
  if (!status_doc.ok() || !list_doc.ok()) {
    err << "migctl status: "
        << (status_doc.ok() ? list_doc.status() : status_doc.status()).message() << "\n";
    return kExitServerError;
  }
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  doc["status"] = *std::move(status_doc);
  doc["list"] = *std::move(list_doc);
  out << FormatDocument(doc, client.output);
  return kExitOk;
}

int RunList(const ClientOptions& client, const ListOptions& options, std::ostream& out,
            std::ostream& err) {
  migd::v1::ListRequest request;
  if (options.gpu.has_value()) request.set_gpu(*options.gpu);
  StatusOr<std::vector<migd::v1::InstanceState>> states = ParseStates(options.states);
  if (!states.ok()) {
    err << "migctl list: " << states.status().message() << "\n";
    return kExitUsage;
  }
  for (migd::v1::InstanceState st : *states) request.add_states(st);
  Connection conn(client);
  migd::v1::ListResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::List, request, &response);
  if (!s.ok()) return ReportRpcError(client, "list", s, err);
  return Print(client, "list", response, ListTable(response), out, err);
}

int RunAllocate(const ClientOptions& client, const AllocateOptions& options, std::ostream& out,
                std::ostream& err) {
  StatusOr<migd::v1::AllocateRequest> request = BuildAllocateRequest(options);
  if (!request.ok()) {
    err << "migctl allocate: " << request.status().message() << "\n";
    return kExitUsage;
  }
  Connection conn(client);
  migd::v1::AllocateResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Allocate, *request, &response);
  if (!s.ok()) return ReportRpcError(client, "allocate", s, err);
  return Print(client, "allocate", response, AllocateTable(response), out, err);
}

int RunRelease(const ClientOptions& client, const ReleaseOptions& options, std::ostream& out,
               std::ostream& err) {
  StatusOr<migd::v1::ReleaseRequest> request = BuildReleaseRequest(options);
  if (!request.ok()) {
    err << "migctl release: " << request.status().message() << "\n";
    return kExitUsage;
  }
  Connection conn(client);
  migd::v1::ReleaseResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Release, *request, &response);
  if (!s.ok()) return ReportRpcError(client, "release", s, err);
  return Print(client, "release", response, ReleaseTable(response), out, err);
}

int RunRemotePlan(const ClientOptions& client, const RemotePlanOptions& options, std::ostream& out,
                  std::ostream& err) {
  StatusOr<std::vector<migd::v1::InstanceSpec>> specs = ParseInstanceSpecs(options.items);
  if (!specs.ok()) {
    err << "migctl plan: " << specs.status().message()
        << " (or plan offline with --layout FILE, see docs/planner.md)\n";
    return kExitUsage;
  }
  migd::v1::PlanRequest request;
  for (migd::v1::InstanceSpec& s : *specs) *request.add_instances() = std::move(s);
  Connection conn(client);
  migd::v1::PlanResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Plan, request, &response);
  if (!s.ok()) return ReportRpcError(client, "plan", s, err);
  return Print(client, "plan", response, PlanTable(response), out, err);
}

int RunReclaim(const ClientOptions& client, const ReclaimOptions& options, std::ostream& out,
               std::ostream& err) {
  migd::v1::ReclaimRequest request;
  if (options.gpu.has_value()) request.set_gpu(*options.gpu);
  request.set_profile(options.profile);
  Connection conn(client);
  migd::v1::ReclaimResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::Reclaim, request, &response);
  if (!s.ok()) return ReportRpcError(client, "reclaim", s, err);
  const int rc = Print(client, "reclaim", response, ReclaimTable(response), out, err);
  if (rc != kExitOk) return rc;
  if (response.failed_size() > 0) {
    err << "migctl reclaim: " << response.failed_size()
        << " instance(s) could not be destroyed and are now Error; migd retries them (see its "
           "log)\n";
    return kExitServerError;
  }
  return kExitOk;
}

int RunHealthClear(const ClientOptions& client, const HealthClearOptions& options,
                   std::ostream& out, std::ostream& err) {
  migd::v1::ClearHealthRequest request;
  request.set_gpu(options.gpu);
  Connection conn(client);
  migd::v1::ClearHealthResponse response;
  const grpc::Status s = conn.Call(&MigManager::Stub::ClearHealth, request, &response);
  if (!s.ok()) return ReportRpcError(client, "health clear", s, err);
  return Print(client, "health clear", response, HealthClearTable(options.gpu, response), out,
               err);
}

}  // namespace migd::cli
