// Registry, families, collectors and the text exposition format 0.0.4.
#include "metrics/registry.h"

#include <cmath>
#include <limits>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::metrics {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(NamesTest, MetricNames) {
  EXPECT_TRUE(IsValidMetricName("migd_allocations_total"));
  EXPECT_TRUE(IsValidMetricName("a:b_c9"));
  EXPECT_TRUE(IsValidMetricName(":x"));
  EXPECT_TRUE(IsValidMetricName("_x"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9x"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
  EXPECT_FALSE(IsValidMetricName("é"));
}

TEST(NamesTest, LabelNames) {
  EXPECT_TRUE(IsValidLabelName("gpu"));
  EXPECT_TRUE(IsValidLabelName("_a1"));
  EXPECT_FALSE(IsValidLabelName(""));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName("a-b"));
}

TEST(EscapeTest, HelpAndLabelValues) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");  // quotes stay in help
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  EXPECT_EQ(EscapeLabelValue("plain ünïcode"), "plain ünïcode");
}

TEST(FormatValueTest, SpecialAndShortest) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  EXPECT_EQ(FormatValue(5e-4), "0.0005");
  EXPECT_EQ(FormatValue(100000), "100000");
  EXPECT_EQ(FormatValue(-7), "-7");
  EXPECT_EQ(FormatValue(1.5e20), "1.5e+20");
  EXPECT_EQ(FormatValue(123456.5), "123456.5");
  EXPECT_EQ(FormatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatValue(0.1)), 0.1);
}

TEST(BucketsTest, Exponential) {
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ::testing::ElementsAre(1, 2, 4, 8));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
}

TEST(RegistryTest, CounterExposition) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(CounterFamily * f,
                            r.AddCounter("x_total", "Things.\nSecond \\ line.", {"a", "b"}));
  f->WithLabels({"1", "q\"x"}).Inc();
  f->WithLabels({"1", "q\"x"}).Inc(2.5);
  f->WithLabels({"0", "line\nbreak"}).Inc();
  f->WithLabels({"0", "line\nbreak"}).Inc(-5);  // ignored
  f->WithLabels({"0", "line\nbreak"}).Inc(std::nan(""));  // ignored
  EXPECT_EQ(r.Expose(),
            "# HELP x_total Things.\\nSecond \\\\ line.\n"
            "# TYPE x_total counter\n"
            "x_total{a=\"0\",b=\"line\\nbreak\"} 1\n"
            "x_total{a=\"1\",b=\"q\\\"x\"} 3.5\n");
}

TEST(RegistryTest, UnlabelledFamiliesStartAtZeroAndSortByName) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(GaugeFamily * g, r.AddGauge("b_gauge", "B.", {}));
  MIGD_ASSERT_OK_AND_ASSIGN(CounterFamily * c, r.AddCounter("a_total", "A.", {}));
  EXPECT_EQ(r.Expose(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 0\n"
            "# HELP b_gauge B.\n# TYPE b_gauge gauge\nb_gauge 0\n");
  g->WithLabels({}).Set(5);
  g->WithLabels({}).Dec(1.5);
  g->WithLabels({}).Inc();
  c->WithLabels({}).Inc();
  EXPECT_THAT(r.Expose(), HasSubstr("\na_total 1\n"));
  EXPECT_THAT(r.Expose(), HasSubstr("\nb_gauge 4.5\n"));
  EXPECT_EQ(g->WithLabels({}).Value(), 4.5);
}

TEST(RegistryTest, LabelledFamilyWithoutChildrenHasOnlyHeader) {
  Registry r;
  ASSERT_THAT(r.AddGauge("g", "G.", {"x"}).status(), IsOk());
  EXPECT_EQ(r.Expose(), "# HELP g G.\n# TYPE g gauge\n");
}

TEST(RegistryTest, HistogramMath) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(HistogramFamily * f,
                            r.AddHistogram("lat_seconds", "Latency.", {"path"}, {0.1, 1, 10}));
  Histogram& h = f->WithLabels({"create"});
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) h.Observe(v);
  h.Observe(std::nan(""));  // ignored
  Histogram::Snapshot s = h.Read();
  EXPECT_THAT(s.cumulative, ::testing::ElementsAre(2, 4, 5, 6));  // <=0.1, <=1, <=10, +Inf
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 56.65);
  const std::string text = r.Expose();
  EXPECT_THAT(text, HasSubstr("# TYPE lat_seconds histogram\n"
                              "lat_seconds_bucket{path=\"create\",le=\"0.1\"} 2\n"
                              "lat_seconds_bucket{path=\"create\",le=\"1\"} 4\n"
                              "lat_seconds_bucket{path=\"create\",le=\"10\"} 5\n"
                              "lat_seconds_bucket{path=\"create\",le=\"+Inf\"} 6\n"
                              "lat_seconds_sum{path=\"create\"} 56.65\n"
                              "lat_seconds_count{path=\"create\"} 6\n"));
}

TEST(RegistryTest, UnlabelledHistogram) {
  Registry r;
  ASSERT_THAT(r.AddHistogram("h", "H.", {}, {1}).status(), IsOk());
  EXPECT_EQ(r.Expose(),
            "# HELP h H.\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

TEST(RegistryTest, RejectsBadNames) {
  Registry r;
  EXPECT_THAT(r.AddCounter("bad-name", "", {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad-name")));
  EXPECT_THAT(r.AddCounter("ok_total", "", {"bad label"}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad label")));
  EXPECT_THAT(r.AddCounter("ok_total", "", {"__reserved"}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("__reserved")));
  EXPECT_THAT(r.AddGauge("g", "", {"a", "a"}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("duplicate label name")));
  EXPECT_THAT(r.AddHistogram("h", "", {"le"}, {1}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("\"le\"")));
  // "le" is fine outside histograms.
  EXPECT_THAT(r.AddGauge("g2", "", {"le"}).status(), IsOk());
}

TEST(RegistryTest, RejectsBadBuckets) {
  Registry r;
  EXPECT_THAT(r.AddHistogram("h", "", {}, {}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no bucket")));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {1, 1}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ascending")));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {2, 1}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ascending")));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {1, std::numeric_limits<double>::infinity()}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not finite")));
  EXPECT_THAT(r.AddHistogram("h", "", {}, {std::nan("")}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not finite")));
}

TEST(RegistryTest, RejectsDuplicatesIncludingHistogramSuffixes) {
  Registry r;
  ASSERT_THAT(r.AddCounter("c_total", "", {}).status(), IsOk());
  EXPECT_THAT(r.AddGauge("c_total", "", {}).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("c_total")));
  ASSERT_THAT(r.AddHistogram("h", "", {}, {1}).status(), IsOk());
  EXPECT_THAT(r.AddCounter("h_count", "", {}).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("h_count")));
  ASSERT_THAT(r.AddGauge("x_sum", "", {}).status(), IsOk());
  EXPECT_THAT(r.AddHistogram("x", "", {}, {1}).status(),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("x_sum")));
}

TEST(RegistryDeathTest, WrongLabelCountAborts) {
  Registry r;
  auto f = r.AddCounter("c_total", "", {"a"});
  ASSERT_TRUE(f.ok());
  EXPECT_DEATH((*f)->WithLabels({"1", "2"}), "values.size");
}

TEST(CollectorTest, EmitsDeclaredFamiliesAtScrapeTime) {
  Registry r;
  int scrapes = 0;
  ASSERT_THAT(r.AddCollector({{"col_gauge", "Collected \"gauge\".", MetricType::kGauge, {"k"}},
                              {"col_total", "Collected counter.", MetricType::kCounter, {}}},
                             [&](CollectSink& sink) {
                               ++scrapes;
                               sink.Add("col_gauge", {"b"}, scrapes);
                               sink.Add("col_gauge", {"a"}, 1);
                               sink.Add("col_gauge", {"a"}, 2);  // summed
                               sink.Add("col_total", {}, 7);
                               sink.Add("undeclared", {}, 1);     // dropped
                               sink.Add("col_gauge", {}, 1);      // wrong arity: dropped
                             }),
              IsOk());
  EXPECT_EQ(r.Expose(),
            "# HELP col_gauge Collected \"gauge\".\n# TYPE col_gauge gauge\n"
            "col_gauge{k=\"a\"} 3\ncol_gauge{k=\"b\"} 1\n"
            "# HELP col_total Collected counter.\n# TYPE col_total counter\ncol_total 7\n");
  EXPECT_EQ(r.dropped_samples(), 2u);
  EXPECT_THAT(r.Expose(), HasSubstr("col_gauge{k=\"b\"} 2\n"));
  EXPECT_EQ(scrapes, 2);
}

TEST(CollectorTest, CollectorMayUpdateOwnRegistry) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(CounterFamily * scrapes, r.AddCounter("scrapes_total", "", {}));
  ASSERT_THAT(r.AddCollector({{"up", "", MetricType::kGauge, {}}},
                             [&](CollectSink& sink) {
                               scrapes->WithLabels({}).Inc();  // no deadlock
                               sink.Add("up", {}, 1);
                             }),
              IsOk());
  EXPECT_THAT(r.Expose(), HasSubstr("scrapes_total 1\n"));
}

TEST(CollectorTest, RejectsBadDeclarationsAtomically) {
  Registry r;
  ASSERT_THAT(r.AddCounter("taken_total", "", {}).status(), IsOk());
  auto noop = [](CollectSink&) {};
  EXPECT_THAT(r.AddCollector({{"h", "", MetricType::kHistogram, {}}}, noop),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("counters and gauges")));
  EXPECT_THAT(r.AddCollector({{"fresh", "", MetricType::kGauge, {}},
                              {"taken_total", "", MetricType::kCounter, {}}},
                             noop),
              StatusIs(StatusCode::kAlreadyExists, HasSubstr("taken_total")));
  EXPECT_THAT(r.AddCollector({{"d", "", MetricType::kGauge, {}},
                              {"d", "", MetricType::kGauge, {}}},
                             noop),
              StatusIs(StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_THAT(r.AddCollector({{"bad name", "", MetricType::kGauge, {}}}, noop),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(r.AddCollector({{"x", "", MetricType::kGauge, {}}}, nullptr),
              StatusIs(StatusCode::kInvalidArgument, ::testing::_));
  // Nothing of the failed calls was registered.
  EXPECT_THAT(r.AddGauge("fresh", "", {}).status(), IsOk());
  EXPECT_THAT(r.AddGauge("d", "", {}).status(), IsOk());
}

TEST(RegistryTest, ConcurrentUpdatesAndScrapes) {
  Registry r;
  MIGD_ASSERT_OK_AND_ASSIGN(CounterFamily * c, r.AddCounter("c_total", "", {"t"}));
  MIGD_ASSERT_OK_AND_ASSIGN(HistogramFamily * h, r.AddHistogram("h", "", {}, {1}));
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        c->WithLabels({std::to_string(t % 2)}).Inc();
        h->WithLabels({}).Observe(0.5);
        if (i % 500 == 0) (void)r.Expose();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->WithLabels({"0"}).Value() + c->WithLabels({"1"}).Value(), kThreads * kPerThread);
  EXPECT_EQ(h->WithLabels({}).Read().count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_THAT(r.Expose(), HasSubstr("h_count 16000\n"));
}

}  // namespace
}  // namespace migd::metrics
