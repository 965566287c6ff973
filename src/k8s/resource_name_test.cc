// kubelet's resource-name check (IsExtendedResourceName) case by case.
#include "k8s/resource_name.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "testing/status_matchers.h"

namespace migd::k8s {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

Status Check(const std::string& name) { return CheckExtendedResourceName(name); }

TEST(ResourceNameTest, AcceptsWhatKubeletAccepts) {
  for (const std::string& ok : std::vector<std::string>{
           "nvidia.com/gpu", "example.com/MIG_1g.5gb", "a.b-c.io/x", "hami.io/vgpu",
           // "kubernetes.io" without the '/' is not the native namespace.
           "kubernetes.io.example.com/gpu", "example.com/kubernetes.io",
           // The name part: up to 63 characters.
           "nvidia.com/" + std::string(63, 'g'),
           // The domain: "requests." + domain must be a 253-character subdomain.
           std::string(61, 'a') + "." + std::string(61, 'b') + "." + std::string(61, 'c') + "." +
               std::string(58, 'd') + "/gpu"}) {
    EXPECT_TRUE(Check(ok).ok()) << ok << ": " << Check(ok);
  }
}

TEST(ResourceNameTest, RefusesNativeAndQuotaNames) {
  EXPECT_THAT(Check("gpu"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no domain")));
  EXPECT_THAT(Check("kubernetes.io/gpu"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("kubernetes.io namespace")));
  // kubelet refuses "kubernetes.io/" anywhere in the name.
  EXPECT_THAT(Check("x.kubernetes.io/gpu"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("kubernetes.io namespace")));
  EXPECT_THAT(Check("requests.nvidia.com/gpu"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"requests.\"")));
}

TEST(ResourceNameTest, RefusesWhatIsNotAQualifiedName) {
  auto bad = [](const std::string& name, const char* why) {
    EXPECT_THAT(Check(name), StatusIs(StatusCode::kInvalidArgument, HasSubstr(why))) << name;
  };
  bad("a/b/c", "more than one '/'");
  bad("/gpu", "domain");
  bad("Nvidia.com/gpu", "domain");  // DNS-1123: lower case only
  bad("nvidia..com/gpu", "domain");
  bad("-nvidia.com/gpu", "domain");
  bad("nvidia_com/gpu", "domain");
  bad(std::string(61, 'a') + "." + std::string(61, 'b') + "." + std::string(61, 'c') + "." +
          std::string(59, 'd') + "/gpu",
      "at most 244 characters");
  bad("nvidia.com/", "name part");
  bad("nvidia.com/-gpu", "name part");
  bad("nvidia.com/gpu.", "name part");
  bad("nvidia.com/g pu", "name part");
  bad("nvidia.com/" + std::string(64, 'g'), "1..63");
  // Every refusal says what kubelet would do and what to use.
  EXPECT_THAT(Check("gpu"), StatusIs(StatusCode::kInvalidArgument,
                                     HasSubstr("kubelet's Register would refuse it")));
}

TEST(Dns1123SubdomainTest, Rules) {
  EXPECT_TRUE(IsDns1123Subdomain("a"));
  EXPECT_TRUE(IsDns1123Subdomain("node-1.example.com"));
  EXPECT_FALSE(IsDns1123Subdomain(""));
  EXPECT_FALSE(IsDns1123Subdomain("a."));
  EXPECT_FALSE(IsDns1123Subdomain("A"));
  EXPECT_FALSE(IsDns1123Subdomain("a-"));
  EXPECT_TRUE(IsDns1123Subdomain(std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                                 std::string(63, 'c') + "." + std::string(61, 'd')));
  EXPECT_FALSE(IsDns1123Subdomain(std::string(254, 'a')));
}

}  // namespace
}  // namespace migd::k8s
