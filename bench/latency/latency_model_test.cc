// The latency models file (latency-models.json) and its reader.
#include "bench/latency/latency_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

namespace migd::bench::latency {
namespace {

using ::testing::HasSubstr;

StatusOr<std::vector<LatencyModel>> LoadText(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return LoadLatencyModels(path);
}

TEST(LatencyModelsTest, TheShippedModelsCarryThePublishedFigures) {
  auto models = LoadLatencyModels(MIGD_LATENCY_MODELS);
  ASSERT_TRUE(models.ok()) << models.status();
  auto a100 = FindLatencyModel(*models, "a100-smi");
  ASSERT_TRUE(a100.ok());
  EXPECT_DOUBLE_EQ(a100->CreateMs(), 51.8);    // median, one 7g, 300 runs
  EXPECT_DOUBLE_EQ(a100->DestroyMs(), 120.2);  // median destroy-all of it
  EXPECT_THAT(a100->source, HasSubstr("n300.out"));
  EXPECT_EQ(a100->EnvValue(),
            "nvmlDeviceCreateGpuInstance=52,nvmlDeviceCreateGpuInstanceWithPlacement=52,"
            "nvmlGpuInstanceDestroy=120");
  auto marginal = FindLatencyModel(*models, "a100-marginal");
  ASSERT_TRUE(marginal.ok());
  EXPECT_LT(marginal->CreateMs(), a100->CreateMs());
  auto hami = FindLatencyModel(*models, "hami-claim");
  ASSERT_TRUE(hami.ok());
  EXPECT_DOUBLE_EQ(hami->CreateMs(), 1500);
  EXPECT_TRUE(FindLatencyModel(*models, "zero").ok());
  EXPECT_EQ(FindLatencyModel(*models, "zero")->EnvValue(), "");
}

TEST(LatencyModelsTest, UnknownModelNamesTheChoices) {
  auto models = LoadLatencyModels(MIGD_LATENCY_MODELS);
  ASSERT_TRUE(models.ok());
  const Status s = FindLatencyModel(*models, "h100").status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("zero, a100-smi"));
}

TEST(LatencyModelsTest, BadFilesAreRefusedWithThePointer) {
  EXPECT_EQ(LoadLatencyModels("/nonexistent/models.json").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(std::string(LoadText("a.json", "{").status().message()), HasSubstr("not valid JSON"));
  const Status neg =
      LoadText("b.json", R"({"models": [{"name": "x", "ms": {"nvmlGpuInstanceDestroy": -1}}]})")
          .status();
  EXPECT_EQ(neg.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(neg.message()),
              HasSubstr("/models/0/ms/nvmlGpuInstanceDestroy: expected a finite number"));
  EXPECT_THAT(std::string(LoadText("c.json", R"({"models": [{"name": "x", "ms": {"sleep": 1}}]})")
                              .status()
                              .message()),
              HasSubstr("not an NVML function name"));
  EXPECT_THAT(std::string(LoadText("d.json", R"({"models": [{"name": "x", "ms": {}},
                                                             {"name": "x", "ms": {}}]})")
                              .status()
                              .message()),
              HasSubstr("defined twice"));
  EXPECT_THAT(
      std::string(
          LoadText("e.json", R"({"models": [{"name": "zero", "ms": {}}]})").status().message()),
      HasSubstr("defined twice"));
  EXPECT_THAT(std::string(LoadText("f.json", R"({"modles": []})").status().message()),
              HasSubstr("modles"));
  EXPECT_THAT(std::string(LoadText("g.json", R"({"models": [{"name": "x", "ms": {"nvmlX": "1"}}]})")
                              .status()
                              .message()),
              HasSubstr("/models/0/ms/nvmlX"));
}

}  // namespace
}  // namespace migd::bench::latency
