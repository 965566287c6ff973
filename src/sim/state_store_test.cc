#include "sim/state_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "base/file_util.h"
#include "sim/machine.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd::sim {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

const mig::Catalog& Cat() { return mig::Catalog::Default(); }

StatusOr<SimState> Fresh() {
  MachineOptions o;
  o.gpus = {{"a100-40gb", 1}};
  o.nonce = 3;
  return NewMachineState(o, Cat());
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return st.st_ino;
}

class StateStoreTest : public ::testing::Test {
 protected:
  StoreOptions Options() const { return {.path = dir_.Join("sim/state.json"), .fsync = false}; }
  migd::testing::TempDir dir_;
};

TEST_F(StateStoreTest, CreateIfMissingCreatesOnce) {
  StateStore store(Options(), Cat());
  EXPECT_THAT(store.Read(), StatusIs(StatusCode::kNotFound, HasSubstr("does not exist")));
  StatusOr<bool> created = store.CreateIfMissing(Fresh);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  int calls = 0;
  created = store.CreateIfMissing([&]() -> StatusOr<SimState> {
    ++calls;
    return Fresh();
  });
  ASSERT_TRUE(created.ok());
  EXPECT_FALSE(*created);
  EXPECT_EQ(calls, 0);
  StatusOr<SimState> s = store.Read();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, *Fresh());
  EXPECT_TRUE(std::filesystem::exists(store.lock_path()));
}

TEST_F(StateStoreTest, CreateIfMissingPropagatesErrors) {
  StateStore store(Options(), Cat());
  EXPECT_THAT(store.CreateIfMissing(
                  []() -> StatusOr<SimState> { return FailedPreconditionError("no GPUs"); }),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no GPUs")));
  EXPECT_FALSE(std::filesystem::exists(store.path()));
}

TEST_F(StateStoreTest, UpdatesAreSeenByAnotherStore) {
  StateStore a(Options(), Cat());
  StateStore b(Options(), Cat());  // as if in another process
  ASSERT_TRUE(a.CreateIfMissing(Fresh).ok());
  ASSERT_THAT(b.Read(), IsOk());  // b caches the fresh state
  ASSERT_THAT(a.Update([](SimState& s) {
    Machine m(s, Cat());
    EXPECT_TRUE(m.CreateGi(GpuIndex(0), GiProfileId(9), mig::Placement{0, 4}).ok());
    return Commit::kDurable;
  }),
              IsOk());
  StatusOr<SimState> seen = b.Read();
  ASSERT_TRUE(seen.ok());
  ASSERT_EQ(seen->gpus[0].gpu_instances.size(), 1u);
  ASSERT_THAT(b.Update([](SimState& s) {
    ++s.counters["x"]["SUCCESS"];
    return Commit::kCountersOnly;
  }),
              IsOk());
  EXPECT_EQ(a.Read()->counters["x"]["SUCCESS"], 1u);
}

TEST_F(StateStoreTest, NoneCommitDoesNotWrite) {
  StateStore store(Options(), Cat());
  ASSERT_TRUE(store.CreateIfMissing(Fresh).ok());
  const ino_t before = Inode(store.path());
  ASSERT_THAT(store.Update([](SimState& s) {
    s.boot_count = 99;  // discarded
    return Commit::kNone;
  }),
              IsOk());
  EXPECT_EQ(Inode(store.path()), before);
  EXPECT_EQ(store.Read()->boot_count, 0u);
}

TEST_F(StateStoreTest, AfterCommitRunsOnTheCommittedState) {
  StateStore store(Options(), Cat());
  ASSERT_TRUE(store.CreateIfMissing(Fresh).ok());
  uint64_t seen = 0;
  EXPECT_THAT(store.Update(
                  [](SimState& s) {
                    s.boot_count = 5;
                    return Commit::kDurable;
                  },
                  [&](const SimState& s) {
                    seen = s.boot_count;
                    return InternalError("after");
                  }),
              StatusIs(StatusCode::kInternal, HasSubstr("after")));
  EXPECT_EQ(seen, 5u);
  EXPECT_EQ(store.Read()->boot_count, 5u);  // committed before after_commit ran
}

TEST_F(StateStoreTest, ConcurrentWritersLoseNoUpdate) {
  StateStore setup(Options(), Cat());
  ASSERT_TRUE(setup.CreateIfMissing(Fresh).ok());
  constexpr int kPerThread = 50;
  auto worker = [&] {
    StateStore own(Options(), Cat());
    for (int i = 0; i < kPerThread; ++i) {
      ASSERT_THAT(own.Update([](SimState& s) {
        ++s.counters["nvmlDeviceGetCount_v2"]["SUCCESS"];
        return Commit::kCountersOnly;
      }),
                  IsOk());
    }
  };
  std::thread t1(worker);
  std::thread t2(worker);
  // A third writer shares one store between two threads.
  auto shared_worker = [&] {
    for (int i = 0; i < kPerThread; ++i) {
      ASSERT_THAT(setup.Update([](SimState& s) {
        ++s.counters["nvmlDeviceGetCount_v2"]["SUCCESS"];
        return Commit::kCountersOnly;
      }),
                  IsOk());
    }
  };
  std::thread t3(shared_worker);
  std::thread t4(shared_worker);
  t1.join();
  t2.join();
  t3.join();
  t4.join();
  EXPECT_EQ(setup.Read()->counters["nvmlDeviceGetCount_v2"]["SUCCESS"], 4u * kPerThread);
}

TEST_F(StateStoreTest, ForkedChildUsingTheSameStoreIsExcluded) {
  StateStore store(Options(), Cat());
  ASSERT_TRUE(store.CreateIfMissing(Fresh).ok());  // the lock file is open now
  constexpr int kEach = 100;
  auto bump = [&] {
    for (int i = 0; i < kEach; ++i) {
      Status s = store.Update([](SimState& st) {
        ++st.counters["f"]["SUCCESS"];
        return Commit::kCountersOnly;
      });
      if (!s.ok()) return false;
    }
    return true;
  };
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(bump() ? 0 : 1);
  EXPECT_TRUE(bump());
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(store.Read()->counters["f"]["SUCCESS"], 2u * kEach);
}

TEST_F(StateStoreTest, CorruptFileIsReportedAndKept) {
  StateStore store(Options(), Cat());
  ASSERT_TRUE(store.CreateIfMissing(Fresh).ok());
  ASSERT_THAT(store.Read(), IsOk());
  AtomicWriteOptions w;
  w.sync = false;
  ASSERT_THAT(AtomicWriteFile(store.path(), "{ not json", w), IsOk());
  EXPECT_THAT(store.Read(), StatusIs(StatusCode::kDataLoss, HasSubstr(store.path())));
  bool ran = false;
  EXPECT_THAT(store.Update([&](SimState&) {
    ran = true;
    return Commit::kDurable;
  }),
              StatusIs(StatusCode::kDataLoss, HasSubstr("corrupt")));
  EXPECT_FALSE(ran);
  EXPECT_EQ(*ReadFileToString(store.path()), "{ not json");
  // CreateIfMissing never replaces it either.
  EXPECT_FALSE(*store.CreateIfMissing(Fresh));
  EXPECT_EQ(*ReadFileToString(store.path()), "{ not json");
}

TEST_F(StateStoreTest, ExternalReplacementIsNoticed) {
  StateStore store(Options(), Cat());
  ASSERT_TRUE(store.CreateIfMissing(Fresh).ok());
  ASSERT_THAT(store.Read(), IsOk());
  SimState edited = *Fresh();
  edited.boot_count = 12345;
  AtomicWriteOptions w;
  w.sync = false;
  ASSERT_THAT(AtomicWriteFile(store.path(), SerializeState(edited), w), IsOk());
  EXPECT_EQ(store.Read()->boot_count, 12345u);
}

TEST_F(StateStoreTest, EmptyPathIsAnError) {
  StateStore store({}, Cat());
  EXPECT_THAT(store.Read(), StatusIs(StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace migd::sim
