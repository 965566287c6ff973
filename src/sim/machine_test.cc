#include "sim/machine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "base/ids.h"
#include "sim/config.h"
#include "testing/status_matchers.h"

namespace migd::sim {
namespace {

using ::testing::ElementsAre;

const mig::Catalog& Cat() { return mig::Catalog::Default(); }

SimState NewState(std::string_view gpus, GiIdPolicy policy = {}) {
  StatusOr<std::vector<GpuSpec>> specs = ParseGpuSpecs(gpus);
  EXPECT_TRUE(specs.ok()) << specs.status();
  MachineOptions options;
  options.gpus = *specs;
  options.gi_id_policy = policy;
  options.nonce = 42;
  StatusOr<SimState> state = NewMachineState(options, Cat());
  EXPECT_TRUE(state.ok()) << state.status();
  return *state;
}

constexpr GpuIndex kGpu0(0);

// Creates a GI and returns its (start, id); fails the test on error.
std::pair<uint32_t, uint32_t> Create(Machine& m, uint32_t profile,
                                     std::optional<mig::Placement> p = std::nullopt,
                                     GpuIndex gpu = kGpu0) {
  SimOr<SimGi> gi = m.CreateGi(gpu, GiProfileId(profile), p);
  EXPECT_TRUE(gi.ok()) << gi.status().ToString();
  if (!gi.ok()) return {99, 99};
  return {gi->placement.start, gi->id.value()};
}

nvmlReturn_t CreateCode(Machine& m, uint32_t profile, std::optional<mig::Placement> p,
                        GpuIndex gpu = kGpu0) {
  return m.CreateGi(gpu, GiProfileId(profile), p).code();
}

TEST(NewMachineStateTest, NumbersGpusAndDerivesIdentity) {
  SimState s = NewState("a100-40gb:2,h100-80gb:1:mig-off:no-permission");
  ASSERT_EQ(s.gpus.size(), 3u);
  EXPECT_EQ(s.gpus[2].index, GpuIndex(2));
  EXPECT_EQ(s.gpus[2].model_key, "h100-80gb");
  EXPECT_EQ(s.gpus[1].minor, 1u);
  EXPECT_FALSE(s.gpus[2].mig_current);
  EXPECT_FALSE(s.gpus[2].mig_pending);
  EXPECT_FALSE(s.gpus[2].permission);
  EXPECT_TRUE(s.gpus[0].permission);
  EXPECT_TRUE(IsValidGpuUuid(s.gpus[0].uuid.value()));
  EXPECT_NE(s.gpus[0].uuid, s.gpus[1].uuid);
  EXPECT_EQ(s.gpus[0].pci_bus_id, "00000000:17:00.0");
  EXPECT_EQ(s.gpus[1].pci_bus_id, "00000000:37:00.0");
  EXPECT_EQ(s.driver_version, "580.95.05");
  EXPECT_EQ(s.nvml_version, "13.580.95.05");
  // Same model, index and nonce: same UUID.
  EXPECT_EQ(NewState("a100-40gb:1").gpus[0].uuid, s.gpus[0].uuid);
}

TEST(NewMachineStateTest, RejectsUnknownModelAndTooManyGpus) {
  MachineOptions o;
  o.gpus = {{"no-such-gpu", 1}};
  EXPECT_THAT(NewMachineState(o, Cat()),
              testing::StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("no-such-gpu")));
  o.gpus = {{"a100-40gb", 33}};
  EXPECT_THAT(NewMachineState(o, Cat()),
              testing::StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("32")));
  o.gpus = {};
  EXPECT_FALSE(NewMachineState(o, Cat()).ok());
}

TEST(MachineTest, UnlistedPlacementIsInvalidArgument) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(CreateCode(m, 9, mig::Placement{1, 4}), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCode(m, 19, mig::Placement{7, 1}), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCode(m, 9, mig::Placement{0, 3}), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
  EXPECT_EQ(s.serial, 0u);
}

TEST(MachineTest, OverlapCapAndEngineBudgetAreInsufficientResources) {
  SimState s = NewState("h100-80gb:1,rtx-pro-6000-blackwell:1");
  Machine m(s, Cat());
  Create(m, 9, mig::Placement{0, 4});
  // Overlap.
  EXPECT_EQ(CreateCode(m, 5, mig::Placement{0, 4}), NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(CreateCode(m, 19, mig::Placement{2, 1}), NVML_ERROR_INSUFFICIENT_RESOURCES);
  // Instance cap: one 1g+me (id 20) per GPU.
  Create(m, 20, mig::Placement{4, 1});
  EXPECT_EQ(CreateCode(m, 20, mig::Placement{5, 1}), NVML_ERROR_INSUFFICIENT_RESOURCES);
  // Engine budget on RTX PRO 6000: +me.all (65) next to a base 1g (14).
  const GpuIndex rtx(1);
  Create(m, 14, mig::Placement{0, 3}, rtx);
  EXPECT_EQ(CreateCode(m, 65, mig::Placement{3, 3}, rtx), NVML_ERROR_INSUFFICIENT_RESOURCES);
  // ...but -me (67) profiles coexist with +me.all.
  SimState s2 = NewState("rtx-pro-6000-blackwell:1");
  Machine m2(s2, Cat());
  Create(m2, 65, mig::Placement{0, 3});
  Create(m2, 67, mig::Placement{3, 3});
  EXPECT_EQ(CreateCode(m2, 14, mig::Placement{6, 3}), NVML_ERROR_INSUFFICIENT_RESOURCES);
}

TEST(MachineTest, UnknownProfileOnCreateIsInvalidArgument) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(CreateCode(m, 47, mig::Placement{0, 1}), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(CreateCode(m, 1234, std::nullopt), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m.CreateGi(GpuIndex(5), GiProfileId(19), std::nullopt).code(),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST(MachineTest, MigDisabledIsNotSupported) {
  SimState s = NewState("a100-40gb:1:mig-off");
  Machine m(s, Cat());
  EXPECT_EQ(CreateCode(m, 19, mig::Placement{0, 1}), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(CreateCode(m, 19, std::nullopt), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(m.DestroyGi(kGpu0, NvmlGiId(7)).code(), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(m.GiRemainingCapacity(kGpu0, GiProfileId(19)).code(), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(m.MaxMigDeviceCount(kGpu0), 0u);
  EXPECT_TRUE(m.MigDevices(kGpu0).empty());
}

TEST(MachineTest, H100SevenAutoPlacedOneSlicesFollowTheObservedSequence) {
  SimState s = NewState("h100-80gb:1");
  Machine m(s, Cat());
  std::vector<uint32_t> starts;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 7; ++i) {
    auto [start, id] = Create(m, 19);
    starts.push_back(start);
    ids.push_back(id);
  }
  EXPECT_THAT(starts, ElementsAre(6, 4, 5, 0, 1, 2, 3));
  EXPECT_THAT(ids, ElementsAre(13, 11, 12, 7, 8, 9, 10));
  EXPECT_EQ(CreateCode(m, 19, std::nullopt), NVML_ERROR_INSUFFICIENT_RESOURCES);
}

TEST(MachineTest, A30AutoPlacementAndIds) {
  SimState s = NewState("a30-24gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(Create(m, 14), std::make_pair(0u, 3u));
  EXPECT_EQ(Create(m, 14), std::make_pair(1u, 4u));
  EXPECT_EQ(Create(m, 5), std::make_pair(2u, 2u));
}

TEST(MachineTest, RtxPro6000FourOneSlicesAutoPlaced) {
  SimState s = NewState("rtx-pro-6000-blackwell:1");
  Machine m(s, Cat());
  std::vector<uint32_t> starts;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto [start, id] = Create(m, 14);
    starts.push_back(start);
    ids.push_back(id);
  }
  EXPECT_THAT(starts, ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(ids, ElementsAre(3, 4, 5, 6));
  // A 2g at 0:6 gets GI 1 (mig-hardware.md §2.11).
  SimState s2 = NewState("rtx-pro-6000-blackwell:1");
  Machine m2(s2, Cat());
  EXPECT_EQ(Create(m2, 5, mig::Placement{0, 6}), std::make_pair(0u, 1u));
}

TEST(MachineTest, A100GuideAutoPlacementSequences) {
  {  // -cgi 14,19,19,19,19,19: 2g at 4:2, then 1g at 6, 0, 1, 2, 3.
    SimState s = NewState("a100-40gb:1");
    Machine m(s, Cat());
    std::vector<uint32_t> starts{Create(m, 14).first};
    for (int i = 0; i < 5; ++i) starts.push_back(Create(m, 19).first);
    EXPECT_THAT(starts, ElementsAre(4, 6, 0, 1, 2, 3));
  }
  {  // -cgi 9,19,14,19: 3g at 4:4, 1g at 0, 2g at 2:2, 1g at 1.
    SimState s = NewState("a100-40gb:1");
    Machine m(s, Cat());
    EXPECT_EQ(Create(m, 9).first, 4u);
    EXPECT_EQ(Create(m, 19).first, 0u);
    EXPECT_EQ(Create(m, 14).first, 2u);
    EXPECT_EQ(Create(m, 19).first, 1u);
  }
  {  // -cgi 19,19,14,9 fails on the 3g.
    SimState s = NewState("a100-40gb:1");
    Machine m(s, Cat());
    Create(m, 19);
    Create(m, 19);
    Create(m, 14);
    EXPECT_EQ(CreateCode(m, 9, std::nullopt), NVML_ERROR_INSUFFICIENT_RESOURCES);
  }
}

TEST(MachineTest, ExplicitPlacementIdsFollowSizeClassRanges) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(Create(m, 9, mig::Placement{0, 4}).second, 1u);
  EXPECT_EQ(Create(m, 9, mig::Placement{4, 4}).second, 2u);
  SimState s2 = NewState("h100-80gb:1");
  Machine m2(s2, Cat());
  EXPECT_EQ(Create(m2, 15, mig::Placement{6, 2}).second, 6u);  // 1g.20gb: 3 + 6/2
  EXPECT_EQ(Create(m2, 14, mig::Placement{2, 2}).second, 4u);  // 2g: 3 + 2/2
  EXPECT_EQ(Create(m2, 19, mig::Placement{0, 1}).second, 7u);
  SimState s3 = NewState("h100-80gb:1");
  Machine m3(s3, Cat());
  EXPECT_EQ(Create(m3, 0, mig::Placement{0, 8}).second, 0u);
}

TEST(MachineTest, DeterministicIdFallsBackToLowestFreeWhenPreferredIsTaken) {
  SimState s = NewState("h100-80gb:1");
  {
    Machine m(s, Cat());
    Create(m, 19, mig::Placement{0, 1});
  }
  // A recorded state in which 1g@0 holds id 8 (not 7).
  s.gpus[0].gpu_instances[0].id = NvmlGiId(8);
  Machine m(s, Cat());
  EXPECT_EQ(Create(m, 19, mig::Placement{1, 1}).second, 7u);  // preferred 8 is taken
  EXPECT_EQ(Create(m, 19, mig::Placement{2, 1}).second, 9u);
}

TEST(MachineTest, ShufflePolicyStaysInsideRangesAndIsSeeded) {
  auto run = [](uint64_t seed) {
    SimState s = NewState("a100-40gb:1", GiIdPolicy{GiIdMode::kShuffle, seed});
    Machine m(s, Cat());
    std::vector<uint32_t> ids;
    for (uint32_t start = 0; start < 7; ++start) {
      ids.push_back(Create(m, 19, mig::Placement{start, 1}).second);
    }
    return ids;
  };
  std::set<std::vector<uint32_t>> distinct;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::vector<uint32_t> ids = run(seed);
    EXPECT_EQ(ids, run(seed)) << "same seed, same ids";
    std::set<uint32_t> unique(ids.begin(), ids.end());
    EXPECT_EQ(unique.size(), 7u);
    for (uint32_t id : ids) {
      EXPECT_GE(id, 7u);
      EXPECT_LE(id, 14u);
    }
    distinct.insert(ids);
  }
  EXPECT_GT(distinct.size(), 1u) << "the seed must matter";
  // Other sizes stay in their ranges too.
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SimState s = NewState("a100-40gb:1", GiIdPolicy{GiIdMode::kShuffle, seed});
    Machine m(s, Cat());
    uint32_t a = Create(m, 9, mig::Placement{0, 4}).second;
    uint32_t b = Create(m, 9, mig::Placement{4, 4}).second;
    EXPECT_TRUE((a == 1 && b == 2) || (a == 2 && b == 1)) << a << " " << b;
    SimState s2 = NewState("a100-40gb:1", GiIdPolicy{GiIdMode::kShuffle, seed});
    Machine m2(s2, Cat());
    uint32_t c = Create(m2, 14, mig::Placement{2, 2}).second;
    EXPECT_GE(c, 3u);
    EXPECT_LE(c, 6u);
  }
}

TEST(MachineTest, ComputeInstancesOccupyComputeSlices) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  const NvmlGiId gi(Create(m, 0, mig::Placement{0, 8}).second);  // 7g
  // 1c (id 0) auto-placed at the lowest free start, ids lowest free.
  SimOr<SimCi> a = m.CreateCi(kGpu0, gi, CiProfileId(0), std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->id, NvmlCiId(0));
  EXPECT_EQ(a->placement, (mig::Placement{0, 1}));
  SimOr<SimCi> b = m.CreateCi(kGpu0, gi, CiProfileId(2), std::nullopt);  // 3c: {0,4}:3
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->placement, (mig::Placement{4, 3}));
  EXPECT_EQ(b->id, NvmlCiId(1));
  // Overlap with 3c@4.
  EXPECT_EQ(m.CreateCi(kGpu0, gi, CiProfileId(0), mig::Placement{5, 1}).code(),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  // Unlisted CI placement.
  EXPECT_EQ(m.CreateCi(kGpu0, gi, CiProfileId(1), mig::Placement{1, 2}).code(),
            NVML_ERROR_INVALID_ARGUMENT);
  // 2c at 2 fits; 2c then has 2 of its 3 placements blocked.
  SimOr<SimCi> c = m.CreateCi(kGpu0, gi, CiProfileId(1), mig::Placement{2, 2});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, NvmlCiId(2));
  EXPECT_EQ(m.CreateCi(kGpu0, gi, CiProfileId(1), std::nullopt).code(),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  // Remaining: 1 slice (1) free → one more 1c.
  EXPECT_EQ(*m.CiRemainingCapacity(kGpu0, gi, CiProfileId(0)), 1u);
  EXPECT_EQ(*m.CiRemainingCapacity(kGpu0, gi, CiProfileId(4)), 0u);
  // Destroying CI 0 frees id 0 for the next CI.
  EXPECT_TRUE(m.DestroyCi(kGpu0, gi, NvmlCiId(0)).ok());
  SimOr<SimCi> d = m.CreateCi(kGpu0, gi, CiProfileId(0), std::nullopt);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->id, NvmlCiId(0));
}

TEST(MachineTest, CiProfileCapAndSizeRules) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  const NvmlGiId g3(Create(m, 9, mig::Placement{0, 4}).second);
  // The full-size CI (id 2) exists once.
  ASSERT_TRUE(m.CreateCi(kGpu0, g3, CiProfileId(2), std::nullopt).ok());
  EXPECT_EQ(m.CreateCi(kGpu0, g3, CiProfileId(2), std::nullopt).code(),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  // A CI larger than the GI (7c, 4c) is NOT_SUPPORTED; past the last index
  // INVALID_ARGUMENT.
  EXPECT_EQ(m.CreateCi(kGpu0, g3, CiProfileId(4), std::nullopt).code(), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(m.CreateCi(kGpu0, g3, CiProfileId(3), std::nullopt).code(), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(m.CreateCi(kGpu0, g3, CiProfileId(9), std::nullopt).code(),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m.CreateCi(kGpu0, NvmlGiId(14), CiProfileId(0), std::nullopt).code(),
            NVML_ERROR_NOT_FOUND);
  // The CI instance cap: three 1c in a fresh 3g, not four.
  const NvmlGiId g3b(Create(m, 9, mig::Placement{4, 4}).second);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(m.CreateCi(kGpu0, g3b, CiProfileId(0), std::nullopt).ok());
  EXPECT_EQ(m.CreateCi(kGpu0, g3b, CiProfileId(0), std::nullopt).code(),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(m.CiRemainingCapacity(kGpu0, g3b, CiProfileId(7)).code(), NVML_ERROR_INVALID_ARGUMENT);
}

TEST(MachineTest, DestroyOrderingAndInUse) {
  SimState s = NewState("h100-80gb:1");
  Machine m(s, Cat());
  const NvmlGiId gi(Create(m, 14, mig::Placement{0, 2}).second);
  SimOr<SimCi> ci = m.CreateCi(kGpu0, gi, CiProfileId(1), std::nullopt);
  ASSERT_TRUE(ci.ok());
  EXPECT_EQ(m.DestroyGi(kGpu0, gi).code(), NVML_ERROR_IN_USE);
  ASSERT_TRUE(m.AttachProcess(ci->uuid.value(), 4242, 1 << 20).ok());
  ASSERT_TRUE(m.AttachProcess(ci->uuid.value(), 4242, 2 << 20).ok());  // updates
  EXPECT_EQ(m.FindCi(kGpu0, gi, ci->id)->processes.size(), 1u);
  EXPECT_EQ(m.FindCi(kGpu0, gi, ci->id)->processes[0].used_gpu_memory, 2u << 20);
  EXPECT_EQ(m.DestroyCi(kGpu0, gi, ci->id).code(), NVML_ERROR_IN_USE);
  EXPECT_EQ(m.DestroyGi(kGpu0, gi).code(), NVML_ERROR_IN_USE);
  EXPECT_EQ(m.DetachProcess(ci->uuid.value(), 1).code(), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(m.AttachProcess("MIG-00000000-0000-5000-8000-000000000000", 1, 0).code(),
            NVML_ERROR_NOT_FOUND);
  ASSERT_TRUE(m.DetachProcess(ci->uuid.value(), 4242).ok());
  EXPECT_TRUE(m.DestroyCi(kGpu0, gi, ci->id).ok());
  EXPECT_EQ(m.DestroyCi(kGpu0, gi, ci->id).code(), NVML_ERROR_NOT_FOUND);
  EXPECT_TRUE(m.DestroyGi(kGpu0, gi).ok());
  EXPECT_EQ(m.DestroyGi(kGpu0, gi).code(), NVML_ERROR_NOT_FOUND);
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
}

TEST(MachineTest, RemainingCapacityComesFromLayout) {
  // A public guide: on H100 one 3g makes the 1g capacity 4 at 4, 3 at 0.
  SimState s = NewState("h100-80gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(*m.GiRemainingCapacity(kGpu0, GiProfileId(19)), 7u);
  Create(m, 9, mig::Placement{4, 4});
  EXPECT_EQ(*m.GiRemainingCapacity(kGpu0, GiProfileId(19)), 4u);
  SimState s2 = NewState("h100-80gb:1");
  Machine m2(s2, Cat());
  Create(m2, 9, mig::Placement{0, 4});
  EXPECT_EQ(*m2.GiRemainingCapacity(kGpu0, GiProfileId(19)), 3u);
  EXPECT_EQ(m2.GiRemainingCapacity(kGpu0, GiProfileId(77)).code(), NVML_ERROR_INVALID_ARGUMENT);
}

TEST(MachineTest, MigUuidsAreVersion5AndNewOnRecreation) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  std::set<std::string> seen;
  for (int round = 0; round < 3; ++round) {
    const NvmlGiId gi(Create(m, 19, mig::Placement{0, 1}).second);
    SimOr<SimCi> ci = m.CreateCi(kGpu0, gi, CiProfileId(0), std::nullopt);
    ASSERT_TRUE(ci.ok());
    const std::string& u = ci->uuid.value();
    EXPECT_TRUE(IsValidMigUuid(u)) << u;
    EXPECT_EQ(u[4 + 9 + 5], '5') << u;  // version nibble
    EXPECT_NE(std::string("89ab").find(u[4 + 9 + 5 + 5]), std::string::npos) << u;  // variant
    EXPECT_EQ(gi, NvmlGiId(7));
    EXPECT_EQ(ci->id, NvmlCiId(0));
    EXPECT_TRUE(seen.insert(u).second) << "re-created instance reused UUID " << u;
    ASSERT_TRUE(m.DestroyCi(kGpu0, gi, ci->id).ok());
    ASSERT_TRUE(m.DestroyGi(kGpu0, gi).ok());
  }
  EXPECT_TRUE(m.FindCiByUuid("MIG-nope") == std::nullopt);
}

TEST(MachineTest, MigDeviceIndicesAreDenseAndRenumbered) {
  SimState s = NewState("h100-80gb:1");
  Machine m(s, Cat());
  EXPECT_EQ(m.MaxMigDeviceCount(kGpu0), 7u);
  std::vector<std::vector<MigDeviceRef>> orders;
  for (uint32_t start = 0; start < 7; ++start) {
    const NvmlGiId gi(Create(m, 19, mig::Placement{start, 1}).second);
    ASSERT_TRUE(m.CreateCi(kGpu0, gi, CiProfileId(0), std::nullopt).ok());
    std::vector<MigDeviceRef> order = m.MigDevices(kGpu0);
    EXPECT_EQ(order.size(), start + 1);
    std::set<uint32_t> gis;
    for (const MigDeviceRef& r : order) gis.insert(r.gi.value());
    EXPECT_EQ(gis.size(), order.size());
    orders.push_back(order);
  }
  // The relative order of the devices that already existed changes at least
  // once: code must not keep MIG device indices across changes.
  int reorders = 0;
  for (size_t i = 1; i < orders.size(); ++i) {
    std::vector<MigDeviceRef> kept;
    for (const MigDeviceRef& r : orders[i]) {
      for (const MigDeviceRef& old : orders[i - 1]) {
        if (old == r) kept.push_back(r);
      }
    }
    if (kept != orders[i - 1]) ++reorders;
  }
  EXPECT_GT(reorders, 0);
  SimState a30 = NewState("a30-24gb:1");
  EXPECT_EQ(Machine(a30, Cat()).MaxMigDeviceCount(kGpu0), 4u);
}

TEST(MachineTest, SetMigModeIsPendingUntilReboot) {
  SimState s = NewState("a100-40gb:1,a100-40gb:1:mig-off");
  Machine m(s, Cat());
  EXPECT_EQ(*m.SetMigMode(kGpu0, true), NVML_SUCCESS);  // already on
  Create(m, 19, mig::Placement{0, 1});
  EXPECT_EQ(*m.SetMigMode(kGpu0, false), NVML_ERROR_IN_USE);
  EXPECT_TRUE(s.gpus[0].mig_current);
  EXPECT_FALSE(s.gpus[0].mig_pending);
  EXPECT_EQ(*m.SetMigMode(GpuIndex(1), true), NVML_ERROR_RESET_REQUIRED);
  EXPECT_FALSE(s.gpus[1].mig_current);
  EXPECT_EQ(m.SetMigMode(GpuIndex(2), true).code(), NVML_ERROR_INVALID_ARGUMENT);
  m.Reboot();
  EXPECT_FALSE(s.gpus[0].mig_current);
  EXPECT_TRUE(s.gpus[1].mig_current);
  EXPECT_EQ(s.boot_count, 1u);
}

TEST(MachineTest, RebootDropsEveryInstanceAndKeepsMigMode) {
  SimState s = NewState("a100-40gb:2");
  Machine m(s, Cat());
  const NvmlGiId gi(Create(m, 9, mig::Placement{0, 4}).second);
  SimOr<SimCi> ci = m.CreateCi(kGpu0, gi, CiProfileId(2), std::nullopt);
  ASSERT_TRUE(m.AttachProcess(ci->uuid.value(), 7, 0).ok());
  Create(m, 0, mig::Placement{0, 8}, GpuIndex(1));
  const uint64_t serial = s.serial;
  m.Reboot();
  EXPECT_TRUE(s.gpus[0].gpu_instances.empty());
  EXPECT_TRUE(s.gpus[1].gpu_instances.empty());
  EXPECT_TRUE(s.gpus[0].mig_current);
  EXPECT_EQ(s.boot_count, 1u);
  EXPECT_GT(s.serial, serial);
  // The old UUID is gone for good.
  EXPECT_FALSE(m.FindCiByUuid(ci->uuid.value()).has_value());
}

TEST(MachineTest, CountCallAccumulates) {
  SimState s = NewState("a100-40gb:1");
  Machine m(s, Cat());
  m.CountCall("nvmlInit_v2", "SUCCESS");
  m.CountCall("nvmlInit_v2", "SUCCESS");
  m.CountCall("nvmlInit_v2", "ERROR_UNKNOWN");
  EXPECT_EQ(s.counters["nvmlInit_v2"]["SUCCESS"], 2u);
  EXPECT_EQ(s.counters["nvmlInit_v2"]["ERROR_UNKNOWN"], 1u);
}

}  // namespace
}  // namespace migd::sim
