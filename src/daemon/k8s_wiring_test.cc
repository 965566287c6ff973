#include "daemon/k8s_wiring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CannedSource final : public engine::OwnerSource {
 public:
  std::string_view name() const override { return "podresources"; }
  StatusOr<std::vector<engine::OwnedInstance>> ActiveOwners(
      const std::vector<store::Record>&) override {
    return answer;
  }
  StatusOr<std::vector<engine::OwnedInstance>> answer = std::vector<engine::OwnedInstance>{};
};

TEST(FailClosedOwnerSourceTest, PassesResultsThrough) {
  auto inner = std::make_unique<CannedSource>();
  engine::OwnedInstance o;
  o.mig_uuid = MigUuid("MIG-1");
  inner->answer = std::vector<engine::OwnedInstance>{o};
  FailClosedOwnerSource source(std::move(inner));
  EXPECT_EQ(source.name(), "podresources");
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<engine::OwnedInstance> owned, source.ActiveOwners({}));
  ASSERT_EQ(owned.size(), 1u);
  EXPECT_EQ(owned[0].mig_uuid, MigUuid("MIG-1"));
}

TEST(FailClosedOwnerSourceTest, AnyErrorFailsClosed) {
  auto inner = std::make_unique<CannedSource>();
  inner->answer = UnavailableError("kubelet pod-resources socket /k.sock: connection refused");
  FailClosedOwnerSource source(std::move(inner));
  EXPECT_THAT(source.ActiveOwners({}),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("connection refused (recovery.ownerSource: podresources could "
                                 "not say which instances are in use")));
}

class CannedBackend final : public k8s::AllocationBackend {
 public:
  std::vector<k8s::AdvertisedDevice> Devices() override {
    return {{.id = "GPU-1-0", .healthy = true, .numa_node = std::nullopt}};
  }
  StatusOr<k8s::ContainerAllocation> AllocateContainer(
      const std::vector<std::string>& ids) override {
    k8s::ContainerAllocation a;
    a.cdi_devices = ids;
    return a;
  }
  StatusOr<std::vector<std::string>> PreferredAllocation(const std::vector<std::string>&,
                                                         const std::vector<std::string>&,
                                                         int) override {
    return std::vector<std::string>{"preferred"};
  }
  void Changed() { NotifyDevicesChanged(); }
};

TEST(DeferredBackendTest, RefusesUntilSetThenForwards) {
  DeferredBackend deferred;
  int notified = 0;
  deferred.SetDevicesChangedCallback([&] { ++notified; });
  EXPECT_THAT(deferred.Devices(), IsEmpty());
  EXPECT_THAT(deferred.AllocateContainer({"GPU-1-0"}),
              StatusIs(StatusCode::kUnavailable, HasSubstr("still recovering")));
  MIGD_ASSERT_OK_AND_ASSIGN(std::vector<std::string> pref,
                            deferred.PreferredAllocation({"a", "b"}, {"b"}, 1));
  EXPECT_THAT(pref, ElementsAre("b"));  // the default policy until set

  CannedBackend real;
  deferred.Set(&real);
  EXPECT_EQ(notified, 1);
  EXPECT_THAT(deferred.Devices(),
              ElementsAre(k8s::AdvertisedDevice{
                  .id = "GPU-1-0", .healthy = true, .numa_node = std::nullopt}));
  MIGD_ASSERT_OK_AND_ASSIGN(k8s::ContainerAllocation a, deferred.AllocateContainer({"GPU-1-0"}));
  EXPECT_THAT(a.cdi_devices, ElementsAre("GPU-1-0"));
  MIGD_ASSERT_OK_AND_ASSIGN(pref, deferred.PreferredAllocation({"a"}, {}, 1));
  EXPECT_THAT(pref, ElementsAre("preferred"));
  real.Changed();  // the real backend's notifications reach the plugin
  EXPECT_EQ(notified, 2);
}

}  // namespace
}  // namespace migd::daemon
