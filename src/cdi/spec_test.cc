#include "cdi/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cdi/cdi_test_util.h"
#include "testing/status_matchers.h"

namespace migd::cdi {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

Hook MakeHook(const char* name, const char* path) {
  Hook h;
  h.hook_name = name;
  h.path = path;
  return h;
}

Spec Minimal() {
  Spec s;
  s.version = "0.5.0";
  s.kind = "hami.io/mig";
  Device d;
  d.name = "MIG-x";
  DeviceNode node;
  node.path = "/dev/nvidia0";
  node.type = "c";
  node.major = 195;
  d.edits.device_nodes.push_back(node);
  s.devices.push_back(d);
  return s;
}

TEST(SpecTest, MinimumVersionRules) {
  Spec s = Minimal();
  EXPECT_EQ(MinimumVersion(s), kVersion030);  // letter name, no hostPath
  s.edits.mounts.push_back(Mount{"/a", "/a", {}, "bind"});
  EXPECT_EQ(MinimumVersion(s), kVersion040);
  s.devices[0].name = "0:1";
  EXPECT_EQ(MinimumVersion(s), kVersion050);
  s = Minimal();
  s.devices[0].edits.device_nodes[0].host_path = "/host/dev/nvidia0";
  EXPECT_EQ(MinimumVersion(s), kVersion050);
  s.kind = "hami.io/mig.v2";
  EXPECT_EQ(MinimumVersion(s), kVersion060);
  s.edits.additional_gids.push_back(44);
  EXPECT_EQ(MinimumVersion(s), kVersion070);
}

TEST(SpecTest, ValidateRejectsEachLibraryRule) {
  EXPECT_THAT(ValidateSpec(Minimal(), kVersion050), IsOk());
  struct Case {
    const char* want;
    void (*mutate)(Spec*);
  };
  const Case cases[] = {
      {"invalid CDI version", [](Spec* s) { s->version = "0.9.0"; }},
      {"kind", [](Spec* s) { s->kind = "hami.io"; }},
      {"class", [](Spec* s) { s->kind = "hami.io/mi.g"; }},
      {"no devices", [](Spec* s) { s->devices.clear(); }},
      {"multiple devices", [](Spec* s) { s->devices.push_back(s->devices[0]); }},
      {"empty device edits", [](Spec* s) { s->devices[0].edits = {}; }},
      {"device name", [](Spec* s) { s->devices[0].name = "a/b"; }},
      {"invalid env", [](Spec* s) { s->edits.env.push_back("NOEQUALS"); }},
      {"invalid env", [](Spec* s) { s->edits.env.push_back("=x"); }},
      {"empty device path", [](Spec* s) { s->devices[0].edits.device_nodes[0].path = ""; }},
      {"invalid device type", [](Spec* s) { s->devices[0].edits.device_nodes[0].type = "x"; }},
      {"invalid permissions",
       [](Spec* s) { s->devices[0].edits.device_nodes[0].permissions = "rwx"; }},
      {"empty hostPath",
       [](Spec* s) {
         s->edits.mounts.push_back(Mount{"", "/a", {}, ""});
       }},
      {"empty containerPath",
       [](Spec* s) {
         s->edits.mounts.push_back(Mount{"/a", "", {}, ""});
       }},
      {"invalid hookName", [](Spec* s) { s->edits.hooks.push_back(MakeHook("x", "/p")); }},
      {"empty hook path", [](Spec* s) { s->edits.hooks.push_back(MakeHook("poststop", "")); }},
      {"below the version",
       [](Spec* s) {
         s->version = "0.3.0";
         s->devices[0].name = "0";
       }},
      {"above the configured maximum", [](Spec* s) { s->version = "0.6.0"; }},
  };
  for (const Case& c : cases) {
    Spec s = Minimal();
    c.mutate(&s);
    EXPECT_THAT(ValidateSpec(s, kVersion050),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.want;
  }
  Spec none = Minimal();
  none.devices[0].edits.device_nodes[0].permissions = "none";
  EXPECT_THAT(ValidateSpec(none, kVersion050), IsOk());
}

TEST(SpecTest, SerializeOmitsEmptyFieldsAndRoundTrips) {
  Spec s = Minimal();
  s.edits.env = {"A=b"};
  s.edits.hooks.push_back(Hook{"createContainer", "/usr/bin/nvidia-cdi-hook", {"x"}, {}, 5});
  s.edits.mounts.push_back(Mount{"/h", "/c", {"ro"}, ""});
  const std::string text = SerializeSpec(s);
  EXPECT_EQ(text, R"({
  "cdiVersion": "0.5.0",
  "kind": "hami.io/mig",
  "devices": [
    {
      "name": "MIG-x",
      "containerEdits": {
        "deviceNodes": [
          {
            "path": "/dev/nvidia0",
            "type": "c",
            "major": 195
          }
        ]
      }
    }
  ],
  "containerEdits": {
    "env": [
      "A=b"
    ],
    "hooks": [
      {
        "hookName": "createContainer",
        "path": "/usr/bin/nvidia-cdi-hook",
        "args": [
          "x"
        ],
        "timeout": 5
      }
    ],
    "mounts": [
      {
        "hostPath": "/h",
        "containerPath": "/c",
        "options": [
          "ro"
        ]
      }
    ]
  }
}
)");
  MIGD_ASSERT_OK_AND_ASSIGN(Spec back, ParseSpecDocument(text, "x.json"));
  EXPECT_EQ(back, s);
  EXPECT_THAT(testing::ValidateAgainstSchema(text), IsOk());
}

TEST(SpecTest, YamlScalarsAreTyped) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      Spec s, ParseSpecDocument("cdiVersion: \"0.5.0\"\nkind: a.b/c\nannotations: {x: y}\n"
                                "devices:\n- name: \"0\"\n  containerEdits:\n    deviceNodes:\n"
                                "    - {path: /dev/x, type: c, major: 10, minor: 3, fileMode: 420,"
                                " uid: 0, gid: ~}\n",
                                "a.yaml"));
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].name, "0");
  const DeviceNode& n = s.devices[0].edits.device_nodes[0];
  EXPECT_EQ(n.major, 10);
  EXPECT_EQ(n.minor, 3);
  EXPECT_EQ(n.file_mode, 420u);
  EXPECT_EQ(n.uid, 0u);
  EXPECT_FALSE(n.gid.has_value());
}

TEST(SpecTest, StrictParsing) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {R"({"cdiVersion":"0.5.0","kind":"a/b","devices":[],"extra":1})",
       "in.json: /extra: unknown member"},
      {R"({"kind":"a/b","devices":[]})", "in.json: /cdiVersion: expected a string, got nothing"},
      {R"({"cdiVersion":"0.5.0","devices":[]})", "in.json: /kind: expected a string, got nothing"},
      {R"({"cdiVersion":"","kind":"a/b","devices":[]})",
       "in.json: /cdiVersion: expected a CDI version such as \"0.5.0\", got \"\""},
      {R"({"cdiVersion":5,"kind":"a/b"})", "in.json: /cdiVersion: expected a string, got 5"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"intelRdt":{}}})",
       "in.json: /containerEdits/intelRdt: not supported"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"netDevices":[]}})",
       "in.json: /containerEdits/netDevices: not supported"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"deviceNodes":[{"path":"/x","major":1.5}]}})",
       "/containerEdits/deviceNodes/0/major: expected an integer"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"deviceNodes":[{"path":"/x","uid":-1}]}})",
       "/containerEdits/deviceNodes/0/uid: expected a non-negative integer of at most 4294967295, "
       "got -1"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"env":"A=b"}})",
       "in.json: /containerEdits/env: expected an array, got \"A=b\""},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"env":["A=b",3]}})",
       "in.json: /containerEdits/env/1: expected a string, got 3"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","containerEdits":{"additionalGids":[4294967296]}})",
       "/containerEdits/additionalGids/0: expected a non-negative integer of at most 4294967295"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","devices":[{"name":"x","annotations":[]}]})",
       "in.json: /devices/0/annotations: expected an object, got an array"},
      {R"({"cdiVersion":"0.5.0","kind":"a/b","devices":{}})",
       "in.json: /devices: expected an array, got an object"},
      {"[1, 2]", "in.json: the document: expected a CDI spec (a mapping), got an array"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseSpecDocument(c.text, "in.json"),
                StatusIs(StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("in.json"), HasSubstr(c.want))))
        << c.text;
  }
}

TEST(SpecTest, HeaderIsLenient) {
  MIGD_ASSERT_OK_AND_ASSIGN(
      SpecHeader h, ParseSpecHeader(R"({"kind":"a/b","devices":[{"name":"x","new":1},{"name":2}],
                                     "containerEdits":{"intelRdt":{}}})",
                                    "h.json"));
  EXPECT_EQ(h.kind, "a/b");
  EXPECT_THAT(h.device_names, ::testing::ElementsAre("x"));
  EXPECT_THAT(ParseSpecHeader("{", "h.json"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("h.json: not valid JSON")));
}

// Regression for fuzz/corpus/cdi_common_edits/regress-yaml-invalid-utf8: a
// YAML spec whose strings hold bytes that are not UTF-8 parsed, and then
// SerializeSpec threw (nlohmann type_error 316) when the builder merged it as
// cdi.commonEditsFrom, terminating the daemon. It is now a parse error.
TEST(SpecTest, FuzzRegressionYamlWithInvalidUtf8IsRefused) {
  const std::string yaml =
      "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\ncontainerEdits:\n"
      "  env:\n  - A=\x90\n";
  EXPECT_THAT(ParseSpecDocument(yaml, "common.yaml"),
              StatusIs(StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("common.yaml"), HasSubstr("UTF-8"))));
  EXPECT_THAT(ParseSpecHeader("kind: \"a/b\xc3\"\n", "h.yaml"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("UTF-8")));
  // Valid multi-byte UTF-8 still parses and round-trips.
  MIGD_ASSERT_OK_AND_ASSIGN(
      Spec spec, ParseSpecDocument("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n"
                                   "containerEdits:\n  env: [\"A=\xc3\xa9\"]\n",
                                   "ok.yaml"));
  EXPECT_THAT(spec.edits.env, ::testing::ElementsAre("A=\xc3\xa9"));
}

}  // namespace
}  // namespace migd::cdi
