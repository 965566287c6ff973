#include "daemon/config_reload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/config.h"

namespace migd::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ConfigReloadTest, DiffSplitsReloadableKeysFromRestartKeys) {
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

TEST(ConfigReloadTest, KubernetesKeysNeedARestart) {
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
