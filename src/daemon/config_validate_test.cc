#include "daemon/config_validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/config.h"
#include "daemon/config_test_util.h"
#include "daemon/config_values.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::daemon::testing::ErrorOf;
using ::migd::daemon::testing::Parse;
using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ConfigValidateTest, DurationOutOfRange) {
  EXPECT_EQ(ErrorOf("lifecycle: {reconcileInterval: 500ms}"),
            "config migd.yaml: lifecycle.reconcileInterval: 500ms is out of range (1s..1d)");
  EXPECT_EQ(ErrorOf("lifecycle: {idleTTL: 31d}"),
            "config migd.yaml: lifecycle.idleTTL: 31d is out of range (0 or 1s..30d)");
  EXPECT_THAT(ErrorOf("lifecycle: {demandHalfLife: 10s}"),
              HasSubstr("lifecycle.demandHalfLife: 10s is out of range (0 or 1m..30d)"));
}

TEST(ConfigValidateTest, BadSocketMode) {
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

TEST(ConfigValidateTest, BadListenAddress) {
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

TEST(ConfigValidateTest, PathsMustBeAbsolute) {
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

TEST(ConfigValidateTest, OtherBadValues) {
  EXPECT_THAT(ErrorOf("nvml: {library: \"\"}"), HasSubstr("nvml.library: must name"));
  EXPECT_THAT(ErrorOf("cdi: {vendor: \"-bad\"}"), HasSubstr("cdi.vendor: "));
  EXPECT_THAT(ErrorOf("cdi: {class: \"a/b\"}"), HasSubstr("cdi.class: "));
  EXPECT_THAT(ErrorOf("api: {socketGroup: \"a b\"}"),
              HasSubstr("api.socketGroup: \"a b\" is not a group name or id"));
  EXPECT_EQ(ErrorOf("log: {level: verbose}"),
            "config migd.yaml: log.level: \"verbose\" is not a log level (use trace, debug, "
            "info, warn, error, critical or off)");
}

TEST(ConfigValidateTest, UnknownProfilesAreRejectedWithASuggestion) {
  EXPECT_EQ(ErrorOf("lifecycle: {warmPool: {1g.10g: 1}}"),
            "config migd.yaml: lifecycle.warmPool: unknown MIG profile \"1g.10g\" (did you mean "
            "1g.10gb?); profile names look like 1g.10gb, 3g.40gb, 7g.80gb");
  EXPECT_THAT(ErrorOf("migProfileAllowlist: [1g.10gb, 9g.1tb]"),
              HasSubstr("migProfileAllowlist[1]: unknown MIG profile \"9g.1tb\""));
  EXPECT_THAT(ErrorOf("migProfileAllowlist: [1g.10gb, 1g.10gb]"),
              HasSubstr("migProfileAllowlist[1]: \"1g.10gb\" is listed twice"));
}

TEST(ConfigValidateTest, ValidateConfigChecksOverriddenValues) {
  Config c;
  c.api.socket = "relative.sock";
  EXPECT_THAT(ValidateConfig(c, "command line"),
              StatusIs(StatusCode::kInvalidArgument,
                       "config command line: api.socket: \"relative.sock\" must be an absolute "
                       "path"));
}

TEST(ConfigValidateTest, BadKubernetesAndRecoveryValues) {
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

TEST(ConfigValidateTest, ParseDurationForms) {
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

}  // namespace
}  // namespace migd::daemon
