// File: cdi/cdi_test_util.h
//
// Test-only helpers for cdi_test: a fake host (a /proc tree written by the
// simulator's proc_files functions, plus device nodes served by a fake
// reader), and the CDI JSON schema checker.
#ifndef MIGD_CDI_CDI_TEST_UTIL_H_
#define MIGD_CDI_CDI_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cdi/fake_host_reader.h"
#include "cdi/host_reader.h"
#include "cdi/json_schema_check.h"
#include "cdi/spec_builder.h"
#include "mig/catalog.h"
#include "sim/proc_files.h"
#include "sim/state.h"

namespace migd::cdi::testing {

inline constexpr char kMigUuid[] = "MIG-4f1c2a9e-1b2c-5d3e-8f90-0a1b2c3d4e5f";
inline constexpr char kMigUuid2[] = "MIG-7a6b5c4d-3e2f-5a1b-9c8d-7e6f5a4b3c2d";

// The standard fake host: GPU minor 1 with GI 2 (CIs 0 and 1) and GI 5
// (CI 0); proc tree written by sim::WriteStaticProcFiles and
// sim::SyncInstanceProcFiles under <root>/proc; device nodes for
// /dev/nvidia1, nvidiactl, nvidia-uvm, nvidia-uvm-tools under <root>/dev.
inline sim::SimState MakeSimState(const std::string& proc_root) {
  sim::SimState state;
  state.proc_root = proc_root;
  for (uint32_t index : {0u, 1u}) {
    sim::SimGpu gpu;
    gpu.index = GpuIndex(index);
    gpu.model_key = "h100-80gb";
    gpu.uuid = GpuUuid("GPU-00000000-0000-0000-0000-00000000000" + std::to_string(index));
    gpu.minor = index;
    gpu.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
    state.gpus.push_back(gpu);
  }
  sim::SimGi gi2;
  gi2.id = NvmlGiId(2);
  for (uint32_t c : {0u, 1u}) {
    sim::SimCi ci;
    ci.id = NvmlCiId(c);
    gi2.compute_instances.push_back(ci);
  }
  sim::SimGi gi5;
  gi5.id = NvmlGiId(5);
  sim::SimCi ci0;
  ci0.id = NvmlCiId(0);
  gi5.compute_instances.push_back(ci0);
  state.gpus[1].gpu_instances = {gi2, gi5};
  return state;
}

inline void WriteFakeProc(const std::string& proc_root) {
  sim::SimState state = MakeSimState(proc_root);
  Status s = sim::WriteStaticProcFiles(state, mig::Catalog::Default());
  ASSERT_TRUE(s.ok()) << s;
  s = sim::SyncInstanceProcFiles(state);
  ASSERT_TRUE(s.ok()) << s;
}

inline void AddStandardNodes(FakeHostReader* reader, const std::string& dev_root) {
  reader->AddNode(dev_root + "/nvidia1", {'c', 195, 1, 0666});
  reader->AddNode(dev_root + "/nvidiactl", {'c', 195, 255, 0666});
  reader->AddNode(dev_root + "/nvidia-uvm", {'c', 511, 0, 0666});
  reader->AddNode(dev_root + "/nvidia-uvm-tools", {'c', 511, 1, 0666});
}

inline MigInstance StandardInstance() {
  MigInstance i;
  i.gpu_minor = 1;
  i.gi_id = NvmlGiId(2);
  i.ci_id = NvmlCiId(1);
  i.mig_uuid = MigUuid(kMigUuid);
  return i;
}

// The checker over tests/cdi/schema/{schema,defs}.json (aborts the test on
// a load failure).
inline const JsonSchemaChecker& SchemaChecker() {
  static const JsonSchemaChecker* checker = [] {
    StatusOr<JsonSchemaChecker> c =
        JsonSchemaChecker::Load(MIGD_CDI_SCHEMA_DIR, {"schema.json", "defs.json"}, "schema.json");
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      std::abort();
    }
    return new JsonSchemaChecker(std::move(*c));
  }();
  return *checker;
}

// Parses `text` as JSON and validates it against the CDI schema.
inline Status ValidateAgainstSchema(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("not JSON: ") + e.what());
  }
  return SchemaChecker().Validate(j);
}

}  // namespace migd::cdi::testing

#endif  // MIGD_CDI_CDI_TEST_UTIL_H_
