// KubeClient against the fake API server (real HTTP on 127.0.0.1), and the
// config loaders.
#include "k8s/apiserver/kube_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/file_util.h"
#include "k8s/apiserver/testing/fake_api_server.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd::k8s {
namespace {

using ::migd::k8s::testing::FakeApiServer;
using ::migd::k8s::testing::MakePod;
using ::migd::k8s::testing::PodSpec;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json Pod(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& node) {
  PodSpec p;
  p.ns = ns;
  p.name = name;
  p.uid = uid;
  p.node = node;
  return MakePod(p);
}

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start());
    server_.AddPod(Pod("default", "a", "uid-a", "node-1"));
    server_.AddPod(Pod("default", "b", "uid-b", "node-2"));
    server_.AddPod(Pod("ml", "c", "uid-c", "node-1"));
    server_.AddNode("node-1", {{"keep", "1"}});
    KubeConfig c;
    c.server = server_.url();
    MIGD_ASSERT_OK_AND_ASSIGN(client_, KubeClient::Create(c));
  }

  FakeApiServer server_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(KubeClientTest, GetAndListPodsOfANode) {
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json pod, client_->GetPod("default", "a"));
  EXPECT_EQ(pod["kind"], "Pod");
  EXPECT_EQ(pod["metadata"]["uid"], "uid-a");
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json list, client_->ListPods("node-1"));
  EXPECT_EQ(list["kind"], "PodList");
  std::vector<std::string> names;
  for (const auto& p : list["items"]) names.push_back(p["metadata"]["name"]);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("a", "c"));
}

TEST_F(KubeClientTest, MergePatchSetsAndDeletesAndBumpsResourceVersion) {
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json pod, client_->GetPod("default", "a"));
  const std::string rv = pod["metadata"]["resourceVersion"];
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = rv;
  patch["metadata"]["annotations"]["x"] = "1";
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json out, client_->PatchPod("default", "a", patch));
  EXPECT_EQ(out["metadata"]["annotations"]["x"], "1");
  EXPECT_NE(out["metadata"]["resourceVersion"], rv);
  nlohmann::json del;
  del["metadata"]["annotations"]["x"] = nullptr;  // RFC 7386: null removes
  MIGD_ASSERT_OK(client_->PatchPod("default", "a", del).status());
  EXPECT_EQ(server_.PodAnnotation("default", "a", "x"), std::nullopt);
  // Nodes too; other annotations are kept.
  nlohmann::json np;
  np["metadata"]["annotations"]["hami.io/node-handshake"] = "Reported now";
  MIGD_ASSERT_OK(client_->PatchNode("node-1", np).status());
  EXPECT_EQ(server_.NodeAnnotation("node-1", "hami.io/node-handshake"), "Reported now");
  EXPECT_EQ(server_.NodeAnnotation("node-1", "keep"), "1");
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json node, client_->GetNode("node-1"));
  EXPECT_EQ(node["kind"], "Node");
}

TEST_F(KubeClientTest, StaleResourceVersionIsAbortedNamingUrlAndStatus) {
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::json pod, client_->GetPod("default", "a"));
  ASSERT_TRUE(server_.UpdatePod(
      "default", "a", [](nlohmann::json& p) { p["metadata"]["annotations"]["other"] = "writer"; }));
  nlohmann::json patch;
  patch["metadata"]["resourceVersion"] = pod["metadata"]["resourceVersion"];
  patch["metadata"]["annotations"]["x"] = "1";
  Status s = client_->PatchPod("default", "a", patch).status();
  EXPECT_THAT(s, StatusIs(StatusCode::kAborted, HasSubstr("HTTP 409 Conflict")));
  EXPECT_THAT(s, StatusIs(StatusCode::kAborted, HasSubstr("PATCH " + server_.url() +
                                                          "/api/v1/namespaces/default/pods/a")));
  EXPECT_THAT(s, StatusIs(StatusCode::kAborted, HasSubstr("the object has been modified")));
  EXPECT_EQ(server_.PodAnnotation("default", "a", "x"), std::nullopt);
  EXPECT_EQ(server_.conflicts(), 1);
}

TEST_F(KubeClientTest, HttpErrorsMapToCodes) {
  EXPECT_THAT(client_->GetPod("default", "nope").status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("HTTP 404 NotFound: pods \"nope\"")));
  EXPECT_THAT(client_->GetNode("node-9").status(), StatusIs(StatusCode::kNotFound, ::testing::_));
  server_.FailNext(1, 503);
  EXPECT_THAT(client_->ListPods("node-1").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("HTTP 503")));
  server_.FailNext(1, 403);
  EXPECT_THAT(client_->ListPods("node-1").status(),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("RBAC")));
  server_.FailNext(1, 422);
  EXPECT_THAT(client_->ListPods("node-1").status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  // The fake server refuses a non-merge-patch content type.
  EXPECT_THAT(client_->Request("PATCH", "/api/v1/nodes/node-1", "{}", "application/json").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("HTTP 415")));
  EXPECT_THAT(client_->Request("PATCH", "/api/v1/nodes/node-1", "{", "application/merge-patch+json")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("HTTP 400")));
}

TEST_F(KubeClientTest, BearerTokenIsSent) {
  server_.RequireToken("s3cret");
  EXPECT_THAT(client_->GetPod("default", "a").status(),
              StatusIs(StatusCode::kUnauthenticated, HasSubstr("HTTP 401")));
  KubeConfig c;
  c.server = server_.url();
  c.token = "s3cret";
  MIGD_ASSERT_OK_AND_ASSIGN(auto authed, KubeClient::Create(c));
  MIGD_EXPECT_OK(authed->GetPod("default", "a").status());
}

TEST_F(KubeClientTest, OversizedResponseIsResourceExhausted) {
  KubeConfig c;
  c.server = server_.url();
  c.max_response_bytes = 4096;
  MIGD_ASSERT_OK_AND_ASSIGN(auto small, KubeClient::Create(c));
  MIGD_EXPECT_OK(small->GetPod("default", "a").status());
  server_.SetListPadding(8192);
  EXPECT_THAT(small->ListPods("node-1").status(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("larger than 4096 bytes")));
}

TEST(KubeClientDownTest, UnreachableServerIsUnavailableNamingUrl) {
  FakeApiServer server;
  ASSERT_TRUE(server.Start());
  const std::string url = server.url();
  server.Stop();  // the port is now closed
  KubeConfig c;
  c.server = url;
  MIGD_ASSERT_OK_AND_ASSIGN(auto client, KubeClient::Create(c));
  EXPECT_THAT(client->ListPods("n").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("GET " + url + "/api/v1/pods")));
}

TEST(KubeClientCreateTest, RejectsBadServerUrl) {
  KubeConfig c;
  EXPECT_THAT(KubeClient::Create(c).status(), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  c.server = "ftp://x";
  EXPECT_THAT(KubeClient::Create(c).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("https:// or http://")));
}

TEST(InClusterConfigTest, ReadsServiceAccount) {
  migd::testing::TempDir dir;
  WriteFile(dir.Join("token"), "\t tok-123 \r\n");  // whitespace around the token is dropped
  WriteFile(dir.Join("ca.crt"), "PEM");
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig c, InClusterConfigFor("10.96.0.1", "443", dir.path()));
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.token, "tok-123");
  EXPECT_EQ(c.ca_file, dir.Join("ca.crt"));
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig v6, InClusterConfigFor("fd00::1", "6443", dir.path()));
  EXPECT_EQ(v6.server, "https://[fd00::1]:6443");
  // Through the environment.
  ::setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "8443", 1);
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig e, InClusterConfig(dir.path()));
  EXPECT_EQ(e.server, "https://10.0.0.1:8443");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THAT(InClusterConfig(dir.path()).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("not running in a pod")));
  ::unsetenv("KUBERNETES_SERVICE_PORT");
}

// The kubelet mounts a service account as symlinks into a timestamped
// directory (token -> ..data/token, ..data -> ..2026_11_29_...), swapped
// atomically on rotation: the token is read through them.
TEST(InClusterConfigTest, ReadsTheTokenThroughTheKubeletsSymlinks) {
  migd::testing::TempDir dir;
  std::filesystem::create_directory(dir.Join("..2026_11_29_13_00_00.123"));
  WriteFile(dir.Join("..2026_11_29_13_00_00.123/token"), "tok-rotated\n");
  std::filesystem::create_directory_symlink("..2026_11_29_13_00_00.123", dir.Join("..data"));
  std::filesystem::create_symlink("..data/token", dir.Join("token"));
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig c, InClusterConfigFor("10.96.0.1", "443", dir.path()));
  EXPECT_EQ(c.token, "tok-rotated");
}

TEST(InClusterConfigTest, MissingTokenFailsPrecondition) {
  migd::testing::TempDir dir;
  EXPECT_THAT(InClusterConfigFor("10.96.0.1", "443", dir.path()).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("service-account token")));
}

TEST(KubeconfigTest, CurrentContextWithTokenAndCaData) {
  migd::testing::TempDir dir;
  WriteFile(dir.Join("kubeconfig"), R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: other
  cluster: {server: "https://other:6443"}
- name: c1
  cluster:
    server: https://10.1.2.3:6443
    certificate-authority-data: UEVNLURBVEE=
contexts:
- name: prod
  context: {cluster: c1, user: u1}
- name: dev
  context: {cluster: other, user: u2}
users:
- name: u1
  user: {token: abc}
- name: u2
  user:
    client-certificate: certs/client.crt
    client-key: /abs/client.key
)");
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig c, LoadKubeconfig(dir.Join("kubeconfig")));
  EXPECT_EQ(c.server, "https://10.1.2.3:6443");
  EXPECT_EQ(c.ca_data, "PEM-DATA");
  EXPECT_EQ(c.token, "abc");
  MIGD_ASSERT_OK_AND_ASSIGN(KubeConfig d, LoadKubeconfig(dir.Join("kubeconfig"), "dev"));
  EXPECT_EQ(d.server, "https://other:6443");
  EXPECT_EQ(d.client_cert_file, dir.Join("certs/client.crt"));  // relative to the file
  EXPECT_EQ(d.client_key_file, "/abs/client.key");
  EXPECT_THAT(LoadKubeconfig(dir.Join("kubeconfig"), "nope").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("context 'nope' not found")));
}

TEST(KubeconfigTest, ErrorsNameTheProblem) {
  migd::testing::TempDir dir;
  EXPECT_THAT(LoadKubeconfig(dir.Join("missing")).status(),
              StatusIs(StatusCode::kNotFound, ::testing::_));
  WriteFile(dir.Join("a"), "clusters: []\n");
  EXPECT_THAT(LoadKubeconfig(dir.Join("a")).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no current-context")));
  WriteFile(dir.Join("b"), R"(current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: ""}}]
)");
  EXPECT_THAT(LoadKubeconfig(dir.Join("b")).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("server is empty")));
  WriteFile(dir.Join("c"), R"(current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://s"}}]
users: [{name: u, user: {exec: {command: aws}}}]
)");
  EXPECT_THAT(LoadKubeconfig(dir.Join("c")).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("exec/auth-provider")));
  WriteFile(dir.Join("d"), R"(current-context: x
contexts: [{name: x, context: {cluster: nope, user: u}}]
)");
  EXPECT_THAT(LoadKubeconfig(dir.Join("d")).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cluster 'nope'")));
  WriteFile(dir.Join("e"), "[not: a: mapping");
  EXPECT_THAT(LoadKubeconfig(dir.Join("e")).status(),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

// A throwaway PKI made with the openssl CLI: a CA, a server certificate for
// 127.0.0.1 and a client certificate, all signed by the CA. P-256 keys: an
// RSA key takes seconds to generate on a loaded 2-core machine.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Debian's openssl package, installed by scripts/install-deps.sh.
    ASSERT_EQ(::access("/usr/bin/openssl", X_OK), 0)
        << "/usr/bin/openssl is missing: run scripts/install-deps.sh (Debian package openssl)";
    WriteFile(dir_.Join("san.ext"), "subjectAltName=IP:127.0.0.1\n");
    Run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=migd-test-ca"});
    Run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", "other-ca.key", "-out", "other-ca.crt", "-days", "2", "-subj",
         "/CN=unrelated-ca"});
    for (const std::string who : {"server", "client"}) {
      Run({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           who + ".key", "-out", who + ".csr", "-subj", "/CN=" + who});
      std::vector<std::string> sign = {"x509",       "-req",   "-in",    who + ".csr",      "-CA",
                                       "ca.crt",     "-CAkey", "ca.key", "-CAcreateserial", "-out",
                                       who + ".crt", "-days",  "2"};
      if (who == "server") {
        sign.push_back("-extfile");
        sign.push_back("san.ext");
      }
      Run(sign);
    }
  }
  void Run(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/openssl");
    // openssl writes relative paths: run it from the temp dir via `cd`.
    std::string cmd = "cd '" + dir_.path() + "' &&";
    for (const auto& a : args) cmd += " '" + a + "'";
    migd::testing::CommandResult r = migd::testing::RunCommand({"/bin/sh", "-c", cmd}, dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string Path(const std::string& f) const { return dir_.Join(f); }

  migd::testing::TempDir dir_;
};

TEST_F(TlsTest, HttpsWithCaFileOrDataAndToken) {
  FakeApiServer server;
  ASSERT_TRUE(server.StartTls({Path("server.crt"), Path("server.key"), ""}));
  server.RequireToken("tok");
  server.AddNode("n1");
  KubeConfig c;
  c.server = server.url();
  c.token = "tok";
  c.ca_file = Path("ca.crt");
  MIGD_ASSERT_OK_AND_ASSIGN(auto with_file, KubeClient::Create(c));
  MIGD_EXPECT_OK(with_file->GetNode("n1").status());

  c.ca_file.clear();
  MIGD_ASSERT_OK_AND_ASSIGN(std::string pem, ReadFileToString(Path("ca.crt")));
  c.ca_data = pem;
  MIGD_ASSERT_OK_AND_ASSIGN(auto with_data, KubeClient::Create(c));
  MIGD_EXPECT_OK(with_data->GetNode("n1").status());

  // Without our CA the server is not trusted.
  c.ca_data.clear();
  c.ca_file = Path("other-ca.crt");
  MIGD_ASSERT_OK_AND_ASSIGN(auto untrusted, KubeClient::Create(c));
  EXPECT_THAT(untrusted->GetNode("n1").status(),
              StatusIs(StatusCode::kUnavailable, HasSubstr("GET " + server.url())));
  c.insecure_skip_tls_verify = true;
  MIGD_ASSERT_OK_AND_ASSIGN(auto insecure, KubeClient::Create(c));
  MIGD_EXPECT_OK(insecure->GetNode("n1").status());
}

TEST_F(TlsTest, ClientCertificateFromFilesOrData) {
  FakeApiServer server;
  ASSERT_TRUE(server.StartTls({Path("server.crt"), Path("server.key"), Path("ca.crt")}));
  server.AddNode("n1");
  KubeConfig c;
  c.server = server.url();
  c.ca_file = Path("ca.crt");
  MIGD_ASSERT_OK_AND_ASSIGN(auto anonymous, KubeClient::Create(c));
  EXPECT_THAT(anonymous->GetNode("n1").status(), StatusIs(StatusCode::kUnavailable, ::testing::_));

  c.client_cert_file = Path("client.crt");
  c.client_key_file = Path("client.key");
  MIGD_ASSERT_OK_AND_ASSIGN(auto with_files, KubeClient::Create(c));
  MIGD_EXPECT_OK(with_files->GetNode("n1").status());

  KubeConfig d;
  d.server = server.url();
  d.ca_file = Path("ca.crt");
  MIGD_ASSERT_OK_AND_ASSIGN(d.client_cert_data, ReadFileToString(Path("client.crt")));
  MIGD_ASSERT_OK_AND_ASSIGN(d.client_key_data, ReadFileToString(Path("client.key")));
  MIGD_ASSERT_OK_AND_ASSIGN(auto with_data, KubeClient::Create(d));
  MIGD_EXPECT_OK(with_data->GetNode("n1").status());
}

TEST(Base64Test, DecodesAndRejects) {
  EXPECT_EQ(*Base64Decode("aGVsbG8="), "hello");
  EXPECT_EQ(*Base64Decode("aGVs\nbG8"), "hello");
  EXPECT_THAT(Base64Decode("a$b").status(), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

TEST(UrlEncodeTest, EncodesReserved) {
  EXPECT_EQ(UrlEncode("spec.nodeName=a b"), "spec.nodeName%3Da%20b");
}

}  // namespace
}  // namespace migd::k8s
