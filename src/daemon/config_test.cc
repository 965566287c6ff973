#include "daemon/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::daemon {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

StatusOr<Config> Parse(const std::string& yaml) { return ParseConfig(yaml, "migd.yaml"); }

// kubernetes.nodeName defaults to $NODE_NAME; the tests control it (a CI pod
// may have it set).
class NoNodeNameEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ::unsetenv("NODE_NAME"); }
};
const ::testing::Environment* const kNoNodeName =
    ::testing::AddGlobalTestEnvironment(new NoNodeNameEnvironment);

// The full message of a config that must fail.
std::string ErrorOf(const std::string& yaml) {
  StatusOr<Config> c = Parse(yaml);
  EXPECT_FALSE(c.ok()) << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(""));
  EXPECT_EQ(c, Config{});
  MIGD_ASSERT_OK_AND_ASSIGN(Config comments, Parse("# nothing here\n\n# still nothing\n"));
  EXPECT_EQ(comments, Config{});
}

TEST(ConfigTest, DefaultsAreTheDocumentedOnes) {
  const Config c;
  EXPECT_EQ(c.state_dir, "/var/lib/migd");
  EXPECT_EQ(c.api.socket, "/run/migd/api.socket");
  EXPECT_EQ(c.api.socket_mode, 0600u);
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9400");
  EXPECT_EQ(c.nvml.library, "libnvidia-ml.so.1");
  EXPECT_TRUE(c.cdi.enabled);
  EXPECT_EQ(c.cdi.spec_dir, "/var/run/cdi");
  EXPECT_EQ(c.cdi.vendor, "hami.io");
  EXPECT_EQ(c.cdi.device_class, "mig");
  EXPECT_FALSE(c.lifecycle.idle_ttl.has_value());
  EXPECT_FALSE(c.lifecycle.max_idle_per_gpu.has_value());
  EXPECT_EQ(c.lifecycle.reconcile_interval, std::chrono::seconds(30));
  EXPECT_EQ(c.lifecycle.demand_half_life, std::chrono::hours(1));
  EXPECT_FALSE(c.adopt_existing_mig_instances);
  EXPECT_THAT(c.mig_profile_allowlist, IsEmpty());
  EXPECT_EQ(c.log.level, "info");
  EXPECT_THAT(ValidateConfig(c, "defaults"), IsOk());
}

TEST(ConfigTest, ParsesEveryKey) {
  const std::string yaml = R"(
stateDir: /srv/migd
api:
  socket: /run/m/api.socket
  socketMode: "0660"
  socketGroup: gpu-ops
metrics:
  listen: "[::1]:9500"
nvml:
  library: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
cdi:
  enabled: false
  specDir: /etc/cdi
  vendor: example.com
  class: gpu
  commonEditsFrom: /etc/cdi/nvidia.yaml
  procRoot: /host/proc
  devRoot: /host/dev
lifecycle:
  idleTTL: 1h30m
  maxIdlePerGPU: 3
  warmPool: {"1g.10gb": 2, "3g.40gb": 1}
  reconcileInterval: 10s
  demandHalfLife: 0
adoptExistingMIGInstances: true
migProfileAllowlist: [1g.10gb, 3g.40gb]
log:
  level: debug
)";
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(yaml));
  EXPECT_EQ(c.state_dir, "/srv/migd");
  EXPECT_EQ(c.api.socket, "/run/m/api.socket");
  EXPECT_EQ(c.api.socket_mode, 0660u);
  EXPECT_EQ(c.api.socket_group, "gpu-ops");
  EXPECT_EQ(c.metrics.listen, "[::1]:9500");
  EXPECT_EQ(c.nvml.library, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  EXPECT_FALSE(c.cdi.enabled);
  EXPECT_EQ(c.cdi.spec_dir, "/etc/cdi");
  EXPECT_EQ(c.cdi.vendor, "example.com");
  EXPECT_EQ(c.cdi.device_class, "gpu");
  EXPECT_EQ(c.cdi.common_edits_from, "/etc/cdi/nvidia.yaml");
  EXPECT_EQ(c.cdi.proc_root, "/host/proc");
  EXPECT_EQ(c.cdi.dev_root, "/host/dev");
  EXPECT_EQ(c.lifecycle.idle_ttl, std::chrono::minutes(90));
  EXPECT_EQ(c.lifecycle.max_idle_per_gpu, 3u);
  EXPECT_EQ(c.lifecycle.warm_pool,
            (std::map<std::string, uint32_t>{{"1g.10gb", 2}, {"3g.40gb", 1}}));
  EXPECT_EQ(c.lifecycle.reconcile_interval, std::chrono::seconds(10));
  EXPECT_EQ(c.lifecycle.demand_half_life, Duration(0));
  EXPECT_TRUE(c.adopt_existing_mig_instances);
  EXPECT_THAT(c.mig_profile_allowlist, ElementsAre("1g.10gb", "3g.40gb"));
  EXPECT_EQ(c.log.level, "debug");
}

TEST(ConfigTest, IdleTtlZeroMeansOff) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("lifecycle: {idleTTL: 0}"));
  EXPECT_FALSE(c.lifecycle.idle_ttl.has_value());
}

TEST(ConfigTest, KeyWithoutValueKeepsDefault) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("stateDir:\napi:\n  socket:\n"));
  EXPECT_EQ(c, Config{});
}

TEST(ConfigTest, MetricsListenEmptyDisables) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("metrics: {listen: \"\"}"));
  EXPECT_EQ(c.metrics.listen, "");
}

TEST(ConfigTest, UnknownKeySuggestsTheNearestSibling) {
  EXPECT_EQ(ErrorOf("api:\n  sokcet: /run/x.sock\n"),
            "config migd.yaml: unknown key api.sokcet (did you mean api.socket?)");
  EXPECT_EQ(ErrorOf("lifecycle: {idleTtl: 5m}"),
            "config migd.yaml: unknown key lifecycle.idleTtl (did you mean lifecycle.idleTTL?)");
  EXPECT_EQ(ErrorOf("statedir: /x"),
            "config migd.yaml: unknown key statedir (did you mean stateDir?)");
}

TEST(ConfigTest, UnknownKeyInTheWrongSectionNamesTheRightPath) {
  EXPECT_EQ(ErrorOf("socket: /run/x.sock"),
            "config migd.yaml: unknown key socket (did you mean api.socket?)");
}

TEST(ConfigTest, UnknownKeyWithoutNeighbourListsTheKnownKeys) {
  EXPECT_THAT(ErrorOf("log: {colour: true}"),
              HasSubstr("unknown key log.colour (known keys here: level)"));
}

TEST(ConfigTest, WrongTypesNameTheKeyAndWhatWasFound) {
  EXPECT_EQ(ErrorOf("api: /run/x.sock"),
            "config migd.yaml: api: expected a mapping of keys, got \"/run/x.sock\"");
  EXPECT_EQ(ErrorOf("stateDir: [a, b]"),
            "config migd.yaml: stateDir: expected a string, got a list");
  EXPECT_EQ(ErrorOf("cdi: {enabled: maybe}"),
            "config migd.yaml: cdi.enabled: expected true or false, got \"maybe\"");
  EXPECT_EQ(ErrorOf("lifecycle: {maxIdlePerGPU: two}"),
            "config migd.yaml: lifecycle.maxIdlePerGPU: expected a whole number, got \"two\"");
  EXPECT_EQ(ErrorOf("lifecycle: {maxIdlePerGPU: -1}"),
            "config migd.yaml: lifecycle.maxIdlePerGPU: expected a whole number, got \"-1\"");
  EXPECT_THAT(ErrorOf("migProfileAllowlist: 1g.10gb"),
              HasSubstr("migProfileAllowlist: expected a list of profile names"));
  EXPECT_THAT(ErrorOf("migProfileAllowlist: [[1g.10gb]]"),
              HasSubstr("migProfileAllowlist[0]: expected a string, got a list"));
  EXPECT_THAT(ErrorOf("lifecycle: {warmPool: [1g.10gb]}"),
              HasSubstr("lifecycle.warmPool: expected a mapping of profile to count"));
  EXPECT_THAT(ErrorOf("- a\n- b\n"), HasSubstr("the top level must be a mapping of keys"));
  EXPECT_THAT(ErrorOf("just a string"), HasSubstr("the top level must be a mapping of keys"));
  EXPECT_THAT(ErrorOf("? [a, b]\n: 1\n"), HasSubstr("keys must be plain strings"));
}

TEST(ConfigTest, BadDuration) {
  EXPECT_EQ(ErrorOf("lifecycle:\n  idleTTL: 5x\n"),
            "config migd.yaml: lifecycle.idleTTL: \"5x\" is not a duration (use e.g. 30s, 10m, "
            "2h)");
  EXPECT_THAT(ErrorOf("lifecycle: {reconcileInterval: 30}"),
              HasSubstr("lifecycle.reconcileInterval: \"30\" is not a duration"));
  EXPECT_THAT(ErrorOf("lifecycle: {demandHalfLife: h}"),
              HasSubstr("lifecycle.demandHalfLife: \"h\" is not a duration"));
  EXPECT_THAT(ErrorOf("lifecycle: {idleTTL: {a: 1}}"),
              HasSubstr("lifecycle.idleTTL: expected a duration (use e.g. 30s, 10m, 2h), got a "
                        "mapping"));
}

TEST(ConfigTest, DurationOutOfRange) {
  EXPECT_EQ(ErrorOf("lifecycle: {reconcileInterval: 500ms}"),
            "config migd.yaml: lifecycle.reconcileInterval: 500ms is out of range (1s..1d)");
  EXPECT_EQ(ErrorOf("lifecycle: {idleTTL: 31d}"),
            "config migd.yaml: lifecycle.idleTTL: 31d is out of range (0 or 1s..30d)");
  EXPECT_THAT(ErrorOf("lifecycle: {demandHalfLife: 10s}"),
              HasSubstr("lifecycle.demandHalfLife: 10s is out of range (0 or 1m..30d)"));
}

TEST(ConfigTest, NumbersOutOfRange) {
  EXPECT_EQ(ErrorOf("lifecycle: {maxIdlePerGPU: 65}"),
            "config migd.yaml: lifecycle.maxIdlePerGPU: 65 is out of range (0..64)");
  EXPECT_THAT(ErrorOf("lifecycle: {maxIdlePerGPU: 99999999999999999999}"),
              HasSubstr("is out of range (0..64)"));
  EXPECT_THAT(ErrorOf("lifecycle: {warmPool: {1g.10gb: 100}}"),
              HasSubstr("lifecycle.warmPool.1g.10gb: 100 is out of range (0..64)"));
}

TEST(ConfigTest, BadSocketMode) {
  EXPECT_EQ(ErrorOf("api: {socketMode: rw}"),
            "config migd.yaml: api.socketMode: \"rw\" is not an octal file mode (use e.g. "
            "\"0600\", or \"0660\" with api.socketGroup)");
  EXPECT_THAT(ErrorOf("api: {socketMode: \"0666\"}"),
              HasSubstr("api.socketMode: \"0666\" gives other users or execute rights"));
  EXPECT_THAT(ErrorOf("api: {socketMode: \"0700\"}"), HasSubstr("execute rights"));
  EXPECT_THAT(ErrorOf("api: {socketMode: \"0400\"}"),
              HasSubstr("api.socketMode: \"0400\" must give the owner read and write access"));
  EXPECT_THAT(ErrorOf("api: {socketMode: \"0609\"}"), HasSubstr("is not an octal file mode"));
  MIGD_ASSERT_OK_AND_ASSIGN(Config unquoted, Parse("api: {socketMode: 0660}"));
  EXPECT_EQ(unquoted.api.socket_mode, 0660u);
}

TEST(ConfigTest, BadListenAddress) {
  EXPECT_THAT(ErrorOf("metrics: {listen: \"9400\"}"),
              HasSubstr("metrics.listen: \"9400\" has no port"));
  EXPECT_THAT(ErrorOf("metrics: {listen: \"localhost:http\"}"),
              HasSubstr("metrics.listen: \"localhost:http\" has no valid port"));
  EXPECT_THAT(ErrorOf("metrics: {listen: \"127.0.0.1:70000\"}"),
              HasSubstr("port 70000 is out of range (0..65535"));
  EXPECT_THAT(ErrorOf("metrics: {listen: \":9400\"}"),
              HasSubstr("metrics.listen: \":9400\" is not a listen address (use host:port"));
  EXPECT_THAT(ErrorOf("metrics: {listen: \"::1:9400\"}"), HasSubstr("is not a listen address"));
  EXPECT_THAT(ErrorOf("metrics: {listen: \"[::1]9400\"}"), HasSubstr("is not a listen address"));
  EXPECT_THAT(ValidateListenAddress("0.0.0.0:9400"), IsOk());
  EXPECT_THAT(ValidateListenAddress("node-1.example:1"), IsOk());
  EXPECT_THAT(ValidateListenAddress("[::]:0"), IsOk());
}

TEST(ConfigTest, PathsMustBeAbsolute) {
  EXPECT_EQ(ErrorOf("stateDir: var/lib/migd"),
            "config migd.yaml: stateDir: \"var/lib/migd\" must be an absolute path");
  EXPECT_THAT(ErrorOf("api: {socket: api.socket}"), HasSubstr("api.socket: \"api.socket\" must"));
  EXPECT_THAT(ErrorOf("cdi: {specDir: cdi}"), HasSubstr("cdi.specDir"));
  EXPECT_THAT(ErrorOf("cdi: {procRoot: proc}"), HasSubstr("cdi.procRoot"));
  EXPECT_THAT(ErrorOf("cdi: {devRoot: dev}"), HasSubstr("cdi.devRoot"));
  EXPECT_THAT(ErrorOf("cdi: {commonEditsFrom: nvidia.yaml}"), HasSubstr("cdi.commonEditsFrom"));
  EXPECT_THAT(ErrorOf("api: {socket: /" + std::string(120, 'a') + "}"),
              HasSubstr("is longer than a unix socket path may be (107 bytes)"));
}

TEST(ConfigTest, OtherBadValues) {
  EXPECT_THAT(ErrorOf("nvml: {library: \"\"}"), HasSubstr("nvml.library: must name"));
  EXPECT_THAT(ErrorOf("cdi: {vendor: \"-bad\"}"), HasSubstr("cdi.vendor: "));
  EXPECT_THAT(ErrorOf("cdi: {class: \"a/b\"}"), HasSubstr("cdi.class: "));
  EXPECT_THAT(ErrorOf("api: {socketGroup: \"a b\"}"),
              HasSubstr("api.socketGroup: \"a b\" is not a group name or id"));
  EXPECT_EQ(ErrorOf("log: {level: verbose}"),
            "config migd.yaml: log.level: \"verbose\" is not a log level (use trace, debug, "
            "info, warn, error, critical or off)");
}

TEST(ConfigTest, UnknownProfilesAreRejectedWithASuggestion) {
  EXPECT_EQ(ErrorOf("lifecycle: {warmPool: {1g.10g: 1}}"),
            "config migd.yaml: lifecycle.warmPool: unknown MIG profile \"1g.10g\" (did you mean "
            "1g.10gb?); profile names look like 1g.10gb, 3g.40gb, 7g.80gb");
  EXPECT_THAT(ErrorOf("migProfileAllowlist: [1g.10gb, 9g.1tb]"),
              HasSubstr("migProfileAllowlist[1]: unknown MIG profile \"9g.1tb\""));
  EXPECT_THAT(ErrorOf("migProfileAllowlist: [1g.10gb, 1g.10gb]"),
              HasSubstr("migProfileAllowlist[1]: \"1g.10gb\" is listed twice"));
}

TEST(ConfigTest, DuplicateKeysNameBothLines) {
  EXPECT_EQ(ErrorOf("stateDir: /a\napi: {socket: /x}\nstateDir: /b\n"),
            "config migd.yaml: duplicate key stateDir (lines 1 and 3)");
  EXPECT_EQ(ErrorOf("api:\n  socket: /a\n  socket: /b\n"),
            "config migd.yaml: duplicate key api.socket (lines 2 and 3)");
}

TEST(ConfigTest, SyntaxErrorNamesLineAndColumn) {
  const std::string msg = ErrorOf("api:\n  socket: /a\n   socketMode: [0600\n");
  EXPECT_THAT(msg, HasSubstr("config migd.yaml: line "));
  EXPECT_THAT(msg, HasSubstr(", column "));
  EXPECT_THAT(msg, HasSubstr("YAML syntax error: "));
  EXPECT_EQ(ErrorOf("stateDir: /a\napi: {socket: /x\n"),
            "config migd.yaml: line 3, column 1: YAML syntax error: end of map flow not found");
}

TEST(ConfigTest, ParseDurationForms) {
  EXPECT_EQ(ParseDuration("0").value(), Duration(0));
  EXPECT_EQ(ParseDuration("250ms").value(), Duration(250));
  EXPECT_EQ(ParseDuration("30s").value(), std::chrono::seconds(30));
  EXPECT_EQ(ParseDuration("1h30m").value(), std::chrono::minutes(90));
  EXPECT_EQ(ParseDuration("2d").value(), std::chrono::hours(48));
  for (const char* bad : {"", "s", "5", "5x", "-5s", "1.5h", "5 s", "10000000000s"}) {
    EXPECT_THAT(ParseDuration(bad), StatusIs(StatusCode::kInvalidArgument, ::testing::_)) << bad;
  }
  EXPECT_EQ(FormatDuration(std::chrono::minutes(90)), "1h30m");
  EXPECT_EQ(FormatDuration(Duration(1500)), "1s500ms");
  EXPECT_EQ(FormatDuration(Duration(0)), "0");
}

TEST(ConfigTest, LoadConfigFileReadsAndNamesTheFile) {
  migd::testing::TempDir dir;
  const std::string path = dir.Join("migd.yaml");
  migd::testing::WriteFileOrDie(path, "lifecycle:\n  idleTTL: 10m\n");
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, LoadConfigFile(path));
  EXPECT_EQ(c.lifecycle.idle_ttl, std::chrono::minutes(10));

  migd::testing::WriteFileOrDie(path, "lifecycle:\n  idleTTL: 5x\n");
  EXPECT_THAT(LoadConfigFile(path),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("config " + path + ": lifecycle.idleTTL: \"5x\"")));
  EXPECT_THAT(LoadConfigFile(dir.Join("missing.yaml")),
              StatusIs(StatusCode::kNotFound, HasSubstr("reading config file")));
}

TEST(ConfigTest, ValidateConfigChecksOverriddenValues) {
  Config c;
  c.api.socket = "relative.sock";
  EXPECT_THAT(ValidateConfig(c, "command line"),
              StatusIs(StatusCode::kInvalidArgument,
                       "config command line: api.socket: \"relative.sock\" must be an absolute "
                       "path"));
}

TEST(ConfigTest, DiffSplitsReloadableKeysFromRestartKeys) {
  const Config a;
  Config b = a;
  EXPECT_TRUE(DiffConfigs(a, b).empty());
  b.lifecycle.idle_ttl = std::chrono::minutes(5);
  b.lifecycle.max_idle_per_gpu = 2;
  b.lifecycle.warm_pool["1g.10gb"] = 1;
  b.mig_profile_allowlist = {"1g.10gb"};
  b.log.level = "debug";
  b.state_dir = "/elsewhere";
  b.api.socket = "/x.sock";
  b.cdi.spec_dir = "/cdi";
  b.lifecycle.reconcile_interval = std::chrono::seconds(5);
  const ConfigDiff d = DiffConfigs(a, b);
  EXPECT_THAT(d.applied, ElementsAre("lifecycle.idleTTL", "lifecycle.maxIdlePerGPU",
                                     "lifecycle.warmPool", "migProfileAllowlist", "log.level"));
  EXPECT_THAT(d.needs_restart,
              ElementsAre("stateDir", "api.socket", "cdi.specDir", "lifecycle.reconcileInterval"));

  const Config merged = MergeReloadable(a, b);
  EXPECT_EQ(merged.lifecycle.idle_ttl, std::chrono::minutes(5));
  EXPECT_EQ(merged.log.level, "debug");
  EXPECT_EQ(merged.state_dir, a.state_dir);
  EXPECT_EQ(merged.api.socket, a.api.socket);
  EXPECT_TRUE(DiffConfigs(merged, b).applied.empty());
}

TEST(ConfigTest, KnownKeysCoverEveryDocumentedKey) {
  const std::vector<std::string>& keys = KnownKeys();
  for (const char* k : {"stateDir",
                        "api.socket",
                        "api.socketMode",
                        "api.socketGroup",
                        "metrics.listen",
                        "nvml.library",
                        "cdi.enabled",
                        "cdi.specDir",
                        "cdi.vendor",
                        "cdi.class",
                        "cdi.commonEditsFrom",
                        "cdi.procRoot",
                        "cdi.devRoot",
                        "lifecycle.idleTTL",
                        "lifecycle.maxIdlePerGPU",
                        "lifecycle.warmPool",
                        "lifecycle.reconcileInterval",
                        "lifecycle.demandHalfLife",
                        "adoptExistingMIGInstances",
                        "migProfileAllowlist",
                        "log.level",
                        "kubernetes.enabled",
                        "kubernetes.nodeName",
                        "kubernetes.kubeletDir",
                        "kubernetes.resourceName",
                        "kubernetes.apiServer.inCluster",
                        "kubernetes.apiServer.kubeconfig",
                        "kubernetes.hami",
                        "recovery.ownerSource"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  }
}

TEST(ConfigTest, KubernetesAndRecoveryDefaults) {
  const Config c;
  EXPECT_FALSE(c.kubernetes.enabled);
  EXPECT_EQ(c.kubernetes.node_name, "");
  EXPECT_EQ(c.kubernetes.kubelet_dir, "/var/lib/kubelet");
  EXPECT_EQ(c.kubernetes.resource_name, "nvidia.com/gpu");
  EXPECT_TRUE(c.kubernetes.api_server.in_cluster);
  EXPECT_EQ(c.kubernetes.api_server.kubeconfig, "");
  EXPECT_TRUE(c.kubernetes.hami);
  EXPECT_EQ(c.recovery.owner_source, "records");
}

TEST(ConfigTest, ParsesKubernetesAndRecoveryKeys) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(R"(
kubernetes:
  enabled: true
  nodeName: gpu-node-1
  kubeletDir: /srv/kubelet
  resourceName: example.com/mig
  apiServer:
    inCluster: false
    kubeconfig: /etc/migd/kubeconfig
  hami: true
recovery:
  ownerSource: podresources
)"));
  EXPECT_TRUE(c.kubernetes.enabled);
  EXPECT_EQ(c.kubernetes.node_name, "gpu-node-1");
  EXPECT_EQ(c.kubernetes.kubelet_dir, "/srv/kubelet");
  EXPECT_EQ(c.kubernetes.resource_name, "example.com/mig");
  EXPECT_FALSE(c.kubernetes.api_server.in_cluster);
  EXPECT_EQ(c.kubernetes.api_server.kubeconfig, "/etc/migd/kubeconfig");
  EXPECT_EQ(c.recovery.owner_source, "podresources");
}

TEST(ConfigTest, NodeNameDefaultsToTheEnvironment) {
  ::setenv("NODE_NAME", "from-downward-api", 1);
  StatusOr<Config> c = Parse("kubernetes: {enabled: true}");
  StatusOr<Config> explicit_name = Parse("kubernetes: {enabled: true, nodeName: mine}");
  ::unsetenv("NODE_NAME");
  MIGD_ASSERT_OK(c.status());
  EXPECT_EQ(c->kubernetes.node_name, "from-downward-api");
  MIGD_ASSERT_OK(explicit_name.status());
  EXPECT_EQ(explicit_name->kubernetes.node_name, "mine");
}

TEST(ConfigTest, BadKubernetesAndRecoveryValues) {
  EXPECT_THAT(ErrorOf("recovery: {ownerSource: kubelet}"),
              HasSubstr("recovery.ownerSource: \"kubelet\" is not an owner source (use records, "
                        "podresources or hami)"));
  EXPECT_THAT(ErrorOf("kubernetes: {enabled: true}"),
              HasSubstr("kubernetes.nodeName: is empty and NODE_NAME is not set"));
  EXPECT_THAT(ErrorOf("recovery: {ownerSource: hami}"),
              HasSubstr("recovery.ownerSource: hami needs this node's name"));
  EXPECT_THAT(ErrorOf("kubernetes: {kubeletDir: var/lib/kubelet}"),
              HasSubstr("kubernetes.kubeletDir: \"var/lib/kubelet\" must be an absolute path"));
  EXPECT_THAT(ErrorOf("kubernetes: {kubeletDir: /" + std::string(100, 'k') + "}"),
              HasSubstr("would not fit in a unix socket path"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: gpu}"),
              HasSubstr("kubernetes.resourceName: \"gpu\" is not of the form <domain>/<name>"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: a/b/c}"), HasSubstr("<domain>/<name>"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: Example.COM/gpu}"),
              HasSubstr("domain that is not a DNS name"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: kubernetes.io/gpu}"),
              HasSubstr("kubernetes.io namespace"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: node.kubernetes.io/gpu}"),
              HasSubstr("kubernetes.io namespace"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: nvidia.com/-gpu}"), HasSubstr("name part"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourceName: nvidia.com/" + std::string(64, 'g') + "}"),
              HasSubstr("name part"));
  EXPECT_THAT(ErrorOf("kubernetes: {nodeName: Node_1}"),
              HasSubstr("kubernetes.nodeName: \"Node_1\" is not a Kubernetes node name"));
  EXPECT_THAT(ErrorOf("kubernetes: {apiServer: {kubeconfig: /k}}"),
              HasSubstr("kubernetes.apiServer.kubeconfig: set together with inCluster: true"));
  EXPECT_THAT(ErrorOf("kubernetes: {apiServer: {inCluster: false, kubeconfig: k}}"),
              HasSubstr("must be an absolute path"));
  EXPECT_THAT(ErrorOf("kubernetes: {enabled: true, nodeName: n, apiServer: {inCluster: false}}"),
              HasSubstr("kubernetes.apiServer: inCluster: false needs a kubeconfig"));
  EXPECT_THAT(ErrorOf("kubernetes: {enabled: true, nodeName: n, hami: false}"),
              HasSubstr("kubernetes.hami: false is not supported yet"));
  EXPECT_THAT(ErrorOf("kubernetes: {enabled: yes please}"),
              HasSubstr("kubernetes.enabled: expected true or false"));
  EXPECT_THAT(ErrorOf("kubernetes: {apiServer: {inCluster: true, token: x}}"),
              HasSubstr("unknown key kubernetes.apiServer.token"));
  EXPECT_THAT(ErrorOf("kubernetes: {apiServer: true}"),
              HasSubstr("kubernetes.apiServer: expected a mapping of keys"));
  EXPECT_THAT(ErrorOf("kubernetes: {resourcename: a.io/b}"),
              HasSubstr("did you mean kubernetes.resourceName?"));
  // A records-mode config with inCluster: false and no kubeconfig is fine:
  // nothing talks to the API server.
  MIGD_EXPECT_OK(Parse("kubernetes: {apiServer: {inCluster: false}}").status());
}

TEST(ConfigTest, KubernetesKeysNeedARestart) {
  const Config a;
  Config b = a;
  b.kubernetes.enabled = true;
  b.kubernetes.node_name = "n";
  b.kubernetes.kubelet_dir = "/k";
  b.kubernetes.resource_name = "a.io/b";
  b.kubernetes.api_server.in_cluster = false;
  b.kubernetes.api_server.kubeconfig = "/kc";
  b.kubernetes.hami = false;
  b.recovery.owner_source = "hami";
  const ConfigDiff d = DiffConfigs(a, b);
  EXPECT_THAT(d.applied, IsEmpty());
  EXPECT_THAT(
      d.needs_restart,
      ElementsAre("kubernetes.enabled", "kubernetes.nodeName", "kubernetes.kubeletDir",
                  "kubernetes.resourceName", "kubernetes.apiServer.inCluster",
                  "kubernetes.apiServer.kubeconfig", "kubernetes.hami", "recovery.ownerSource"));
  EXPECT_EQ(MergeReloadable(a, b).kubernetes, a.kubernetes);
}

}  // namespace
}  // namespace migd::daemon
