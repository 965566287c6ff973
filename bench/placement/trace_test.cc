// The Alibaba trace replay: the CSV reader on inline rows and on the pod
// lists carried in data/alibaba-gpu-v2023/, the gpu_milli mappings, and the
// request sequences built from them.
#include "bench/placement/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "mig/catalog.h"

namespace migd::bench {
namespace {

GpuTable Table(const char* key, bool dm) {
  StatusOr<GpuTable> t = GpuTable::Build(*mig::Catalog::Default().FindModel(key), dm);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

std::string DataFile(const std::string& name) {
  return std::string(MIGD_SOURCE_DIR) + "/data/alibaba-gpu-v2023/" + name;
}

constexpr char kCsv[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    "openb-pod-0001,6000,12288,1,460,,LS,Pending,100,400,\n"
    "openb-pod-0002,6000,12288,0,0,,BE,Succeeded,50,60,50\n"
    "openb-pod-0003,6000,12288,4,1000,,LS,Running,10,500,12\n"
    "openb-pod-0004,6000,12288,1,143,,Burstable,Failed,20,80,21\n";

TEST(TraceTest, ParsesPendingAndMultiGpuRows) {
  std::istringstream in(kCsv);
  StatusOr<std::vector<TracePod>> pods = ParseAlibabaCsv(in);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 5u);
  EXPECT_EQ((*pods)[1].phase, "Pending");
  EXPECT_FALSE((*pods)[1].scheduled.has_value());
  EXPECT_EQ((*pods)[3].num_gpu, 4);
  EXPECT_EQ((*pods)[3].scheduled, 12);
  EXPECT_EQ((*pods)[0].deletion, 12537496);

  GpuTable t = Table("h100-80gb", false);
  TraceSpec spec;
  spec.gpus = 8;
  spec.events = 4;
  spec.lifetime_cap_quantile = 1.0;
  TraceSummary sum;
  StatusOr<std::vector<Request>> reqs = BuildTraceRequests(t, *pods, spec, &sum);
  ASSERT_TRUE(reqs.ok()) << reqs.status().ToString();
  EXPECT_EQ(sum.cpu_only, 1);
  EXPECT_EQ(sum.single_gpu, 3);
  EXPECT_EQ(sum.multi_gpu_used, 1);
  EXPECT_EQ(sum.pending, 1);
  // Four GPU pods, creation order 0, 10, 20, 100 from a seed-dependent start.
  std::vector<int> sources;
  for (const Request& r : *reqs) sources.push_back(r.source);
  std::vector<int> sorted = sources;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 3, 4}));
  for (const Request& r : *reqs) {
    if (r.source == 3) {
      EXPECT_EQ(r.profiles, std::vector<int>(4, t.FindProfile("7g")));  // 4-GPU gang
      EXPECT_EQ(r.lifetime, 490);
    }
    if (r.source == 1) {
      EXPECT_EQ(r.lifetime, 300);  // Pending: deletion - creation
    }
    if (r.source == 4) {
      EXPECT_EQ(r.profiles, std::vector<int>{t.FindProfile("2g")});
    }
  }
  for (size_t i = 1; i < reqs->size(); ++i) EXPECT_GT((*reqs)[i].arrival, (*reqs)[i - 1].arrival);

  // Fewer GPUs than the gang: skipped.
  spec.gpus = 2;
  ASSERT_TRUE(BuildTraceRequests(t, *pods, spec, &sum).ok());
  EXPECT_EQ(sum.multi_gpu_skipped, 1);
}

TEST(TraceTest, RejectsMalformedRows) {
  std::istringstream bad_header("name,num_gpu\nx,1\n");
  EXPECT_FALSE(ParseAlibabaCsv(bad_header).ok());
  std::string text = kCsv;
  text += "openb-pod-0005,1,1,one,100,,LS,Running,0,1,0\n";
  std::istringstream bad_value(text);
  StatusOr<std::vector<TracePod>> r = ParseAlibabaCsv(bad_value);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("line 7"));
}

TEST(TraceTest, GpuMilliMappings) {
  const TraceMapping cc = TraceMapping::kComputeCeil, me = TraceMapping::kMemoryEighths;
  EXPECT_EQ(MapGpuMilli(0, cc), std::nullopt);
  EXPECT_EQ(*MapGpuMilli(1, cc), "1g");
  EXPECT_EQ(*MapGpuMilli(142, cc), "1g");  // 0.994 -> 1
  EXPECT_EQ(*MapGpuMilli(143, cc), "2g");  // 1.001 -> 2
  EXPECT_EQ(*MapGpuMilli(428, cc), "3g");  // 2.996
  EXPECT_EQ(*MapGpuMilli(429, cc), "4g");  // 3.003
  EXPECT_EQ(*MapGpuMilli(571, cc), "4g");  // 3.997
  EXPECT_EQ(*MapGpuMilli(572, cc), "7g");  // 4.004 -> 5 -> 7g
  EXPECT_EQ(*MapGpuMilli(1000, cc), "7g");
  EXPECT_EQ(*MapGpuMilli(125, me), "1g");
  EXPECT_EQ(*MapGpuMilli(126, me), "2g");
  EXPECT_EQ(*MapGpuMilli(250, me), "2g");
  EXPECT_EQ(*MapGpuMilli(251, me), "3g");
  EXPECT_EQ(*MapGpuMilli(500, me), "3g");
  EXPECT_EQ(*MapGpuMilli(501, me), "7g");
  EXPECT_EQ(*MapGpuMilli(1500, me), "7g");
}

// ---- statistics ----

// The carried pod lists, read as the benchmark reads them (counts from the
// files themselves: 8,152 pods each, data/README.md).
TEST(TraceTest, ReadsTheCarriedDefaultPodList) {
  StatusOr<std::vector<TracePod>> pods = ReadAlibabaCsv(DataFile("openb_pod_list_default.csv"));
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(pods->size(), 8152u);
  GpuTable t = Table("h100-80gb", false);
  TraceSpec spec;
  spec.gpus = 8;
  spec.events = 1000;
  TraceSummary sum;
  StatusOr<std::vector<Request>> reqs = BuildTraceRequests(t, *pods, spec, &sum);
  ASSERT_TRUE(reqs.ok()) << reqs.status().ToString();
  EXPECT_EQ(reqs->size(), 1000u);
  EXPECT_EQ(sum.pods, 8152);
  EXPECT_EQ(sum.cpu_only, 1088);
  EXPECT_EQ(sum.single_gpu, 6989);
  EXPECT_EQ(sum.pending, 861);
  EXPECT_EQ(sum.multi_gpu_used, 75);
  EXPECT_EQ(sum.multi_gpu_skipped, 0);
  EXPECT_EQ(sum.per_class, (std::vector<int>{32, 280, 389, 971, 5317}));
  EXPECT_GT(sum.lifetime_cap, 0);
}

TEST(TraceTest, ReadsTheCarriedGpushare100PodList) {
  StatusOr<std::vector<TracePod>> pods = ReadAlibabaCsv(DataFile("openb_pod_list_gpushare100.csv"));
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  GpuTable t = Table("h100-80gb", false);
  TraceSpec spec;
  spec.gpus = 4;
  spec.events = 500;
  spec.mapping = TraceMapping::kMemoryEighths;
  TraceSummary sum;
  ASSERT_TRUE(BuildTraceRequests(t, *pods, spec, &sum).ok());
  EXPECT_EQ(sum.pods, 8152);
  EXPECT_EQ(sum.single_gpu, 7064);
  EXPECT_EQ(sum.pending, 1173);
  EXPECT_EQ(sum.multi_gpu_used, 0);
  EXPECT_EQ(sum.per_class[t.FindProfile("4g")], 0);  // memory-eighths never maps to 4g
}

// The multigpu* pod lists of the dataset have only these five columns
// (upstream cluster-trace-gpu-v2023/csv/openb_pod_list_multigpu20.csv's
// header); rows written here in that shape.
constexpr char kUntimedCsv[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
    "openb-pod-0000,12000,16384,1,1000\n"
    "openb-pod-0001,6000,12288,2,1000\n"
    "openb-pod-0002,6000,12288,0,0\n"
    "openb-pod-0003,4000,8192,1,250\n";

TEST(TraceTest, ReadsPodListsWithoutTimingColumns) {
  std::istringstream in(kUntimedCsv);
  StatusOr<std::vector<TracePod>> pods = ParseAlibabaCsv(in);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_FALSE((*pods)[0].timed);
  EXPECT_EQ((*pods)[0].phase, "");
  EXPECT_FALSE((*pods)[0].scheduled.has_value());
  EXPECT_EQ((*pods)[1].num_gpu, 2);

  GpuTable t = Table("h100-80gb", false);
  TraceSpec spec;
  spec.gpus = 4;
  spec.events = 3000;
  TraceSummary sum;
  StatusOr<std::vector<Request>> reqs = BuildTraceRequests(t, *pods, spec, &sum);
  ASSERT_TRUE(reqs.ok()) << reqs.status().ToString();
  EXPECT_FALSE(sum.timed);
  EXPECT_EQ(sum.lifetime_cap, 0);
  EXPECT_EQ(sum.single_gpu, 2);
  EXPECT_EQ(sum.multi_gpu_used, 1);
  // File order from a seed-dependent start: rows 0, 1, 3, 0, 1, 3, ...
  for (size_t i = 1; i < 6; ++i) {
    const int prev = (*reqs)[i - 1].source;
    const int next = (*reqs)[i].source;
    EXPECT_EQ(next, prev == 0 ? 1 : prev == 1 ? 3 : 0) << i;
  }
  // Lifetimes are drawn (Exp(1)): not all equal, mean near 1.
  double sum_l = 0;
  for (const Request& r : *reqs) sum_l += r.lifetime;
  EXPECT_NEAR(sum_l / static_cast<double>(reqs->size()), 1.0, 0.1);
  EXPECT_NE((*reqs)[0].lifetime, (*reqs)[1].lifetime);
  for (size_t i = 1; i < reqs->size(); ++i) EXPECT_GT((*reqs)[i].arrival, (*reqs)[i - 1].arrival);

  // The trace's own arrival times need timing columns.
  spec.arrivals = TraceArrivals::kTrace;
  EXPECT_THAT(BuildTraceRequests(t, *pods, spec, &sum).status().message(),
              ::testing::HasSubstr("no timing columns"));
}

TEST(TraceTest, RejectsHalfTheTimingColumns) {
  std::istringstream in("name,num_gpu,gpu_milli,creation_time\nx,1,100,5\n");
  EXPECT_THAT(ParseAlibabaCsv(in).status().message(),
              ::testing::HasSubstr("creation_time without deletion_time"));
}

TEST(TraceTest, MissingFileIsNotFound) {
  StatusOr<std::vector<TracePod>> pods = ReadAlibabaCsv(DataFile("no-such-file.csv"));
  EXPECT_EQ(pods.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace migd::bench
