#include "cli/output.h"

#include <string>

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "migd/v1/migd.pb.h"
#include "testing/status_matchers.h"

namespace migd::cli {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

migd::v1::ListResponse SampleList() {
  migd::v1::ListResponse list;
  migd::v1::Gpu* gpu = list.add_gpus();
  gpu->set_index(0);
  gpu->set_uuid("GPU-0");
  gpu->set_mig_enabled(true);
  gpu->set_memory_slices(8);
  gpu->set_memory_total_mib(81559);
  migd::v1::Instance* i = list.add_instances();
  i->set_state(migd::v1::INSTANCE_STATE_ACTIVE);
  i->set_profile("3g.40gb");
  i->mutable_placement()->set_start(4);
  i->mutable_placement()->set_size(4);
  i->set_mig_uuid("MIG-1");
  i->set_last_used_unix_ms(1764400000000);
  i->mutable_owner()->set_opaque_id("true");  // a string that reads as a bool
  migd::v1::ForeignInstance* f = list.add_foreign();
  f->set_profile("1g.10gb");
  f->add_ci_ids(0);
  f->add_ci_ids(1);
  return list;
}

TEST(OutputTest, ParsesFormats) {
  EXPECT_EQ(*ParseOutputFormat("table"), OutputFormat::kTable);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_EQ(*ParseOutputFormat("yaml"), OutputFormat::kYaml);
  EXPECT_THAT(ParseOutputFormat("xml").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("table, json or yaml")));
}

TEST(OutputTest, JsonRoundTrips) {
  const migd::v1::ListResponse list = SampleList();
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::ordered_json doc, ProtoToJson(list));
  const std::string text = FormatDocument(doc, OutputFormat::kJson);
  // Protobuf's JSON mapping: camelCase names, enum names, int64 as strings,
  // zero values printed.
  EXPECT_THAT(text, HasSubstr("\"state\": \"INSTANCE_STATE_ACTIVE\""));
  EXPECT_THAT(text, HasSubstr("\"lastUsedUnixMs\": \"1764400000000\""));
  EXPECT_THAT(text, HasSubstr("\"giId\": 0"));
  migd::v1::ListResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &back).ok()) << text;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(list, back))
      << back.DebugString();
}

TEST(OutputTest, JsonKeepsFieldOrder) {
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::ordered_json doc, ProtoToJson(SampleList()));
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.begin().key(), "gpus");  // declaration order, not alphabetical
}

TEST(OutputTest, YamlParsesWithYamlCppAndCarriesTheJsonFields) {
  MIGD_ASSERT_OK_AND_ASSIGN(nlohmann::ordered_json doc, ProtoToJson(SampleList()));
  const std::string text = FormatDocument(doc, OutputFormat::kYaml);
  YAML::Node root;
  ASSERT_NO_THROW(root = YAML::Load(text)) << text;
  EXPECT_EQ(root["gpus"][0]["memorySlices"].as<int>(), 8);
  EXPECT_EQ(root["gpus"][0]["migEnabled"].as<bool>(), true);
  EXPECT_EQ(root["instances"][0]["profile"].as<std::string>(), "3g.40gb");
  EXPECT_EQ(root["instances"][0]["state"].as<std::string>(), "INSTANCE_STATE_ACTIVE");
  EXPECT_EQ(root["instances"][0]["placement"]["start"].as<int>(), 4);
  EXPECT_EQ(root["instances"][0]["lastUsedUnixMs"].as<std::string>(), "1764400000000");
  EXPECT_EQ(root["foreign"][0]["ciIds"].size(), 2u);
  // Strings are double-quoted, so "true" stays a string for any YAML reader.
  EXPECT_THAT(text, HasSubstr("opaqueId: \"true\""));
  EXPECT_EQ(text.back(), '\n');
}

TEST(OutputTest, YamlOfEmptyAndNestedValues) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(
      R"({"a": [], "b": {}, "c": null, "d": 1.5, "e": -3, "f": [{"g": "x"}]})");
  const std::string text = JsonToYaml(doc);
  YAML::Node root = YAML::Load(text);
  EXPECT_EQ(root["a"].size(), 0u);
  EXPECT_TRUE(root["b"].IsMap());
  EXPECT_TRUE(root["c"].IsNull());
  EXPECT_DOUBLE_EQ(root["d"].as<double>(), 1.5);
  EXPECT_EQ(root["e"].as<int>(), -3);
  EXPECT_EQ(root["f"][0]["g"].as<std::string>(), "x");
}

TEST(OutputTest, FormatsTables) {
  EXPECT_EQ(FormatTable({}), "");
  EXPECT_EQ(FormatTable({{"GPU", "PROFILE", "MIG"}, {"0", "3g.40gb", "MIG-1"}, {"10", "x"}}),
            "GPU  PROFILE  MIG\n"
            "0    3g.40gb  MIG-1\n"
            "10   x\n");
}

}  // namespace
}  // namespace migd::cli
