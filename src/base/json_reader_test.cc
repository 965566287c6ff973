#include "base/json_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd {
namespace {

using ::testing::HasSubstr;
using ::testing::StrEq;
using Json = nlohmann::json;

TEST(JsonReaderTest, ParseNamesTheSourceAndKeepsTheCode) {
  StatusOr<Json> doc = ParseJson("{\"a\": ", "rec.json", StatusCode::kDataLoss);
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(std::string(doc.status().message()), HasSubstr("rec.json: not valid JSON: "));
  EXPECT_TRUE(ParseJson("{\"a\": 1}", "x").ok());
}

TEST(JsonReaderTest, MissingMemberNamesPointerAndExpectation) {
  const Json doc = Json::parse(R"({"owner": {"name": "a"}})");
  JsonReader r(doc, "rec.json", StatusCode::kDataLoss);
  StatusOr<JsonReader> owner = r.Object("owner");
  ASSERT_TRUE(owner.ok());
  StatusOr<std::string> kind = owner->String("kind");
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(std::string(kind.status().message()),
              StrEq("rec.json: /owner/kind: expected a string, got nothing (the member is missing)"));
}

TEST(JsonReaderTest, WrongTypeSaysWhatWasThere) {
  const Json doc = Json::parse(R"({"version": "2", "list": [1, {"x": true}]})");
  JsonReader r(doc, "f");
  StatusOr<uint64_t> v = r.Uint("version");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              StrEq("f: /version: expected a non-negative integer, got \"2\""));
  StatusOr<std::vector<JsonReader>> list = r.Array("list");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  StatusOr<std::string> s = (*list)[1].String("x");
  EXPECT_THAT(std::string(s.status().message()), StrEq("f: /list/1/x: expected a string, got true"));
}

TEST(JsonReaderTest, RootIsNamedTheDocument) {
  const Json doc = Json::parse("[1]");
  JsonReader r(doc, "");
  Status s = r.ExpectObject();
  EXPECT_THAT(std::string(s.message()), StrEq("the document: expected an object, got an array"));
}

TEST(JsonReaderTest, PointerTokensAreEscaped) {
  const Json doc = Json::parse(R"({"a/b": {"c~d": 1}})");
  JsonReader r(doc, "f");
  StatusOr<JsonReader> inner = r.Object("a/b");
  ASSERT_TRUE(inner.ok());
  StatusOr<std::string> s = inner->String("c~d");
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("f: /a~1b/c~0d: expected a string"));
}

TEST(JsonReaderTest, IntegerRangesAreChecked) {
  const Json doc = Json::parse(R"({"big": 4294967296, "neg": -1, "ok": 7, "f": 1.5})");
  JsonReader r(doc, "f");
  EXPECT_FALSE(r.Uint32("big").ok());
  EXPECT_FALSE(r.Uint("neg").ok());
  EXPECT_THAT(std::string(r.Uint("neg").status().message()), HasSubstr("got -1"));
  EXPECT_EQ(*r.Uint32("ok"), 7u);
  EXPECT_FALSE(r.Int("ok", 0, 5).ok());
  EXPECT_THAT(std::string(r.Int("ok", 0, 5).status().message()),
              HasSubstr("expected an integer in [0, 5], got 7"));
  EXPECT_EQ(*r.Int("neg", -2, 0), -1);
  EXPECT_FALSE(r.Uint("f").ok());
  EXPECT_DOUBLE_EQ(*r.Double("f"), 1.5);
  EXPECT_DOUBLE_EQ(*r.Double("ok"), 7.0);
}

TEST(JsonReaderTest, OptionalMembersTakeTheDefaultOnlyWhenAbsentOrNull) {
  const Json doc = Json::parse(R"({"n": null, "s": 3})");
  JsonReader r(doc, "f");
  EXPECT_EQ(*r.OptionalString("n", "dflt"), "dflt");
  EXPECT_EQ(*r.OptionalString("absent", "dflt"), "dflt");
  EXPECT_FALSE(r.OptionalString("s").ok());
  EXPECT_EQ(*r.OptionalUint("absent", 9), 9u);
  EXPECT_TRUE(r.OptionalBool("absent", true).value());
  EXPECT_FALSE(r.OptionalObject("absent")->has_value());
  EXPECT_TRUE(r.OptionalArray("absent")->empty());
  EXPECT_FALSE(r.OptionalObject("s").ok());
}

TEST(JsonReaderTest, EnumListsTheChoices) {
  const Json doc = Json::parse(R"({"kind": "boss", "k2": "pod"})");
  JsonReader r(doc, "rec.json", StatusCode::kDataLoss);
  StatusOr<size_t> k = r.Enum("kind", {"none", "pod", "opaque"});
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(std::string(k.status().message()),
              StrEq("rec.json: /kind: expected one of none, pod, opaque, got \"boss\""));
  EXPECT_EQ(*r.Enum("k2", {"none", "pod", "opaque"}), 1u);
}

TEST(JsonReaderTest, UnknownKeysAreNamed) {
  const Json doc = Json::parse(R"({"a": 1, "typo": 2})");
  JsonReader r(doc, "cfg");
  Status s = r.NoUnknownKeys({"a", "b"});
  EXPECT_THAT(std::string(s.message()), HasSubstr("cfg: /typo: unknown member"));
  EXPECT_TRUE(r.NoUnknownKeys({"a", "typo"}).ok());
}

TEST(JsonReaderTest, ErrorAtNamesAMemberForRulesThatAreNotTypes) {
  const Json doc = Json::parse(R"({"placement": {"start": 3, "size": 2}})");
  JsonReader r(doc, "req");
  JsonReader p = r.Child("placement");
  Status s = p.ErrorAt("start", "must be a multiple of size");
  EXPECT_THAT(std::string(s.message()), StrEq("req: /placement/start: must be a multiple of size"));
}

TEST(JsonReaderTest, LongStringsAreNotEchoedWhole) {
  const Json doc = Json{{"x", std::string(1000, 'a')}};
  JsonReader r(doc, "f");
  EXPECT_THAT(std::string(r.Uint("x").status().message()), HasSubstr("a string of 1000 bytes"));
}

}  // namespace
}  // namespace migd
