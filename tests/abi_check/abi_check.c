/*
 * abi_check: an NVML client written in plain C with its OWN declarations of
 * the NVML ABI (written from NVIDIA's nvml.h, as vendored in NVIDIA/go-nvml
 * gen/nvml/nvml.h, independent of migd's src/driver/nvml/nvml_abi.h), that
 * dlopen()s a library by path and checks the behaviour migd relies on. It
 * exists so that the simulated library is judged by the same kind of program
 * that will use the real one, under every simulator variant of the behaviours
 * the header leaves open (tests/sim_variants): nothing here may depend on MIG
 * device index order or density, or on a new CI being walkable at once.
 *
 * Usage: abi_check <path to libnvidia-ml-sim.so> <scratch dir>
 * Exit status 0 if every check passed; prints one line per failed check and
 * a final "N passed, M failed" line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The list of entry points only (names, not signatures): this client keeps
   its own declarations of the signatures below. */
#include "driver/nvml/nvml_functions.h"

typedef int ret_t;
typedef void* dev_t_;
typedef void* gi_t;
typedef void* ci_t;

enum {
  OK = 0, UNINIT = 1, INVAL = 2, NOTSUP = 3, NOTFOUND = 6, INSUFF_SIZE = 7,
  DRIVER_NOT_LOADED = 9, IN_USE = 19, INSUFF_RES = 23
};

typedef struct { unsigned start, size; } place_t;
typedef struct { dev_t_ device; unsigned id, profileId; place_t placement; } gi_info_t;
typedef struct { dev_t_ device; gi_t gi; unsigned id, profileId; place_t placement; } ci_info_t;
typedef struct {
  unsigned id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
      decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
} gip_v1_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;

_Static_assert(sizeof(gi_info_t) == 24, "gi info");
_Static_assert(sizeof(ci_info_t) == 32, "ci info");
_Static_assert(sizeof(gip_v1_t) == 48, "profile v1");
_Static_assert(sizeof(proc_t) == 24, "process v2");

static int passed, failed;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) {                                            \
      ++passed;                                            \
    } else {                                               \
      ++failed;                                            \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

static void* lib;
static void* sym(const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    printf("FAIL: symbol %s not exported\n", name);
    ++failed;
  }
  return p;
}

static unsigned rd32(const unsigned char* buf, size_t off) {
  unsigned v;
  memcpy(&v, buf + off, 4);
  return v;
}
static unsigned long long rd64(const unsigned char* buf, size_t off) {
  unsigned long long v;
  memcpy(&v, buf + off, 8);
  return v;
}

/* A MIG device a walk should find: (GI id, CI id) and what the walk saw. */
typedef struct {
  unsigned gi, ci;
  dev_t_ handle;
  int seen;
} migdev_t;

typedef ret_t (*max_mig_fn)(dev_t_, unsigned*);
typedef ret_t (*mig_by_index_fn)(dev_t_, unsigned, dev_t_*);
typedef ret_t (*id_fn)(dev_t_, unsigned*);

/*
 * Walks the MIG devices of `gpu` the way nvml.h allows: every index below
 * nvmlDeviceGetMaxMigDeviceCount, skipping NOT_FOUND / INVALID_ARGUMENT
 * (indices may be sparse), asking each handle for its GI and CI ids. Walks
 * again (at most 12 times) until every device of `want` was seen, since the
 * header does not say when a new CI joins the walk. Returns 1 if the last
 * walk saw each wanted device exactly once and nothing else; then `handle`
 * of each is its MIG device handle.
 */
static int walk(dev_t_ gpu, migdev_t* want, int n, max_mig_fn max_fn, mig_by_index_fn by_index,
                id_fn gi_fn, id_fn ci_fn) {
  for (int attempt = 0; attempt < 12; ++attempt) {
    unsigned max = 0, i;
    int all = 1, extra = 0;
    for (int k = 0; k < n; ++k) want[k].seen = 0;
    if (max_fn(gpu, &max) != OK) return 0;
    for (i = 0; i < max; ++i) {
      dev_t_ h = NULL;
      unsigned gi = 0, ci = 0;
      ret_t r = by_index(gpu, i, &h);
      if (r == NOTFOUND || r == INVAL) continue;
      if (r != OK || gi_fn(h, &gi) != OK || ci_fn(h, &ci) != OK) return 0;
      int matched = 0;
      for (int k = 0; k < n; ++k) {
        if (want[k].gi == gi && want[k].ci == ci) {
          ++want[k].seen;
          want[k].handle = h;
          matched = 1;
        }
      }
      if (!matched) ++extra;
    }
    for (int k = 0; k < n; ++k) all = all && want[k].seen >= 1;
    if (!all) continue;
    for (int k = 0; k < n; ++k) {
      if (want[k].seen != 1) return 0;
    }
    return extra == 0;
  }
  return 0;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int valid_mig_uuid(const char* s) {
  static const int groups[] = {8, 4, 4, 4, 12};
  if (strncmp(s, "MIG-", 4) != 0) return 0;
  const char* p = s + 4;
  for (int g = 0; g < 5; ++g) {
    if (g > 0 && *p++ != '-') return 0;
    for (int i = 0; i < groups[g]; ++i)
      if (!is_hex(*p++)) return 0;
  }
  if (*p != '\0') return 0;
  /* version nibble: first digit of the third group */
  return s[4 + 9 + 5] == '5';
}

/* The functions this client calls, resolved by name with dlsym. */
#define API(X) \
  X(ret_t, nvmlInit_v2, (void)) \
  X(ret_t, nvmlShutdown, (void)) \
  X(const char*, nvmlErrorString, (ret_t)) \
  X(ret_t, nvmlDeviceGetCount_v2, (unsigned*)) \
  X(ret_t, nvmlDeviceGetHandleByIndex_v2, (unsigned, dev_t_*)) \
  X(ret_t, nvmlDeviceGetHandleByUUID, (const char*, dev_t_*)) \
  X(ret_t, nvmlDeviceGetUUID, (dev_t_, char*, unsigned)) \
  X(ret_t, nvmlDeviceGetName, (dev_t_, char*, unsigned)) \
  X(ret_t, nvmlDeviceGetGpuInstanceProfileInfo, (dev_t_, unsigned, void*)) \
  X(ret_t, nvmlDeviceGetGpuInstanceProfileInfoV, (dev_t_, unsigned, void*)) \
  X(ret_t, nvmlDeviceGetGpuInstancePossiblePlacements_v2, (dev_t_, unsigned, place_t*, unsigned*)) \
  X(ret_t, nvmlDeviceGetGpuInstanceRemainingCapacity, (dev_t_, unsigned, unsigned*)) \
  X(ret_t, nvmlDeviceCreateGpuInstanceWithPlacement, (dev_t_, unsigned, const place_t*, gi_t*)) \
  X(ret_t, nvmlGpuInstanceDestroy, (gi_t)) \
  X(ret_t, nvmlGpuInstanceGetInfo, (gi_t, gi_info_t*)) \
  X(ret_t, nvmlDeviceGetGpuInstanceById, (dev_t_, unsigned, gi_t*)) \
  X(ret_t, nvmlGpuInstanceGetComputeInstanceProfileInfoV, (gi_t, unsigned, unsigned, void*)) \
  X(ret_t, nvmlGpuInstanceCreateComputeInstance, (gi_t, unsigned, ci_t*)) \
  X(ret_t, nvmlComputeInstanceDestroy, (ci_t)) \
  X(ret_t, nvmlComputeInstanceGetInfo_v2, (ci_t, ci_info_t*)) \
  X(ret_t, nvmlDeviceGetMigMode, (dev_t_, unsigned*, unsigned*)) \
  X(ret_t, migdSimAttachProcess, (const char*, unsigned, unsigned long long)) \
  X(ret_t, migdSimDetachProcess, (const char*, unsigned)) \
  X(ret_t, nvmlDeviceGetComputeRunningProcesses_v3, (dev_t_, unsigned*, proc_t*)) \
  X(ret_t, nvmlDeviceGetMaxMigDeviceCount, (dev_t_, unsigned*)) \
  X(ret_t, nvmlDeviceGetMigDeviceHandleByIndex, (dev_t_, unsigned, dev_t_*)) \
  X(ret_t, nvmlDeviceGetGpuInstanceId, (dev_t_, unsigned*)) \
  X(ret_t, nvmlDeviceGetComputeInstanceId, (dev_t_, unsigned*)) \
  X(ret_t, nvmlGpuInstanceGetComputeInstances, (gi_t, unsigned, ci_t*, unsigned*)) \
  X(ret_t, nvmlGpuInstanceGetComputeInstancePossiblePlacements, (gi_t, unsigned, place_t*, unsigned*))
#define DECLARE(ret, name, args) static ret(*name) args;
API(DECLARE)
#undef DECLARE

static void bind_all(void) {
#define BIND(ret, name, args) name = (ret(*) args)sym(#name);
  API(BIND)
#undef BIND
}

/* State shared by the checks, in the order main runs them. */
static char state_path[4096];
static unsigned count;
static dev_t_ a100, a30, rtx;
static unsigned ver;
static unsigned char buf[152];
static place_t pl[16];
static unsigned n;
static gi_t g3a, g3b, g;
static gi_info_t gi;
static unsigned char cibuf[140];
static ci_t c, c2;
static ci_info_t ci, ci2;
static migdev_t devs[2];
static char uuid[96];
static char parent[96]; /* the A100's GPU UUID */

static void check_lifecycle(void) {
  /* Without MIGD_SIM_STATE the library behaves like a host without a driver. */
  CHECK(nvmlInit_v2() == DRIVER_NOT_LOADED, "init without MIGD_SIM_STATE");

  setenv("MIGD_SIM_STATE", state_path, 1);
  setenv("MIGD_SIM_GPUS", "a100-40gb:1,a30-24gb:1,rtx-pro-6000-blackwell:1", 1);
  CHECK(nvmlDeviceGetCount_v2(&count) == UNINIT, "call before init -> UNINITIALIZED");

  /* Reference-counted init (nvml.md 7.5). */
  CHECK(nvmlInit_v2() == OK, "init");
  CHECK(nvmlInit_v2() == OK, "second init");
  CHECK(nvmlShutdown() == OK, "first shutdown");
  CHECK(nvmlDeviceGetCount_v2(&count) == OK && count == 3, "still initialised, 3 GPUs (%u)",
        count);

  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &a100) == OK, "handle 0");
  CHECK(nvmlDeviceGetHandleByIndex_v2(1, &a30) == OK, "handle 1");
  CHECK(nvmlDeviceGetHandleByIndex_v2(2, &rtx) == OK, "handle 2");
  CHECK(nvmlDeviceGetHandleByIndex_v2(3, &rtx) != OK, "handle 3 refused");
  nvmlDeviceGetHandleByIndex_v2(2, &rtx);
  char name[96];
  CHECK(nvmlDeviceGetName(a100, name, sizeof(name)) == OK && strstr(name, "A100") != NULL,
        "A100 name '%s'", name);
  unsigned cur = 9, pend = 9;
  CHECK(nvmlDeviceGetMigMode(a100, &cur, &pend) == OK && cur == 1 && pend == 1, "MIG on");
}

static void check_profile_info(void) {
  /* Profile info: index is not id (nvml.md 7.1). v1 struct. */
  gip_v1_t v1;
  memset(&v1, 0, sizeof(v1));
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, 0, &v1) == OK && v1.id == 19 &&
            v1.sliceCount == 1 && v1.instanceCount == 7 && v1.memorySizeMB == 4864,
        "A100 1g v1: id %u slices %u inst %u mem %llu", v1.id, v1.sliceCount, v1.instanceCount,
        v1.memorySizeMB);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a30, 0, &v1) == OK && v1.id == 14,
        "A30 1g id 14 (%u)", v1.id);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(a100, 4, &v1) == OK && v1.id == 0 &&
            v1.sliceCount == 7,
        "7g id 0");

  /* v2: version word 0x02000098, isP2pSupported @8, sliceCount @12, memory @48, name @56. */
  memset(buf, 0, sizeof(buf));
  ver = 0x02000098;
  memcpy(buf, &ver, 4);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100, 2, buf) == OK && rd32(buf, 4) == 9 &&
            rd32(buf, 12) == 3 && rd32(buf, 16) == 2 && rd64(buf, 48) == 19968 &&
            strstr((const char*)buf + 56, "3g.20gb") != NULL,
        "A100 3g v2: id %u slices %u inst %u mem %llu name '%s'", rd32(buf, 4), rd32(buf, 12),
        rd32(buf, 16), rd64(buf, 48), (const char*)buf + 56);
  /* v3: 0x03000098, sliceCount @8, memory @40, name @48, capabilities @144. */
  memset(buf, 0, sizeof(buf));
  ver = 0x03000098;
  memcpy(buf, &ver, 4);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100, 2, buf) == OK && rd32(buf, 4) == 9 &&
            rd32(buf, 8) == 3 && rd32(buf, 12) == 2 && rd64(buf, 40) == 19968 &&
            strstr((const char*)buf + 48, "3g.20gb") != NULL,
        "A100 3g v3: id %u slices %u inst %u mem %llu name '%s'", rd32(buf, 4), rd32(buf, 8),
        rd32(buf, 12), rd64(buf, 40), (const char*)buf + 48);
  memset(buf, 0, sizeof(buf));
  memcpy(buf, &ver, 4);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(rtx, 0x0A, buf) == OK && rd32(buf, 4) == 47 &&
            (rd32(buf, 144) & 0x2) != 0,
        "RTX PRO 1g+gfx id 47 with GFX capability (id %u caps %u)", rd32(buf, 4),
        rd32(buf, 144));
  memset(buf, 0, sizeof(buf));
  ver = 0x01000098;
  memcpy(buf, &ver, 4);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100, 0, buf) == INVAL, "bad version word");
  memset(buf, 0, sizeof(buf));
  ver = 0x03000098;
  memcpy(buf, &ver, 4);
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100, 0x5, buf) == NOTSUP, "8-slice: NOT_SUPPORTED");
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(a100, 0x40, buf) == INVAL,
        "index past the last: INVALID_ARGUMENT");
}

static void check_placements(void) {
  /* Placements (memory slices), NULL buffer = count query. */
  n = 0;
  CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 9, NULL, &n) == OK && n == 2,
        "3g count %u", n);
  n = 16;
  CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 9, pl, &n) == OK && n == 2 &&
            pl[0].start == 0 && pl[0].size == 4 && pl[1].start == 4 && pl[1].size == 4,
        "3g placements {0,4}:4");
  n = 16;
  CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(rtx, 14, pl, &n) == OK && n == 4 &&
            pl[1].start == 3 && pl[1].size == 3,
        "RTX PRO 1g placements {0,3,6,9}:3");
  n = 16;
  CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a30, 5, pl, &n) == OK && n == 2 &&
            pl[1].start == 2 && pl[1].size == 2,
        "A30 2g placements {0,2}:2");
}

static void check_gi_create(void) {
  /* Create and destroy semantics (mig-hardware.md 5.1-5.3, 5.7, 5.8). */
  place_t p0 = {0, 4}, p4 = {4, 4}, bad = {1, 4}, one7 = {7, 1};
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &bad, &g) == INVAL,
        "unlisted placement -> INVALID_ARGUMENT");
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 19, &one7, &g) == INVAL,
        "1g at 7 is unlisted -> INVALID_ARGUMENT");
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &p0, &g3a) == OK, "3g at 0");
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 5, &p0, &g) == INSUFF_RES,
        "4g over 3g -> INSUFFICIENT_RESOURCES");
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 9, &p4, &g3b) == OK, "3g at 4");
  memset(&gi, 0, sizeof(gi));
  CHECK(nvmlGpuInstanceGetInfo(g3a, &gi) == OK && gi.id == 1 && gi.profileId == 9 &&
            gi.placement.start == 0 && gi.placement.size == 4,
        "3g@0 GI id %u (1..2 expected: 1)", gi.id);
  CHECK(nvmlGpuInstanceGetInfo(g3b, &gi) == OK && gi.id == 2, "3g@4 GI id %u", gi.id);
  unsigned cap = 9;
  CHECK(nvmlDeviceGetGpuInstanceRemainingCapacity(a100, 19, &cap) == OK && cap == 0,
        "1g capacity with two 3g: %u", cap);
}

static void check_ci_create(void) {
  /* The default CI of a 3g GI: index 2 (3-slice) -> id from profile info. */
  memset(cibuf, 0, sizeof(cibuf));
  ver = 0x0300008C;
  memcpy(cibuf, &ver, 4);
  CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfoV(g3a, 2, 0, cibuf) == OK &&
            rd32(cibuf, 8) == 3,
        "CI 3-slice profile in a 3g GI (slices %u)", rd32(cibuf, 8));
  memset(cibuf, 0, sizeof(cibuf));
  memcpy(cibuf, &ver, 4);
  CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfoV(g3a, 4, 0, cibuf) == NOTSUP,
        "7-slice CI in a 3g GI -> NOT_SUPPORTED");
  memset(cibuf, 0, sizeof(cibuf));
  memcpy(cibuf, &ver, 4);
  nvmlGpuInstanceGetComputeInstanceProfileInfoV(g3a, 2, 0, cibuf);
  CHECK(nvmlGpuInstanceCreateComputeInstance(g3a, rd32(cibuf, 4), &c) == OK, "create CI");
  CHECK(nvmlGpuInstanceCreateComputeInstance(g3b, rd32(cibuf, 4), &c2) == OK, "create CI 2");
  memset(&ci, 0, sizeof(ci));
  memset(&ci2, 0, sizeof(ci2));
  CHECK(nvmlComputeInstanceGetInfo_v2(c, &ci) == OK && ci.id == 0 && ci.device != NULL,
        "CI info id %u", ci.id);
  CHECK(nvmlComputeInstanceGetInfo_v2(c2, &ci2) == OK && ci2.id == 0, "CI 2 info id %u", ci2.id);
}

static void check_parent_device(void) {
  /* nvml.h: nvmlComputeInstanceInfo_t.device and nvmlGpuInstanceInfo_t.device
     are "Parent device": the GPU, whose UUID is a GPU- one. */
  char through_info[96] = {0};
  CHECK(nvmlDeviceGetUUID(a100, parent, sizeof(parent)) == OK && strncmp(parent, "GPU-", 4) == 0,
        "GPU UUID '%s'", parent);
  CHECK(nvmlDeviceGetUUID(ci.device, through_info, sizeof(through_info)) == OK &&
            strncmp(through_info, "GPU-", 4) == 0 && strcmp(through_info, parent) == 0,
        "CI info .device is the parent: '%s' vs '%s'", through_info, parent);
  memset(&gi, 0, sizeof(gi));
  memset(through_info, 0, sizeof(through_info));
  CHECK(nvmlGpuInstanceGetInfo(g3b, &gi) == OK &&
            nvmlDeviceGetUUID(gi.device, through_info, sizeof(through_info)) == OK &&
            strcmp(through_info, parent) == 0,
        "GI info .device is the parent: '%s'", through_info);
}

static void check_mig_device_walk(void) {
  /* The MIG devices: only the index walk leads from (GI, CI) to them. */
  memset(&gi, 0, sizeof(gi));
  unsigned gi_a = 0, gi_b = 0;
  nvmlGpuInstanceGetInfo(g3a, &gi);
  gi_a = gi.id;
  nvmlGpuInstanceGetInfo(g3b, &gi);
  gi_b = gi.id;
  devs[0] = (migdev_t){gi_a, ci.id, NULL, 0};
  devs[1] = (migdev_t){gi_b, ci2.id, NULL, 0};
  CHECK(walk(a100, devs, 2, nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex,
             nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId),
        "the walk finds each CI exactly once (%d, %d)", devs[0].seen, devs[1].seen);
  char uuid_b[96] = {0};
  CHECK(devs[0].handle != NULL && nvmlDeviceGetUUID(devs[0].handle, uuid, sizeof(uuid)) == OK &&
            valid_mig_uuid(uuid) && strcmp(uuid, parent) != 0,
        "MIG UUID format '%s'", uuid);
  CHECK(devs[1].handle != NULL &&
            nvmlDeviceGetUUID(devs[1].handle, uuid_b, sizeof(uuid_b)) == OK &&
            valid_mig_uuid(uuid_b) && strcmp(uuid, uuid_b) != 0,
        "MIG UUIDs unique per instance: '%s' vs '%s'", uuid, uuid_b);
  unsigned id = 0;
  CHECK(nvmlDeviceGetGpuInstanceId(a100, &id) != OK,
        "GetGpuInstanceId refuses a GPU handle (a MIG device call)");
  dev_t_ by_uuid = NULL;
  char uuid2[96] = {0};
  CHECK(nvmlDeviceGetHandleByUUID(uuid, &by_uuid) == OK &&
            nvmlDeviceGetUUID(by_uuid, uuid2, sizeof(uuid2)) == OK && strcmp(uuid, uuid2) == 0,
        "GetHandleByUUID(MIG uuid)");
  char small[8];
  CHECK(nvmlDeviceGetUUID(devs[0].handle, small, sizeof(small)) == INSUFF_SIZE,
        "short UUID buffer -> INSUFFICIENT_SIZE");
}

static void check_listings(void) {
  /* GetComputeInstances: a CI profile this GI does not offer -> NOT_SUPPORTED;
     *count is output only. */
  ci_t cis[8];
  unsigned nci = 0;
  CHECK(nvmlGpuInstanceGetComputeInstances(g3a, rd32(cibuf, 4), cis, &nci) == OK && nci == 1,
        "GetComputeInstances lists the CI (%u)", nci);
  nci = 0;
  CHECK(nvmlGpuInstanceGetComputeInstances(g3a, 4, cis, &nci) == NOTSUP,
        "GetComputeInstances of a 7-slice CI profile in a 3g GI -> NOT_SUPPORTED");
  place_t cpl[8];
  n = 0; /* output only: not a capacity */
  CHECK(nvmlGpuInstanceGetComputeInstancePossiblePlacements(g3a, 0, cpl, &n) == OK && n == 3,
        "CI placements with *count 0 in: %u", n);
  n = 0;
  CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(a100, 19, pl, &n) == OK && n == 7,
        "GI placements with *count 0 in: %u", n);
  CHECK(nvmlComputeInstanceDestroy(c2) == OK, "CI 2 destroy");
}

static void check_destroy_and_processes(void) {
  /* Destroy ordering and IN_USE (mig-hardware.md 5.7). */
  CHECK(nvmlGpuInstanceDestroy(g3a) == IN_USE, "GI destroy with a CI -> IN_USE");
  CHECK(migdSimAttachProcess(uuid, 4242, 1 << 20) == OK, "attach process");
  unsigned np = 0;
  proc_t procs[4];
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(devs[0].handle, &np, NULL) == INSUFF_SIZE &&
            np >= 1,
        "process count query (%u)", np);
  np = 4;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(devs[0].handle, &np, procs) == OK && np == 1 &&
            procs[0].pid == 4242,
        "process listed");
  CHECK(nvmlComputeInstanceDestroy(c) == IN_USE, "CI destroy with a process -> IN_USE");
  CHECK(migdSimDetachProcess(uuid, 4242) == OK, "detach process");
  CHECK(nvmlComputeInstanceDestroy(c) == OK, "CI destroy");
  CHECK(nvmlComputeInstanceGetInfo_v2(c, &ci) == INVAL, "stale CI handle -> INVALID_ARGUMENT");
  CHECK(nvmlGpuInstanceDestroy(g3a) == OK, "GI destroy");
  CHECK(nvmlGpuInstanceGetInfo(g3a, &gi) == INVAL, "stale GI handle -> INVALID_ARGUMENT");
  CHECK(nvmlDeviceGetGpuInstanceById(a100, 1, &g) == NOTFOUND, "GI 1 gone -> NOT_FOUND");
  CHECK(nvmlGpuInstanceDestroy(g3b) == OK, "GI destroy 2");
}

static void check_gi_ids(void) {
  /* GI ids by size class: 1g at start s -> 7 + s on an 8-unit GPU. */
  int ids_ok = 1;
  gi_t ones[7];
  for (unsigned s = 0; s < 7; ++s) {
    place_t p = {s, 1};
    if (nvmlDeviceCreateGpuInstanceWithPlacement(a100, 19, &p, &ones[s]) != OK ||
        nvmlGpuInstanceGetInfo(ones[s], &gi) != OK || gi.id < 7 || gi.id > 14) {
      ids_ok = 0;
    }
  }
  CHECK(ids_ok, "seven 1g GIs with ids in 7..14");
  place_t p6 = {6, 2};
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 15, &p6, &g) == INSUFF_RES,
        "1g.10gb at 6:2 over 1g@6 -> INSUFFICIENT_RESOURCES");
  gi_t extra = NULL;
  place_t p0_1 = {0, 1};
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a100, 19, &p0_1, &extra) == INSUFF_RES,
        "eighth 1g -> INSUFFICIENT_RESOURCES");
  for (unsigned s = 0; s < 7; ++s) nvmlGpuInstanceDestroy(ones[s]);
}

static void check_other_models(void) {
  /* A30: 2g at 2:2 gets GI 2; RTX PRO 6000: 1g at 3:3 gets GI 4. */
  place_t a30p = {2, 2};
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(a30, 5, &a30p, &g) == OK &&
            nvmlGpuInstanceGetInfo(g, &gi) == OK && gi.id == 2,
        "A30 2g@2 GI id %u", gi.id);
  nvmlGpuInstanceDestroy(g);
  place_t rtxp = {3, 3};
  CHECK(nvmlDeviceCreateGpuInstanceWithPlacement(rtx, 14, &rtxp, &g) == OK &&
            nvmlGpuInstanceGetInfo(g, &gi) == OK && gi.id == 4,
        "RTX PRO 1g@3 GI id %u", gi.id);
  nvmlGpuInstanceDestroy(g);

  CHECK(strlen(nvmlErrorString(INSUFF_RES)) > 0, "error string");
  CHECK(nvmlShutdown() == OK, "final shutdown");
  CHECK(nvmlDeviceGetCount_v2(&count) == UNINIT, "after final shutdown -> UNINITIALIZED");
  CHECK(nvmlShutdown() == OK, "extra shutdown reports no error");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBRARY SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  snprintf(state_path, sizeof(state_path), "%s/abi-check-state.json", argv[2]);
  remove(state_path);
  unsetenv("MIGD_SIM_STATE");
  unsetenv("MIGD_SIM_FAULTS");
  unsetenv("MIGD_SIM_GI_IDS");
  setenv("MIGD_SIM_FSYNC", "0", 1);

  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("FAIL: dlopen %s: %s\n0 passed, 1 failed\n", argv[1], dlerror());
    return 1;
  }
  bind_all();
  if (failed) {
    printf("%d passed, %d failed\n", passed, failed);
    return 1;
  }
  /* Every NVML function of migd's list and every migdSim* control is
     exported. */
#define EXPECT_EXPORTED(id, name, type, since, header, use, head, effect) \
  CHECK(dlsym(lib, #name) != NULL, "exports %s", #name);
  MIGD_NVML_FUNCTIONS(EXPECT_EXPORTED)
#undef EXPECT_EXPORTED
#define EXPECT_CONTROL(name, type) CHECK(dlsym(lib, #name) != NULL, "exports %s", #name);
  MIGD_SIM_CONTROLS(EXPECT_CONTROL)
#undef EXPECT_CONTROL

  check_lifecycle();
  check_profile_info();
  check_placements();
  check_gi_create();
  check_ci_create();
  check_parent_device();
  check_mig_device_walk();
  check_listings();
  check_destroy_and_processes();
  check_gi_ids();
  check_other_models();

  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
