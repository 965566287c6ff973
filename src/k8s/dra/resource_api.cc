#include "k8s/dra/resource_api.h"

#include <cstdlib>

#include "base/json_reader.h"
#include "base/status_macros.h"

namespace migd::k8s::dra {
namespace {

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kJson[] = "application/json";

StatusOr<int> VersionPart(const JsonReader& r, std::string_view key) {
  MIGD_ASSIGN_OR_RETURN(std::string text, r.String(key));
  // "35+" on some distributions.
  int v = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && i < 6; ++i)
    v = v * 10 + (text[i] - '0');
  if (i == 0) return r.ExpectedAt(key, "a version number");
  return v;
}

}  // namespace

StatusOr<ServerVersion> ResourceApi::Version() {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json doc, client_->Request("GET", "/version"));
  JsonReader r(doc, "GET /version", StatusCode::kDataLoss);
  ServerVersion v;
  MIGD_ASSIGN_OR_RETURN(v.major, VersionPart(r, "major"));
  MIGD_ASSIGN_OR_RETURN(v.minor, VersionPart(r, "minor"));
  MIGD_ASSIGN_OR_RETURN(v.git_version, r.OptionalString("gitVersion"));
  return v;
}

StatusOr<nlohmann::json> ResourceApi::ListSlices(const std::string& driver,
                                                 const std::string& node) {
  const std::string path = std::string(kSlices) + "?fieldSelector=" +
                           UrlEncode("spec.driver=" + driver + ",spec.nodeName=" + node);
  MIGD_ASSIGN_OR_RETURN(nlohmann::json list, client_->Request("GET", path));
  JsonReader r(list, "GET " + path, StatusCode::kDataLoss);
  MIGD_RETURN_IF_ERROR(r.ExpectObject());
  if (!r.Has("items")) return nlohmann::json::array();
  MIGD_RETURN_IF_ERROR(r.Child("items").ExpectArray());
  return list["items"];
}

StatusOr<nlohmann::json> ResourceApi::CreateSlice(const nlohmann::json& slice) {
  return client_->Request("POST", kSlices, slice.dump(), kJson);
}

StatusOr<nlohmann::json> ResourceApi::UpdateSlice(const nlohmann::json& slice) {
  const std::string name = slice["metadata"]["name"].get<std::string>();
  return client_->Request("PUT", std::string(kSlices) + "/" + UrlEncode(name), slice.dump(), kJson);
}

Status ResourceApi::DeleteSlice(const std::string& name) {
  StatusOr<nlohmann::json> r =
      client_->Request("DELETE", std::string(kSlices) + "/" + UrlEncode(name));
  if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
  return OkStatus();
}

StatusOr<nlohmann::json> ResourceApi::GetClaim(const std::string& ns, const std::string& name) {
  return client_->Request("GET", "/apis/resource.k8s.io/v1/namespaces/" + UrlEncode(ns) +
                                     "/resourceclaims/" + UrlEncode(name));
}

StatusOr<std::string> ResourceApi::NodeUid(const std::string& node) {
  MIGD_ASSIGN_OR_RETURN(nlohmann::json n, client_->GetNode(node));
  JsonReader r(n, "GET node " + node, StatusCode::kDataLoss);
  MIGD_ASSIGN_OR_RETURN(JsonReader meta, r.Object("metadata"));
  return meta.String("uid");
}

}  // namespace migd::k8s::dra
