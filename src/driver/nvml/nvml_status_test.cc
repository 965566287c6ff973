#include "driver/nvml/nvml_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

using ::migd::testing::StatusIs;
using ::testing::HasSubstr;

struct Row {
  nvmlReturn_t r;
  StatusCode code;
  const char* name;
};

class FromNvmlTableTest : public ::testing::TestWithParam<Row> {};

TEST_P(FromNvmlTableTest, MapsCodeAndKeepsNvmlName) {
  const Row& row = GetParam();
  EXPECT_EQ(NvmlReturnToCode(row.r), row.code);
  EXPECT_EQ(NvmlReturnName(row.r), row.name);
  const Status s = FromNvml(row.r, "doing X", "some text");
  if (row.r == NVML_SUCCESS) {
    EXPECT_TRUE(s.ok());
    return;
  }
  EXPECT_THAT(s, StatusIs(row.code, std::string("doing X: ") + row.name + " (some text)"));
}

INSTANTIATE_TEST_SUITE_P(
    AllCodes, FromNvmlTableTest,
    ::testing::Values(
        Row{NVML_SUCCESS, StatusCode::kOk, "NVML_SUCCESS"},
        Row{NVML_ERROR_UNINITIALIZED, StatusCode::kUnavailable, "NVML_ERROR_UNINITIALIZED"},
        Row{NVML_ERROR_INVALID_ARGUMENT, StatusCode::kInvalidArgument,
            "NVML_ERROR_INVALID_ARGUMENT"},
        Row{NVML_ERROR_NOT_SUPPORTED, StatusCode::kFailedPrecondition,
            "NVML_ERROR_NOT_SUPPORTED"},
        Row{NVML_ERROR_NO_PERMISSION, StatusCode::kPermissionDenied, "NVML_ERROR_NO_PERMISSION"},
        Row{NVML_ERROR_ALREADY_INITIALIZED, StatusCode::kInternal,
            "NVML_ERROR_ALREADY_INITIALIZED"},
        Row{NVML_ERROR_NOT_FOUND, StatusCode::kNotFound, "NVML_ERROR_NOT_FOUND"},
        Row{NVML_ERROR_INSUFFICIENT_SIZE, StatusCode::kInternal, "NVML_ERROR_INSUFFICIENT_SIZE"},
        Row{NVML_ERROR_INSUFFICIENT_POWER, StatusCode::kInternal,
            "NVML_ERROR_INSUFFICIENT_POWER"},
        Row{NVML_ERROR_DRIVER_NOT_LOADED, StatusCode::kUnavailable,
            "NVML_ERROR_DRIVER_NOT_LOADED"},
        Row{NVML_ERROR_TIMEOUT, StatusCode::kUnavailable, "NVML_ERROR_TIMEOUT"},
        Row{NVML_ERROR_IRQ_ISSUE, StatusCode::kInternal, "NVML_ERROR_IRQ_ISSUE"},
        Row{NVML_ERROR_LIBRARY_NOT_FOUND, StatusCode::kUnavailable,
            "NVML_ERROR_LIBRARY_NOT_FOUND"},
        Row{NVML_ERROR_FUNCTION_NOT_FOUND, StatusCode::kUnavailable,
            "NVML_ERROR_FUNCTION_NOT_FOUND"},
        Row{NVML_ERROR_CORRUPTED_INFOROM, StatusCode::kInternal, "NVML_ERROR_CORRUPTED_INFOROM"},
        Row{NVML_ERROR_GPU_IS_LOST, StatusCode::kFailedPrecondition, "NVML_ERROR_GPU_IS_LOST"},
        Row{NVML_ERROR_RESET_REQUIRED, StatusCode::kFailedPrecondition,
            "NVML_ERROR_RESET_REQUIRED"},
        Row{NVML_ERROR_OPERATING_SYSTEM, StatusCode::kInternal, "NVML_ERROR_OPERATING_SYSTEM"},
        Row{NVML_ERROR_LIB_RM_VERSION_MISMATCH, StatusCode::kInternal,
            "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
        Row{NVML_ERROR_IN_USE, StatusCode::kFailedPrecondition, "NVML_ERROR_IN_USE"},
        Row{NVML_ERROR_MEMORY, StatusCode::kInternal, "NVML_ERROR_MEMORY"},
        Row{NVML_ERROR_NO_DATA, StatusCode::kInternal, "NVML_ERROR_NO_DATA"},
        Row{NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, StatusCode::kInternal,
            "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED"},
        Row{NVML_ERROR_INSUFFICIENT_RESOURCES, StatusCode::kResourceExhausted,
            "NVML_ERROR_INSUFFICIENT_RESOURCES"},
        Row{NVML_ERROR_FREQ_NOT_SUPPORTED, StatusCode::kInternal,
            "NVML_ERROR_FREQ_NOT_SUPPORTED"},
        Row{NVML_ERROR_ARGUMENT_VERSION_MISMATCH, StatusCode::kInternal,
            "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
        Row{NVML_ERROR_DEPRECATED, StatusCode::kInternal, "NVML_ERROR_DEPRECATED"},
        Row{NVML_ERROR_NOT_READY, StatusCode::kInternal, "NVML_ERROR_NOT_READY"},
        Row{NVML_ERROR_GPU_NOT_FOUND, StatusCode::kInternal, "NVML_ERROR_GPU_NOT_FOUND"},
        Row{NVML_ERROR_INVALID_STATE, StatusCode::kInternal, "NVML_ERROR_INVALID_STATE"},
        Row{NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, StatusCode::kInternal,
            "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED"},
        Row{NVML_ERROR_UNKNOWN, StatusCode::kUnknown, "NVML_ERROR_UNKNOWN"}));

TEST(FromNvmlTest, UnknownValueIsUnknownAndLoggedNumerically) {
  const auto weird = static_cast<nvmlReturn_t>(1234);
  EXPECT_FALSE(IsKnownNvmlReturn(weird));
  EXPECT_EQ(NvmlReturnName(weird), "NVML_ERROR_UNKNOWN");
  EXPECT_THAT(FromNvml(weird, "creating GI", nullptr),
              StatusIs(StatusCode::kUnknown, "creating GI: NVML_ERROR_UNKNOWN (value 1234)"));
  EXPECT_THAT(FromNvml(weird, "x", "Unknown Error"),
              StatusIs(StatusCode::kUnknown, "x: NVML_ERROR_UNKNOWN (Unknown Error; value 1234)"));
  EXPECT_THAT(FromNvml(static_cast<nvmlReturn_t>(-3), "x"),
              StatusIs(StatusCode::kUnknown, HasSubstr("value -3")));
}

TEST(FromNvmlTest, OmitsEmptyErrorString) {
  EXPECT_THAT(FromNvml(NVML_ERROR_IN_USE, "destroying GI 3", nullptr),
              StatusIs(StatusCode::kFailedPrecondition, "destroying GI 3: NVML_ERROR_IN_USE"));
  EXPECT_THAT(FromNvml(NVML_ERROR_IN_USE, "destroying GI 3", ""),
              StatusIs(StatusCode::kFailedPrecondition, "destroying GI 3: NVML_ERROR_IN_USE"));
}

TEST(FromNvmlTest, EmptyWhatGivesBareName) {
  EXPECT_THAT(FromNvml(NVML_ERROR_NOT_FOUND, "", "Not Found"),
              StatusIs(StatusCode::kNotFound, "NVML_ERROR_NOT_FOUND (Not Found)"));
}

}  // namespace
}  // namespace migd::driver
