// The schema table itself, and the files that must agree with it without
// being generated from it: deploy/migd.yaml (every key at its default) and the
// Helm chart (every key in its values and rendered by its ConfigMap).
#include "daemon/config_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "daemon/config.h"
#include "daemon/config_parse.h"
#include "daemon/config_test_util.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::testing::IsEmpty;

std::string SourceFile(const std::string& relative) {
  StatusOr<std::string> text = ReadFileToString(std::string(MIGD_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// The paths of every key that holds a value (not a section).
std::set<std::string> ValueKeys() {
  std::set<std::string> out;
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type != KeyType::kSection) out.emplace(key.path);
  }
  return out;
}

// The key paths a YAML tree sets: mappings are descended where the schema
// has a section, everything else is a value.
void CollectKeys(const YAML::Node& node, const std::string& prefix, std::set<std::string>* out) {
  for (const auto& kv : node) {
    const std::string path = prefix + kv.first.Scalar();
    const KeySpec* key = FindKey(path);
    if (key != nullptr && key->type == KeyType::kSection && kv.second.IsMap()) {
      CollectKeys(kv.second, path + ".", out);
    } else {
      out->insert(path);
    }
  }
}

// `have` against the schema's keys: what is missing and what is not a key.
std::vector<std::string> Differences(const std::set<std::string>& have) {
  std::vector<std::string> problems;
  for (const std::string& k : ValueKeys()) {
    if (!have.contains(k)) problems.push_back("lacks " + k);
  }
  for (const std::string& k : have) {
    if (!ValueKeys().contains(k)) problems.push_back("has " + k + ", which is not in the schema");
  }
  return problems;
}

bool FieldTypeMatches(const KeySpec& key, const FieldRef& f) {
  switch (key.type) {
    case KeyType::kString:
      return std::holds_alternative<std::string*>(f);
    case KeyType::kBool:
      return std::holds_alternative<bool*>(f);
    case KeyType::kCount:
      return std::holds_alternative<uint32_t*>(f) ||
             std::holds_alternative<std::optional<uint32_t>*>(f);
    case KeyType::kDuration:
      return std::holds_alternative<Duration*>(f) ||
             std::holds_alternative<std::optional<Duration>*>(f);
    case KeyType::kFileMode:
      return std::holds_alternative<uint32_t*>(f);
    case KeyType::kProfileList:
      return std::holds_alternative<std::vector<std::string>*>(f);
    case KeyType::kProfileCounts:
      return std::holds_alternative<std::map<std::string, uint32_t>*>(f);
    case KeyType::kXidList:
      return std::holds_alternative<std::vector<uint32_t>*>(f);
    case KeyType::kSection:
      break;
  }
  return false;
}

TEST(ConfigSchemaTest, EveryRowIsWellFormed) {
  std::set<std::string_view> seen;
  for (const KeySpec& key : ConfigSchema()) {
    SCOPED_TRACE(std::string(key.path));
    EXPECT_TRUE(seen.insert(key.path).second) << "listed twice";
    const size_t dot = key.path.rfind('.');
    if (dot != std::string_view::npos) {
      const std::string_view parent = key.path.substr(0, dot);
      EXPECT_TRUE(seen.contains(parent)) << "its section must come first";
      const KeySpec* section = FindKey(parent);
      ASSERT_NE(section, nullptr);
      EXPECT_EQ(section->type, KeyType::kSection);
    }
    if (key.type == KeyType::kSection) {
      EXPECT_EQ(key.field, nullptr);
      EXPECT_FALSE(ChildrenOf(key.path).empty()) << "an empty section";
      continue;
    }
    ASSERT_NE(key.field, nullptr);
    EXPECT_FALSE(key.doc.empty()) << "undocumented";
    if (key.type == KeyType::kString && key.choices.empty()) {
      EXPECT_FALSE(key.type_doc.empty()) << "a string key needs its Type column";
    }
    if (!key.choices.empty()) {
      EXPECT_FALSE(key.choice_noun.empty());
    }
    if (key.type == KeyType::kBool || key.type == KeyType::kFileMode ||
        key.type == KeyType::kProfileList || key.type == KeyType::kProfileCounts ||
        key.type == KeyType::kXidList) {
      EXPECT_FALSE(key.default_value.empty()) << "needs a default";
    }
    if (key.type == KeyType::kCount || key.type == KeyType::kProfileCounts ||
        key.type == KeyType::kXidList) {
      EXPECT_GT(key.max_count, 0u);
    }
    if (key.type == KeyType::kDuration) {
      EXPECT_LT(key.range.min, key.range.max);
    }
    if (key.type == KeyType::kFileMode) {
      EXPECT_NE(key.check_mode, nullptr);
    }
  }
}

TEST(ConfigSchemaTest, EveryKeyFillsItsOwnFieldOfItsType) {
  Config c;
  std::set<const void*> fields;
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type == KeyType::kSection) continue;
    SCOPED_TRACE(std::string(key.path));
    const FieldRef f = FieldOf(key, c);
    EXPECT_TRUE(FieldTypeMatches(key, f));
    const void* address = std::visit([](auto* p) -> const void* { return p; }, f);
    EXPECT_TRUE(fields.insert(address).second) << "shares its field with another key";
  }
}

TEST(ConfigSchemaTest, DocumentedDefaultsParseToTheDefaultConfig) {
  // Writing a key's documented default into a file gives the default Config.
  for (const KeySpec& key : ConfigSchema()) {
    if (key.type == KeyType::kSection || key.default_value.empty()) continue;
    SCOPED_TRACE(std::string(key.path));
    std::string yaml;
    std::string indent;
    std::string_view rest = key.path;
    for (size_t dot; (dot = rest.find('.')) != std::string_view::npos;
         rest.remove_prefix(dot + 1)) {
      yaml += indent + std::string(rest.substr(0, dot)) + ":\n";
      indent += "  ";
    }
    yaml += indent + std::string(rest) + ": " + std::string(key.default_value) + "\n";
    MIGD_ASSERT_OK_AND_ASSIGN(Config c, testing::Parse(yaml));
    EXPECT_EQ(c, Config{});
  }
}

TEST(ConfigSchemaTest, ChildrenOfListsDirectChildrenInFileOrder) {
  EXPECT_THAT(ChildrenOf("api"), ::testing::ElementsAre("socket", "socketMode", "socketGroup"));
  EXPECT_THAT(ChildrenOf("kubernetes.apiServer"),
              ::testing::ElementsAre("inCluster", "kubeconfig"));
  const std::vector<std::string> top = ChildrenOf("");
  EXPECT_EQ(top.front(), "stateDir");
  EXPECT_NE(std::find(top.begin(), top.end(), "kubernetes"), top.end());
  EXPECT_EQ(std::find(top.begin(), top.end(), "inCluster"), top.end());
  EXPECT_THAT(ChildrenOf("nosuchsection"), IsEmpty());
}

TEST(ConfigSchemaTest, DeployExampleHoldsEveryKeyAtItsDefault) {
  const std::string text = SourceFile("deploy/migd.yaml");
  MIGD_ASSERT_OK_AND_ASSIGN(Config c, ParseConfig(text, "deploy/migd.yaml"));
  EXPECT_EQ(c, Config{}) << "deploy/migd.yaml says every value in it is the built-in default";
  std::set<std::string> keys;
  CollectKeys(YAML::Load(text), "", &keys);
  EXPECT_THAT(Differences(keys), IsEmpty()) << "deploy/migd.yaml";
}

TEST(ConfigSchemaTest, HelmValuesHoldEveryKey) {
  const YAML::Node values = YAML::Load(SourceFile("deploy/helm/migd/values.yaml"));
  ASSERT_TRUE(values["config"].IsMap());
  std::set<std::string> keys;
  CollectKeys(values["config"], "", &keys);
  EXPECT_THAT(Differences(keys), IsEmpty()) << "deploy/helm/migd/values.yaml, config:";
}

TEST(ConfigSchemaTest, HelmConfigMapRendersEveryKey) {
  const std::string tmpl = SourceFile("deploy/helm/migd/templates/configmap.yaml");
  for (const std::string& key : ValueKeys()) {
    EXPECT_NE(tmpl.find("$c." + key), std::string::npos)
        << "deploy/helm/migd/templates/configmap.yaml does not render config." << key;
  }
}

TEST(ConfigSchemaTest, KnownKeysCoverEveryDocumentedKey) {
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

}  // namespace
}  // namespace migd::daemon
