#include "base/boot_id.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::HasSubstr;

constexpr char kBootId[] = "3f2a8c1e-9b4d-4e6f-a1b2-c3d4e5f60718";

class BootIdTest : public ::testing::Test {
 protected:
  std::string BootIdPath() const { return proc_.Join("sys/kernel/random/boot_id"); }
  void WriteBootId(const std::string& content) { WriteFileOrDie(BootIdPath(), content); }

  TempDir proc_;
};

TEST_F(BootIdTest, ReadsAndTrimsTheNewline) {
  WriteBootId(std::string(kBootId) + "\n");
  StatusOr<std::string> id = ReadBootId(proc_.path());
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(*id, kBootId);
}

TEST_F(BootIdTest, AcceptsUpperCaseAndNoNewline) {
  WriteBootId("3F2A8C1E-9B4D-4E6F-A1B2-C3D4E5F60718");
  StatusOr<std::string> id = ReadBootId(proc_.path());
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(*id, "3F2A8C1E-9B4D-4E6F-A1B2-C3D4E5F60718");
}

TEST_F(BootIdTest, MissingIsNotFound) {
  EXPECT_THAT(ReadBootId(proc_.path()), StatusIs(StatusCode::kNotFound, HasSubstr("boot_id")));
}

TEST_F(BootIdTest, GarbageIsDataLoss) {
  for (const std::string& garbage :
       {std::string(""), std::string("\n"), std::string("not a uuid\n"),
        std::string(kBootId).substr(1) + "\n",                  // too short
        std::string(kBootId) + "0\n",                           // too long
        std::string("3f2a8c1e-9b4d-4e6f-a1b2-c3d4e5f6071g\n"),  // not hex
        std::string("3f2a8c1e_9b4d-4e6f-a1b2-c3d4e5f60718\n"),  // wrong separator
        std::string("3f2a8c1e9-b4d-4e6f-a1b2-c3d4e5f60718\n"),  // dash misplaced
        std::string(" ") + kBootId}) {
    WriteBootId(garbage);
    EXPECT_THAT(ReadBootId(proc_.path()),
                StatusIs(StatusCode::kDataLoss, HasSubstr("does not hold a boot UUID")))
        << "'" << garbage << "'";
  }
}

TEST_F(BootIdTest, OversizedFileIsDataLoss) {
  WriteBootId(std::string(kBootId) + std::string(8192, 'x'));
  EXPECT_THAT(ReadBootId(proc_.path()), StatusIs(StatusCode::kDataLoss, HasSubstr("boot_id")));
}

// Every Linux kernel migd runs on has the file (procfs, random driver).
TEST_F(BootIdTest, RealProc) {
  StatusOr<std::string> id = ReadBootId();
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(id->size(), 36u);
}

}  // namespace
}  // namespace migd
