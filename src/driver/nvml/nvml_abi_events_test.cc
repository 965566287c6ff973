// The simulator's five event functions at the C ABI, called through
// NvmlLibrary (dlopen of libnvidia-ml-sim.so): the error paths nvml.h lists
// and the fields of nvmlEventData_t. The watch on top is nvml_events_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "driver/nvml/nvml_abi.h"
#include "driver/nvml/nvml_library.h"
#include "driver/nvml/nvml_session.h"
#include "driver/nvml/nvml_sim_testing.h"
#include "testing/status_matchers.h"

namespace migd::driver {
namespace {

namespace abi = ::migd::nvml_abi;
using ::migd::testing::IsOk;
using S = NvmlSymbol;
using sim_testing::SimMachine;

class NvmlAbiEventsTest : public ::testing::Test {
 protected:
  void Start(const std::map<std::string, std::string>& env = {}) {
    sim_ = std::make_unique<SimMachine>("a100-40gb:2", env);
    MIGD_ASSERT_OK_AND_ASSIGN(lib_, NvmlLibrary::Load(MIGD_SIM_LIBRARY));
    session_ = std::make_shared<NvmlSession>(lib_);
    ASSERT_THAT(session_->Open(), IsOk());
    ASSERT_EQ(lib_->Call<nvmlDeviceGetHandleByIndex_fn>(S::kDeviceGetHandleByIndexV2, 0u, &dev_),
              NVML_SUCCESS);
    ASSERT_EQ(Create(&set_), NVML_SUCCESS);
  }
  void TearDown() override {
    if (session_) session_->Close().IgnoreError();
  }
  nvmlReturn_t Create(nvmlEventSet_t* set) {
    return lib_->Call<nvmlEventSetCreate_fn>(S::kEventSetCreate, set);
  }
  nvmlReturn_t Register(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set) {
    return lib_->Call<nvmlDeviceRegisterEvents_fn>(S::kDeviceRegisterEvents, dev, types, set);
  }
  nvmlReturn_t Wait(nvmlEventSet_t set, nvmlEventData_t* data) {
    return lib_->Call<nvmlEventSetWait_fn>(S::kEventSetWaitV2, set, data, 1u);
  }
  nvmlReturn_t Free(nvmlEventSet_t set) {
    return lib_->Call<nvmlEventSetFree_fn>(S::kEventSetFree, set);
  }
  nvmlReturn_t Uuid(nvmlDevice_t dev) {
    char uuid[96] = {};
    return lib_->Call<nvmlDeviceGetString_fn>(S::kDeviceGetUuid, dev, uuid, 96u);
  }
  nvmlReturn_t MigMode(nvmlDevice_t dev) {
    unsigned int current = 0;
    unsigned int pending = 0;
    return lib_->Call<nvmlDeviceGetMigMode_fn>(S::kDeviceGetMigMode, dev, &current, &pending);
  }
  nvmlReturn_t HandleOf(unsigned int index, nvmlDevice_t* dev) {
    return lib_->Call<nvmlDeviceGetHandleByIndex_fn>(S::kDeviceGetHandleByIndexV2, index, dev);
  }
  void Inject(const std::string& specs) {
    ASSERT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, specs), NVML_SUCCESS);
  }

  std::unique_ptr<SimMachine> sim_;
  std::shared_ptr<NvmlLibrary> lib_;
  std::shared_ptr<NvmlSession> session_;
  nvmlDevice_t dev_ = nullptr;
  nvmlEventSet_t set_ = nullptr;
};

TEST_F(NvmlAbiEventsTest, EventDataCarriesTheHeaderFields) {
  Start();
  ASSERT_EQ(Register(dev_, abi::kEventTypeXidCriticalError | abi::kEventMigConfigChange, set_),
            NVML_SUCCESS);
  Inject("xid=79@0,xid=43@0/2/1,mig-config@0");
  nvmlEventData_t d{};
  ASSERT_EQ(Wait(set_, &d), NVML_SUCCESS);
  EXPECT_EQ(d.device, dev_);
  EXPECT_EQ(d.eventType, abi::kEventTypeXidCriticalError);
  EXPECT_EQ(d.eventData, 79u);
  EXPECT_EQ(d.gpuInstanceId, abi::kInvalidInstanceId);  // "set to 0xFFFFFFFF"
  EXPECT_EQ(d.computeInstanceId, abi::kInvalidInstanceId);
  ASSERT_EQ(Wait(set_, &d), NVML_SUCCESS);
  EXPECT_EQ(d.eventData, 43u);
  EXPECT_EQ(d.gpuInstanceId, 2u);
  EXPECT_EQ(d.computeInstanceId, 1u);
  ASSERT_EQ(Wait(set_, &d), NVML_SUCCESS);
  EXPECT_EQ(d.eventType, abi::kEventMigConfigChange);
  EXPECT_EQ(d.eventData, 0u);  // "eventData is 0 for any other event"
  EXPECT_EQ(Wait(set_, &d), NVML_ERROR_TIMEOUT);
}

TEST_F(NvmlAbiEventsTest, NotSupportedRegistersNoneOfTheTypes) {
  Start({{"MIGD_SIM_UNSUPPORTED_EVENTS", "mig-config"}});
  unsigned long long supported = 0;
  ASSERT_EQ(lib_->Call<nvmlDeviceGetSupportedEventTypes_fn>(S::kDeviceGetSupportedEventTypes, dev_,
                                                            &supported),
            NVML_SUCCESS);
  EXPECT_EQ(supported & abi::kEventMigConfigChange, 0u);
  EXPECT_NE(supported & abi::kEventTypeXidCriticalError, 0u);
  // "None of the requested eventTypes are registered in that case."
  EXPECT_EQ(Register(dev_, abi::kEventTypeXidCriticalError | abi::kEventMigConfigChange, set_),
            NVML_ERROR_NOT_SUPPORTED);
  Inject("xid=79@0");
  nvmlEventData_t d{};
  EXPECT_EQ(Wait(set_, &d), NVML_ERROR_TIMEOUT);
}

TEST_F(NvmlAbiEventsTest, InvalidArgumentsAndStaleSets) {
  Start();
  EXPECT_EQ(Create(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lib_->Call<nvmlDeviceGetSupportedEventTypes_fn>(S::kDeviceGetSupportedEventTypes, dev_,
                                                            nullptr),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Register(dev_, abi::kEventTypeXidCriticalError, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Register(nullptr, abi::kEventTypeXidCriticalError, set_), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Register(dev_, 1ull << 40, set_), NVML_ERROR_INVALID_ARGUMENT);  // no such type
  EXPECT_EQ(Wait(set_, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Free(set_), NVML_SUCCESS);
  nvmlEventData_t d{};
  EXPECT_EQ(Wait(set_, &d), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Free(set_), NVML_ERROR_INVALID_ARGUMENT);
  // A set dies with the session.
  nvmlEventSet_t other = nullptr;
  ASSERT_EQ(Create(&other), NVML_SUCCESS);
  ASSERT_THAT(session_->Close(), IsOk());
  EXPECT_EQ(Free(other), NVML_ERROR_UNINITIALIZED);
  ASSERT_THAT(session_->Open(), IsOk());
  EXPECT_EQ(Free(other), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlAbiEventsTest, ALostGpuAnswersGpuIsLost) {
  Start({{"MIGD_SIM_GPU_LOST", "wait-error"}});
  ASSERT_EQ(Register(dev_, abi::kEventTypeXidCriticalError, set_), NVML_SUCCESS);
  Inject("gpu-lost@0");
  nvmlEventData_t d{};
  // "NVML_ERROR_GPU_IS_LOST if a GPU has fallen off the bus".
  EXPECT_EQ(Wait(set_, &d), NVML_ERROR_GPU_IS_LOST);
  unsigned long long types = 0;
  EXPECT_EQ(lib_->Call<nvmlDeviceGetSupportedEventTypes_fn>(S::kDeviceGetSupportedEventTypes, dev_,
                                                            &types),
            NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(Register(dev_, abi::kEventTypeXidCriticalError, set_), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "xid=79@0"), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "xid=79@9"), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "bogus"), NVML_ERROR_INVALID_ARGUMENT);
}

// While lost, every call on the GPU answers GPU_IS_LOST (nvmlDeviceGetUUID,
// nvmlDeviceGetHandleByIndex_v2: "if the target GPU has fallen off the bus or
// is otherwise inaccessible"), the other GPU answers as before, and the
// count still counts it; gpu-back makes it answer again.
TEST_F(NvmlAbiEventsTest, EveryCallOnALostGpuAnswersGpuIsLostUntilItComesBack) {
  Start();
  Inject("gpu-lost@0");
  EXPECT_EQ(Uuid(dev_), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(MigMode(dev_), NVML_ERROR_GPU_IS_LOST);
  nvmlDevice_t again = nullptr;
  EXPECT_EQ(HandleOf(0, &again), NVML_ERROR_GPU_IS_LOST);
  nvmlDevice_t other = nullptr;
  ASSERT_EQ(HandleOf(1, &other), NVML_SUCCESS);
  EXPECT_EQ(Uuid(other), NVML_SUCCESS);
  unsigned int count = 0;
  EXPECT_EQ(lib_->Call<nvmlDeviceGetCount_fn>(S::kDeviceGetCountV2, &count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);

  Inject("gpu-back@0");
  EXPECT_EQ(Uuid(dev_), NVML_SUCCESS);
  EXPECT_EQ(MigMode(dev_), NVML_SUCCESS);
  EXPECT_EQ(HandleOf(0, &again), NVML_SUCCESS);
  EXPECT_EQ(again, dev_);
  // Only a lost GPU can come back.
  EXPECT_EQ(sim_testing::InjectEvents(MIGD_SIM_LIBRARY, "gpu-back@0"), NVML_ERROR_INVALID_ARGUMENT);
}

// nvmlDeviceGetMigMode's entry does not list GPU_IS_LOST: under
// MIGD_SIM_LOST_CALLS=documented it answers UNKNOWN ("on any unexpected
// error"), while the calls whose entries list it still answer GPU_IS_LOST.
TEST_F(NvmlAbiEventsTest, UnderDocumentedOnlyTheCallsThatListGpuIsLostAnswerIt) {
  Start({{"MIGD_SIM_LOST_CALLS", "documented"}});
  Inject("gpu-lost@0");
  EXPECT_EQ(Uuid(dev_), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(MigMode(dev_), NVML_ERROR_UNKNOWN);
  unsigned long long types = 0;
  EXPECT_EQ(lib_->Call<nvmlDeviceGetSupportedEventTypes_fn>(S::kDeviceGetSupportedEventTypes, dev_,
                                                            &types),
            NVML_ERROR_GPU_IS_LOST);
}

TEST_F(NvmlAbiEventsTest, AZeroWaitUnderForeverBlocksUntilAnEvent) {
  Start({{"MIGD_SIM_EVENT_WAIT_ZERO", "forever"}});
  ASSERT_EQ(Register(dev_, abi::kEventTypeXidCriticalError, set_), NVML_SUCCESS);
  nvmlEventData_t d{};
  nvmlReturn_t r = NVML_ERROR_UNKNOWN;
  std::thread waiter([&] { r = lib_->Call<nvmlEventSetWait_fn>(S::kEventSetWaitV2, set_, &d, 0u); });
  Inject("xid=79@0");  // the only way the waiter returns
  waiter.join();
  EXPECT_EQ(r, NVML_SUCCESS);
  EXPECT_EQ(d.eventData, 79u);
}

}  // namespace
}  // namespace migd::driver
