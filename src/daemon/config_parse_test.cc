#include "daemon/config_parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>

#include "daemon/config.h"
#include "daemon/config_test_util.h"
#include "daemon/config_validate.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::daemon::testing::ErrorOf;
using ::migd::daemon::testing::Parse;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ConfigParseTest, EmptyFileGivesDefaults) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(""));
  EXPECT_EQ(c, Config{});
  MIGD_ASSERT_OK_AND_ASSIGN(Config comments, Parse("# nothing here\n\n# still nothing\n"));
  EXPECT_EQ(comments, Config{});
}

TEST(ConfigParseTest, DefaultsAreTheDocumentedOnes) {
  const Config c;
  EXPECT_EQ(c.state_dir, "/run/migd/state");  // tmpfs: records live for one boot
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

TEST(ConfigParseTest, ParsesEveryKey) {
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

// A stock kubelet keeps device-plugins/ under /var/lib/kubelet whatever its
// --root-dir (DevicePluginPath), while pod-resources/ follows --root-dir: two
// settings, both below kubeletDir unless set.
TEST(ConfigParseTest, KubeletDirectoriesAndNodeLockExpiry) {
  const Config d;
  EXPECT_EQ(d.kubernetes.DevicePluginDir(), "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(d.kubernetes.PodResourcesDir(), "/var/lib/kubelet/pod-resources");
  EXPECT_EQ(d.kubernetes.node_lock_expiry, std::chrono::minutes(5));
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("kubernetes:\n  kubeletDir: /data/kubelet\n"
                                            "  devicePluginDir: /var/lib/kubelet/device-plugins\n"
                                            "  nodeLockExpiry: 90s\n"));
  EXPECT_EQ(c.kubernetes.DevicePluginDir(), "/var/lib/kubelet/device-plugins");
  EXPECT_EQ(c.kubernetes.PodResourcesDir(), "/data/kubelet/pod-resources");
  EXPECT_EQ(c.kubernetes.node_lock_expiry, std::chrono::seconds(90));
  MIGD_ASSERT_OK_AND_ASSIGN(Config p, Parse("kubernetes: {podResourcesDir: /run/kubelet/pr}\n"));
  EXPECT_EQ(p.kubernetes.PodResourcesDir(), "/run/kubelet/pr");
}

TEST(ConfigParseTest, IdleTtlZeroMeansOff) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("lifecycle: {idleTTL: 0}"));
  EXPECT_FALSE(c.lifecycle.idle_ttl.has_value());
}

TEST(ConfigParseTest, KeyWithoutValueKeepsDefault) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("stateDir:\napi:\n  socket:\n"));
  EXPECT_EQ(c, Config{});
}

TEST(ConfigParseTest, MetricsListenEmptyDisables) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse("metrics: {listen: \"\"}"));
  EXPECT_EQ(c.metrics.listen, "");
}

TEST(ConfigParseTest, UnknownKeySuggestsTheNearestSibling) {
  EXPECT_EQ(ErrorOf("api:\n  sokcet: /run/x.sock\n"),
            "config migd.yaml: unknown key api.sokcet (did you mean api.socket?)");
  EXPECT_EQ(ErrorOf("lifecycle: {idleTtl: 5m}"),
            "config migd.yaml: unknown key lifecycle.idleTtl (did you mean lifecycle.idleTTL?)");
  EXPECT_EQ(ErrorOf("statedir: /x"),
            "config migd.yaml: unknown key statedir (did you mean stateDir?)");
}

TEST(ConfigParseTest, UnknownKeyInTheWrongSectionNamesTheRightPath) {
  EXPECT_EQ(ErrorOf("socket: /run/x.sock"),
            "config migd.yaml: unknown key socket (did you mean api.socket?)");
}

TEST(ConfigParseTest, UnknownKeyWithoutNeighbourListsTheKnownKeys) {
  EXPECT_THAT(ErrorOf("log: {colour: true}"),
              HasSubstr("unknown key log.colour (known keys here: level)"));
}

TEST(ConfigParseTest, WrongTypesNameTheKeyAndWhatWasFound) {
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

TEST(ConfigParseTest, BadDuration) {
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

TEST(ConfigParseTest, NumbersOutOfRange) {
  EXPECT_EQ(ErrorOf("lifecycle: {maxIdlePerGPU: 65}"),
            "config migd.yaml: lifecycle.maxIdlePerGPU: 65 is out of range (0..64)");
  EXPECT_THAT(ErrorOf("lifecycle: {maxIdlePerGPU: 99999999999999999999}"),
              HasSubstr("is out of range (0..64)"));
  EXPECT_THAT(ErrorOf("lifecycle: {warmPool: {1g.10gb: 100}}"),
              HasSubstr("lifecycle.warmPool.1g.10gb: 100 is out of range (0..64)"));
}

TEST(ConfigParseTest, DuplicateKeysNameBothLines) {
  EXPECT_EQ(ErrorOf("stateDir: /a\napi: {socket: /x}\nstateDir: /b\n"),
            "config migd.yaml: duplicate key stateDir (lines 1 and 3)");
  EXPECT_EQ(ErrorOf("api:\n  socket: /a\n  socket: /b\n"),
            "config migd.yaml: duplicate key api.socket (lines 2 and 3)");
}

TEST(ConfigParseTest, SyntaxErrorNamesLineAndColumn) {
  const std::string msg = ErrorOf("api:\n  socket: /a\n   socketMode: [0600\n");
  EXPECT_THAT(msg, HasSubstr("config migd.yaml: line "));
  EXPECT_THAT(msg, HasSubstr(", column "));
  EXPECT_THAT(msg, HasSubstr("YAML syntax error: "));
  EXPECT_EQ(ErrorOf("stateDir: /a\napi: {socket: /x\n"),
            "config migd.yaml: line 3, column 1: YAML syntax error: end of map flow not found");
}

TEST(ConfigParseTest, KubernetesAndRecoveryDefaults) {
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

TEST(ConfigParseTest, ParsesKubernetesAndRecoveryKeys) {
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

TEST(ConfigParseTest, HealthDefaults) {
  const Config c;
  EXPECT_TRUE(c.health.enabled);
  // NVIDIA/k8s-device-plugin internal/rm/health.go, getDisabledHealthCheckXids.
  EXPECT_THAT(c.health.ignored_xids, ElementsAre(13, 31, 43, 45, 68, 109));
}

TEST(ConfigParseTest, ParsesHealthKeys) {
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, Parse(R"(
health:
  enabled: false
  ignoredXids: [13, 63, 92]
)"));
  EXPECT_FALSE(c.health.enabled);
  EXPECT_THAT(c.health.ignored_xids, ElementsAre(13, 63, 92));
}

TEST(ConfigParseTest, BadXidListsNameTheEntry) {
  EXPECT_EQ(ErrorOf("health: {ignoredXids: 13}"),
            "config migd.yaml: health.ignoredXids: expected a list of Xid numbers (e.g. [13, "
            "31]), got \"13\"");
  EXPECT_EQ(ErrorOf("health: {ignoredXids: [13, x]}"),
            "config migd.yaml: health.ignoredXids[1]: expected a whole number, got \"x\"");
  EXPECT_EQ(ErrorOf("health: {ignoredXids: [79, 65536]}"),
            "config migd.yaml: health.ignoredXids[1]: 65536 is out of range (0..65535)");
  EXPECT_EQ(ErrorOf("health: {ignoredXids: [0]}"),
            "config migd.yaml: health.ignoredXids[0]: 0 is not an Xid (Xids start at 1)");
  EXPECT_EQ(ErrorOf("health: {ignoredXids: [13, 31, 13]}"),
            "config migd.yaml: health.ignoredXids[2]: Xid 13 is listed twice");
  EXPECT_EQ(ErrorOf("health: {ignoredXids: [[13]]}"),
            "config migd.yaml: health.ignoredXids[0]: expected a whole number, got a list");
}

TEST(ConfigParseTest, NodeNameDefaultsToTheEnvironment) {
  ::setenv("NODE_NAME", "from-downward-api", 1);
  StatusOr<Config> c = Parse("kubernetes: {enabled: true}");
  StatusOr<Config> explicit_name = Parse("kubernetes: {enabled: true, nodeName: mine}");
  ::unsetenv("NODE_NAME");
  MIGD_ASSERT_OK(c.status());
  EXPECT_EQ(c->kubernetes.node_name, "from-downward-api");
  MIGD_ASSERT_OK(explicit_name.status());
  EXPECT_EQ(explicit_name->kubernetes.node_name, "mine");
}

TEST(ConfigParseTest, NulAndInvalidUtf8AreRefusedWithTheirPosition) {
  EXPECT_THAT(ParseConfig(std::string("log:\n  level: in\0fo\n", 20), "m.yaml"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("config m.yaml: line 2, column 12: a NUL byte")));
  for (const char* bad : {"\xff", "\xc3(", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\x80", "\xe2\x82"}) {
    EXPECT_THAT(ParseConfig(std::string("stateDir: /var/x") + bad + "\n", "m.yaml"),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr("config m.yaml: line 1, column 17: invalid UTF-8")))
        << ::testing::PrintToString(std::string(bad));
  }
}

TEST(ConfigParseTest, ValidMultiByteUtf8IsAccepted) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      Config c, ParseConfig("# Größe ✓ 🚀 \xf4\x8f\xbf\xbf\nstateDir: /var/lib/migd-é\n", "m.yaml"));
  EXPECT_EQ(c.state_dir, "/var/lib/migd-é");
}

}  // namespace
}  // namespace migd::daemon
