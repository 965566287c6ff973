#include "cdi/json_schema_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include "cdi/cdi_test_util.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::cdi::testing {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// The carried schema is the one that validates spec-level containerEdits
// (upstream commit f32e9aa, data/README.md): the schema of CDI 0.5.2, which
// Debian ships, ignores them and would accept this document.
TEST(JsonSchemaCheckTest, CarriedSchemaChecksSpecLevelEdits) {
  EXPECT_THAT(SchemaChecker().Validate(Json::parse(R"({
    "cdiVersion": "0.5.0", "kind": "hami.io/mig",
    "devices": [{"name": "MIG-x", "containerEdits": {"env": ["A=b"]}}],
    "containerEdits": {"deviceNodes": [{"type": "c"}]}})")),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/containerEdits/deviceNodes/0: missing required property "
                                 "\"path\"")));
}

TEST(JsonSchemaCheckTest, AcceptsAValidSpec) {
  EXPECT_THAT(SchemaChecker().Validate(Json::parse(R"({
    "cdiVersion": "0.5.0", "kind": "hami.io/mig",
    "devices": [{"name": "MIG-x", "containerEdits": {"deviceNodes": [{"path": "/dev/x",
      "major": -1, "uid": 4294967295}]}}],
    "containerEdits": {"env": ["A=b"], "additionalGids": [0],
      "hooks": [{"hookName": "createContainer", "path": "/p", "timeout": 3}]}})")),
              IsOk());
}

TEST(JsonSchemaCheckTest, RejectsEachConstraintOfTheSchemaFiles) {
  struct Case {
    const char* doc;
    const char* want;
  };
  const Case cases[] = {
      {R"({"kind": "a/b", "devices": []})", "missing required property \"cdiVersion\""},
      {R"({"cdiVersion": "0.5.0", "devices": []})", "missing required property \"kind\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b"})", "missing required property \"devices\""},
      {R"({"cdiVersion": 5, "kind": "a/b", "devices": []})", "/cdiVersion: expected type"},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": {}})", "/devices: expected type"},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [{"name": "x"}]})",
       "/devices/0: missing required property \"containerEdits\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [{"containerEdits": {}}]})",
       "/devices/0: missing required property \"name\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"deviceNodes": [{"type": "c"}]}})",
       "/containerEdits/deviceNodes/0: missing required property \"path\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"deviceNodes": [{"path": "/x", "uid": 4294967296}]}})",
       "/containerEdits/deviceNodes/0/uid: 4294967296 > maximum"},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"deviceNodes": [{"path": "/x", "gid": -1}]}})",
       "/gid: -1 < minimum"},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"deviceNodes": [{"path": "/x", "major": 1.5}]}})",
       "/major: expected type \"integer\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"mounts": [{"hostPath": "/x"}]}})",
       "missing required property \"containerPath\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"hooks": [{"path": "/x"}]}})",
       "missing required property \"hookName\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"netDevices": [{"name": "x"}]}})",
       "missing required property \"hostInterfaceName\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [], "annotations": {"k": 1}})",
       "/annotations/k: expected type \"string\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"additionalGids": ["x"]}})",
       "/additionalGids/0: expected type \"integer\""},
      {R"({"cdiVersion": "0.5.0", "kind": "a/b", "devices": [],
          "containerEdits": {"intelRdt": {"enableMonitoring": "yes"}}})",
       "/enableMonitoring: expected type \"boolean\""},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(SchemaChecker().Validate(Json::parse(c.doc)),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.doc;
  }
}

TEST(JsonSchemaCheckTest, UnsupportedKeywordIsAValidatorError) {
  TempDir dir;
  WriteFileOrDie(dir.Join("s.json"), R"({"type": "object", "oneOf": []})");
  MIGD_ASSERT_OK_AND_ASSIGN(JsonSchemaChecker checker,
                            JsonSchemaChecker::Load(dir.path(), {"s.json"}, "s.json"));
  EXPECT_THAT(checker.Validate(Json::object()),
              StatusIs(StatusCode::kUnimplemented, HasSubstr("oneOf")));
  EXPECT_THAT(JsonSchemaChecker::Load(dir.path(), {"absent.json"}, "absent.json"),
              StatusIs(StatusCode::kNotFound, HasSubstr("absent.json")));
}

}  // namespace
}  // namespace migd::cdi::testing
