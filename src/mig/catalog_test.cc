#include "mig/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace migd::mig {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const GpuModel& Model(std::string_view key) {
  const GpuModel* m = Catalog::Default().FindModel(key);
  if (m == nullptr) {
    ADD_FAILURE() << "model " << key << " not in the catalogue";
    static const GpuModel kEmpty;
    return kEmpty;
  }
  return *m;
}

std::vector<Placement> Placements(std::initializer_list<uint32_t> starts, uint32_t size) {
  std::vector<Placement> out;
  for (uint32_t s : starts) out.push_back({s, size});
  return out;
}

TEST(CatalogTest, DefaultLoads) {
  StatusOr<Catalog> parsed = Catalog::FromJson(EmbeddedCatalogJson());
  ASSERT_THAT(parsed, IsOk());
  const Catalog& cat = Catalog::Default();
  EXPECT_EQ(cat.models().size(), parsed->models().size());
  std::vector<std::string> keys;
  for (const GpuModel& m : cat.models()) keys.push_back(m.key);
  EXPECT_THAT(keys, ElementsAre("a30-24gb", "a100-40gb", "a100-80gb", "h100-80gb", "h100-nvl-94gb",
                                "h200-141gb", "gh200-96gb", "gh200-144gb", "h20-96gb", "b200-180gb",
                                "gb200-186gb", "rtx-pro-6000-blackwell"));
  // One parse per process: the same object every time.
  EXPECT_EQ(&Catalog::Default(), &cat);
}

TEST(CatalogTest, EmbeddedJsonIsTheDataFileByteForByte) {
  std::ifstream in(MIGD_SOURCE_DIR "/data/mig-profiles.json", std::ios::binary);
  ASSERT_TRUE(in) << "cannot open data/mig-profiles.json";
  std::ostringstream content;
  content << in.rdbuf();
  EXPECT_EQ(EmbeddedCatalogJson(), content.str());
}

TEST(CatalogTest, EveryPlacementLiesOnTheGpu) {
  for (const GpuModel& m : Catalog::Default().models()) {
    SCOPED_TRACE(m.key);
    EXPECT_TRUE(m.memory_slices == 4 || m.memory_slices == 8 || m.memory_slices == 12);
    EXPECT_FALSE(m.gi_profiles.empty());
    for (const GiProfile& p : m.gi_profiles) {
      SCOPED_TRACE(p.name);
      ASSERT_FALSE(p.placements.empty());
      EXPECT_TRUE(std::is_sorted(p.placements.begin(), p.placements.end()));
      for (const Placement& pl : p.placements) {
        EXPECT_LE(pl.end(), m.memory_slices) << pl;
        EXPECT_EQ(pl.size, p.placement_size()) << pl;
      }
      EXPECT_EQ(m.gi_id_ranges.count(p.placement_size()), 1u);
      EXPECT_LE(p.slice_count, m.compute_slices);
      EXPECT_TRUE(m.engine_totals.Covers(p.engines));
      ASSERT_NE(p.DefaultCi(), nullptr);
      // The default CI spans the whole GI (on the double-memory 1g too: ID 7 is a 1-slice CI).
      EXPECT_EQ(p.DefaultCi()->slice_count, p.slice_count);
      for (const CiProfile& ci : p.ci_profiles) {
        EXPECT_LE(ci.slice_count, p.slice_count);
        for (const Placement& pl : ci.placements) EXPECT_LE(pl.end(), p.slice_count);
      }
    }
  }
}

TEST(CatalogTest, ProfileIdsByIndexAsDocumented) {
  for (const GpuModel& m : Catalog::Default().models()) {
    SCOPED_TRACE(m.key);
    const GiProfile* one_g = m.FindProfileByIndex(GiProfileIndex(0));
    ASSERT_NE(one_g, nullptr);
    EXPECT_EQ(one_g->slice_count, 1u);
    EXPECT_EQ(one_g->variant, Variant::kBase);
    if (m.memory_slices == 8) {
      EXPECT_EQ(one_g->id, GiProfileId(19));
      const GiProfile* seven_g = m.FindProfileByIndex(GiProfileIndex(4));
      ASSERT_NE(seven_g, nullptr);
      EXPECT_EQ(seven_g->id, GiProfileId(0));
      EXPECT_EQ(seven_g->slice_count, 7u);
      EXPECT_EQ(seven_g->placements, Placements({0}, 8));
      // The engine budget is the full-GPU profile's.
      EXPECT_EQ(m.engine_totals, seven_g->engines);
    } else {
      EXPECT_EQ(one_g->id, GiProfileId(14));
    }
  }
  EXPECT_EQ(Model("a100-40gb").FindProfileByIndex(GiProfileIndex(0))->id, GiProfileId(19));
  EXPECT_EQ(Model("h100-80gb").FindProfileByIndex(GiProfileIndex(0))->id, GiProfileId(19));
  EXPECT_EQ(Model("a30-24gb").FindProfileByIndex(GiProfileIndex(0))->id, GiProfileId(14));
  EXPECT_EQ(Model("rtx-pro-6000-blackwell").FindProfileByIndex(GiProfileIndex(0))->id,
            GiProfileId(14));
}

TEST(CatalogTest, A30HasFourMemoryUnits) {
  const GpuModel& a30 = Model("a30-24gb");
  EXPECT_EQ(a30.memory_slices, 4u);
  EXPECT_EQ(a30.compute_slices, 4u);
  EXPECT_EQ(a30.FindProfileByName("1g.6gb")->placements, Placements({0, 1, 2, 3}, 1));
  EXPECT_EQ(a30.FindProfileByName("2g.12gb")->placements, Placements({0, 2}, 2));
  EXPECT_EQ(a30.FindProfileByName("4g.24gb")->placements, Placements({0}, 4));
}

TEST(CatalogTest, RtxPro6000HasTwelveMemoryUnitsInTriples) {
  const GpuModel& rtx = Model("rtx-pro-6000-blackwell");
  EXPECT_EQ(rtx.memory_slices, 12u);
  EXPECT_EQ(rtx.compute_slices, 4u);
  EXPECT_EQ(rtx.FindProfileByName("1g.24gb")->placements, Placements({0, 3, 6, 9}, 3));
  EXPECT_EQ(rtx.FindProfileByName("2g.48gb")->placements, Placements({0, 6}, 6));
  EXPECT_EQ(rtx.FindProfileByName("4g.96gb")->placements, Placements({0}, 12));
  const GiProfile* me_all = rtx.FindProfileByName("1g.24gb+me.all");
  ASSERT_NE(me_all, nullptr);
  EXPECT_EQ(me_all->variant, Variant::kMeAll);
  EXPECT_EQ(me_all->index, GiProfileIndex(15));
  EXPECT_EQ(me_all->id, GiProfileId(65));
  EXPECT_EQ(rtx.gi_id_ranges.at(3), std::make_pair(3u, 6u));
  EXPECT_EQ(rtx.gi_id_ranges.at(12), std::make_pair(0u, 0u));
}

TEST(CatalogTest, H100DoubleMemoryOneGDefaultsToCiIndexSeven) {
  const GiProfile* p = Model("h100-80gb").FindProfileByName("1g.20gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->variant, Variant::kDoubleMemory);
  EXPECT_EQ(p->id, GiProfileId(15));
  EXPECT_EQ(p->placements, Placements({0, 2, 4, 6}, 2));
  const CiProfile* ci = p->DefaultCi();
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(ci->index, CiProfileIndex(7));
  EXPECT_EQ(ci->id, CiProfileId(7));
  EXPECT_EQ(p->FindCiByIndex(CiProfileIndex(7)), ci);
  EXPECT_EQ(p->FindCiByIndex(CiProfileIndex(3)), nullptr);
}

TEST(CatalogTest, H100ProfilesMatchTheReferenceTable) {
  const GpuModel& h100 = Model("h100-80gb");
  const GiProfile* three_g = h100.FindProfileByName("3g.40gb");
  ASSERT_NE(three_g, nullptr);
  EXPECT_EQ(three_g->id, GiProfileId(9));
  EXPECT_EQ(three_g->index, GiProfileIndex(2));
  EXPECT_EQ(three_g->instance_count, 2u);
  EXPECT_EQ(three_g->memory_mib, 40448u);
  EXPECT_EQ(three_g->sm_count, 60u);
  EXPECT_EQ(three_g->placements, Placements({0, 4}, 4));
  EXPECT_EQ(three_g->engines, (Engines{3, 3, 0, 3, 0}));
  EXPECT_TRUE(three_g->confirmed);
  EXPECT_EQ(h100.gi_id_ranges.at(1), std::make_pair(7u, 14u));
}

TEST(CatalogTest, FindsModelsByPciIdAndName) {
  const Catalog& cat = Catalog::Default();
  ASSERT_NE(cat.FindModelByPciDeviceId(0x233010DE), nullptr);
  EXPECT_EQ(cat.FindModelByPciDeviceId(0x233010DE)->key, "h100-80gb");
  EXPECT_EQ(cat.FindModelByPciDeviceId(0x20F110DE)->key, "a100-40gb");
  EXPECT_EQ(cat.FindModelByPciDeviceId(0x12345678), nullptr);
  ASSERT_NE(cat.FindModelByName("NVIDIA A30"), nullptr);
  EXPECT_EQ(cat.FindModelByName("NVIDIA A30")->key, "a30-24gb");
  EXPECT_EQ(cat.FindModelByName("NVIDIA A31"), nullptr);
  EXPECT_EQ(cat.FindModel("no-such-gpu"), nullptr);
}

TEST(CatalogTest, FindsProfilesByNameAliasAndNvmlPrefix) {
  const GpuModel& a100 = Model("a100-80gb");
  const GiProfile* p = a100.FindProfileByName("3g.40gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a100.FindProfileByName("3g.39gb"), p);
  EXPECT_EQ(a100.FindProfileByName("MIG 3g.40gb"), p);
  EXPECT_EQ(a100.FindProfileByName("MIG 3g.39gb"), p);
  EXPECT_EQ(a100.FindProfileById(GiProfileId(9)), p);
  EXPECT_EQ(a100.FindProfileByName("3g.41gb"), nullptr);
  EXPECT_EQ(a100.FindProfileById(GiProfileId(99)), nullptr);
  EXPECT_EQ(a100.FindProfileByIndex(GiProfileIndex(99)), nullptr);
}

TEST(CatalogTest, VariantNamesRoundTrip) {
  for (Variant v : {Variant::kBase, Variant::kMe, Variant::kMeAll, Variant::kNoMe, Variant::kGfx,
                    Variant::kDoubleMemory}) {
    StatusOr<Variant> parsed = ParseVariant(VariantName(v));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_EQ(VariantName(Variant::kMeAll), "me.all");
  EXPECT_THAT(ParseVariant("+me"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("+me")));
}

TEST(CatalogTest, EngineArithmetic) {
  Engines total{8, 7, 0, 7, 1};
  const Engines me{1, 1, 0, 1, 1};
  EXPECT_TRUE(total.Covers(me));
  total -= me;
  EXPECT_EQ(total, (Engines{7, 6, 0, 6, 0}));
  EXPECT_FALSE(total.Covers(me));
  total += me;
  EXPECT_EQ(total, (Engines{8, 7, 0, 7, 1}));
  Engines small{0, 0, 0, 0, 0};
  small -= me;
  EXPECT_EQ(small, Engines{});
}

// FromJson error paths, each made by breaking one item of the real document.
class CatalogFromJsonTest : public ::testing::Test {
 protected:
  void SetUp() override { doc_ = Json::parse(EmbeddedCatalogJson()); }
  // models[3] is h100-80gb; its giProfiles[0] is 1g.10gb.
  Json& H100() { return doc_["models"][3]; }
  Json& H100OneG() { return H100()["giProfiles"][0]; }
  StatusOr<Catalog> Parse() const { return Catalog::FromJson(doc_.dump()); }

  Json doc_;
};

TEST_F(CatalogFromJsonTest, TheUnmodifiedDocumentParses) {
  ASSERT_EQ(H100()["key"], "h100-80gb");
  ASSERT_EQ(H100OneG()["name"], "1g.10gb");
  EXPECT_THAT(Parse(), IsOk());
}

TEST_F(CatalogFromJsonTest, MalformedJson) {
  EXPECT_THAT(Catalog::FromJson("{\"schemaVersion\": 1, \"models\": ["),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(Catalog::FromJson(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("JSON")));
  EXPECT_THAT(Catalog::FromJson("[1, 2]"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
}

TEST_F(CatalogFromJsonTest, WrongSchemaVersion) {
  doc_["schemaVersion"] = 2;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                HasSubstr("unsupported schemaVersion 2 (want 1)")));
  doc_["schemaVersion"] = "1";
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("schemaVersion")));
  doc_.erase("schemaVersion");
  EXPECT_THAT(Parse(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("missing field 'schemaVersion'")));
}

TEST_F(CatalogFromJsonTest, PlacementOutOfRange) {
  H100OneG()["placements"][6]["start"] = 8;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("model 'h100-80gb'"), HasSubstr("'1g.10gb'"),
                                      HasSubstr("8:1"), HasSubstr("outside [0, 8)"))));
}

TEST_F(CatalogFromJsonTest, PlacementRunningPastTheEnd) {
  // 3g.40gb {0,4}:4 -> 4:5 would end at 9; also a mixed size, but range comes first.
  H100()["giProfiles"][4]["placements"][1]["size"] = 5;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'3g.40gb'"), HasSubstr("4:5"))));
}

TEST_F(CatalogFromJsonTest, PlacementsOfMixedSizes) {
  H100()["giProfiles"][4]["placements"][0]["size"] = 2;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'3g.40gb'"), HasSubstr("mixed sizes"))));
}

TEST_F(CatalogFromJsonTest, DuplicateProfileId) {
  H100()["giProfiles"][1]["id"] = 19;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("model 'h100-80gb'"), HasSubstr("'1g.10gb+me'"),
                                      HasSubstr("duplicate profile id 19"))));
}

TEST_F(CatalogFromJsonTest, DuplicateProfileIndex) {
  H100()["giProfiles"][1]["index"] = 0;
  EXPECT_THAT(Parse(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'1g.10gb+me'"), HasSubstr("duplicate profile index 0"))));
}

TEST_F(CatalogFromJsonTest, MissingField) {
  H100OneG().erase("smCount");
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("model 'h100-80gb'"), HasSubstr("'1g.10gb'"),
                                      HasSubstr("missing field 'smCount'"))));
}

TEST_F(CatalogFromJsonTest, MissingModelField) {
  H100().erase("engineTotals");
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("model 'h100-80gb'"),
                                      HasSubstr("missing field 'engineTotals'"))));
}

TEST_F(CatalogFromJsonTest, MissingEngineCount) {
  H100OneG()["engines"].erase("ofa");
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'1g.10gb' engines"), HasSubstr("'ofa'"))));
}

TEST_F(CatalogFromJsonTest, WrongFieldType) {
  H100OneG()["instanceCount"] = "7";
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'1g.10gb'"), HasSubstr("'instanceCount'"))));
}

TEST_F(CatalogFromJsonTest, NegativeNumber) {
  H100OneG()["sliceCount"] = -1;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'1g.10gb'"), HasSubstr("'sliceCount'"))));
}

TEST_F(CatalogFromJsonTest, UnknownVariant) {
  H100OneG()["variant"] = "turbo";
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'1g.10gb'"), HasSubstr("'turbo'"))));
}

TEST_F(CatalogFromJsonTest, CiLargerThanItsGi) {
  H100OneG()["ciProfiles"][0]["sliceCount"] = 2;
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("'1g.10gb'"), HasSubstr("CI profile id 0"),
                                      HasSubstr("larger than its GI"))));
}

TEST_F(CatalogFromJsonTest, NoIdRangeForAPlacementSize) {
  H100()["giIdRangesBySize"].erase("4");
  EXPECT_THAT(Parse(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'3g.40gb'"),
                             HasSubstr("no giIdRangesBySize entry for placement size 4"))));
}

TEST_F(CatalogFromJsonTest, DuplicateModelKeyAndPciId) {
  Json copy = H100();
  copy["names"] = Json::array({"NVIDIA H100 copy"});
  doc_["models"].push_back(copy);
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("h100-80gb"), HasSubstr("duplicate model key"))));
  doc_["models"].back()["key"] = "h100-copy";
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("h100-copy"), HasSubstr("0x233010DE"))));
}

TEST_F(CatalogFromJsonTest, BadPciDeviceId) {
  H100()["pciDeviceIds"][0] = "233010DE";
  EXPECT_THAT(Parse(), StatusIs(StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("h100-80gb"), HasSubstr("'233010DE'"))));
}

}  // namespace
}  // namespace migd::mig
