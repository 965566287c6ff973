#include "engine/gpu_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "mig/catalog.h"

namespace migd::engine {
namespace {

driver::GpuInfo Gpu(uint32_t index, const std::string& uuid, uint32_t minor) {
  driver::GpuInfo g;
  g.index = GpuIndex(index);
  g.uuid = GpuUuid(uuid);
  g.minor = minor;
  return g;
}

const mig::GpuModel& A100() { return *mig::Catalog::Default().FindModel("a100-40gb"); }

constexpr char kUuid0[] = "GPU-00000000-0000-0000-0000-000000000000";
constexpr char kUuid1[] = "GPU-11111111-1111-1111-1111-111111111111";

TEST(GpuTableTest, EntriesOfListedAndSkippedGpusStartUnmanaged) {
  GpuTable t;
  t.Init({Gpu(0, kUuid0, 4)}, {GpuIndex(2)});
  EXPECT_EQ(t.Indices(), (std::vector<uint32_t>{0, 2}));
  EXPECT_TRUE(t.ManagedIndices().empty());
  EXPECT_FALSE(t.AnyManaged());
  EXPECT_EQ(t.Model(0), nullptr);
  EXPECT_EQ(t.ManagedInfo(0), nullptr);
  EXPECT_EQ(t.MinorOf(0), 0u) << "only a managed GPU's minor is published";
  EXPECT_TRUE(t.Listed(0));
  EXPECT_FALSE(t.Listed(2));
  EXPECT_EQ(t.InfoOf(2).index, GpuIndex(2));
  EXPECT_FALSE(t.Managed(7)) << "unknown index";
  // Gpus() reports listed GPUs only.
  ASSERT_EQ(t.Views().size(), 1u);
  EXPECT_EQ(t.Views()[0].model, nullptr);
}

TEST(GpuTableTest, ManageMakesTheInfoAndModelStable) {
  GpuTable t;
  t.Init({Gpu(0, kUuid0, 4)}, {GpuIndex(1)});
  t.Manage(0, Gpu(0, kUuid0, 4), A100());
  ASSERT_TRUE(t.Managed(0));
  const mig::GpuModel* model = t.Model(0);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->memory_slices, A100().memory_slices);
  EXPECT_EQ(t.MinorOf(0), 4u);
  // A skipped GPU that a later listing shows becomes listed and managed.
  t.Manage(1, Gpu(1, kUuid1, 9), A100());
  EXPECT_TRUE(t.Listed(1));
  EXPECT_EQ(t.ManagedIndices(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(t.Model(0), model) << "the table of a managed GPU never moves";
  EXPECT_EQ(t.ManagedIndexOf(GpuUuid(kUuid1), 7), 1u);
  EXPECT_EQ(t.ManagedIndexOf(GpuUuid(kUuid1), 1), std::nullopt);
  ASSERT_EQ(t.Views().size(), 2u);
  EXPECT_EQ(t.Views()[1].model, t.Model(1));
}

// Two threads locking {0, 1} and {1, 0} (a set: both in index order) never
// deadlock, and each GPU's lock excludes the other thread.
TEST(GpuTableTest, LocksAreTakenInIndexOrderAndExclude) {
  GpuTable t;
  t.Init({Gpu(0, kUuid0, 0), Gpu(1, kUuid1, 1)}, {});
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  auto worker = [&] {
    for (int i = 0; i < 2000; ++i) {
      GpuLocks locks = t.Lock({1, 0});
      if (inside.fetch_add(1) != 0) ++overlaps;
      inside.fetch_sub(1);
    }
  };
  std::thread a(worker);
  std::thread b(worker);
  a.join();
  b.join();
  EXPECT_EQ(overlaps.load(), 0);
  GpuLocks none = t.Lock({5});  // unknown indices are skipped
  GpuLocks moved(std::move(none));
}

}  // namespace
}  // namespace migd::engine
