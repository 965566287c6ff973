// A fake libnvidia-ml.so.1 of a driver too old for migd (test-only): it has
// the basic entry points but not nvmlDeviceCreateGpuInstanceWithPlacement
// (R460+). NvmlLibrary::Load must refuse it, naming that symbol and the
// driver version this stub reports.
#include <cstring>

extern "C" {

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int) { return "stub"; }
int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  const char kVersion[] = "450.80.02";
  if (length < sizeof(kVersion)) return 7;  // INSUFFICIENT_SIZE
  std::memcpy(version, kVersion, sizeof(kVersion));
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 0;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int, void**) { return 2; }
int nvmlDeviceGetUUID(void*, char*, unsigned int) { return 2; }
int nvmlDeviceGetMigMode(void*, unsigned int*, unsigned int*) { return 3; }
int nvmlDeviceGetMaxMigDeviceCount(void*, unsigned int*) { return 3; }
int nvmlDeviceGetMigDeviceHandleByIndex(void*, unsigned int, void**) { return 3; }
int nvmlDeviceGetGpuInstanceId(void*, unsigned int*) { return 3; }
int nvmlDeviceGetComputeInstanceId(void*, unsigned int*) { return 3; }
int nvmlDeviceGetGpuInstanceProfileInfo(void*, unsigned int, void*) { return 3; }
int nvmlDeviceGetGpuInstancePossiblePlacements(void*, unsigned int, void*, unsigned int*) {
  return 3;
}
int nvmlDeviceCreateGpuInstance(void*, unsigned int, void**) { return 3; }
int nvmlGpuInstanceDestroy(void*) { return 3; }
int nvmlDeviceGetGpuInstances(void*, unsigned int, void**, unsigned int*) { return 3; }
int nvmlDeviceGetGpuInstanceById(void*, unsigned int, void**) { return 3; }
int nvmlGpuInstanceGetInfo(void*, void*) { return 3; }
int nvmlGpuInstanceGetComputeInstanceProfileInfo(void*, unsigned int, unsigned int, void*) {
  return 3;
}
int nvmlGpuInstanceCreateComputeInstance(void*, unsigned int, void**) { return 3; }
int nvmlComputeInstanceDestroy(void*) { return 3; }
int nvmlGpuInstanceGetComputeInstances(void*, unsigned int, void**, unsigned int*) { return 3; }
int nvmlGpuInstanceGetComputeInstanceById(void*, unsigned int, void**) { return 3; }
int nvmlComputeInstanceGetInfo(void*, void*) { return 3; }

}  // extern "C"
