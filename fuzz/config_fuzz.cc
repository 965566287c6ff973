// Fuzz target: the daemon's config file (daemon/config.h).
//
// Input: the bytes of migd.yaml. Properties: ParseConfig never crashes or
// throws (yaml-cpp exceptions stay inside the module); a config it accepts
// passes ValidateConfig, and diffing/merging it with the defaults works.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/config.h"
#include "daemon/config_parse.h"
#include "daemon/config_reload.h"
#include "daemon/config_validate.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  migd::StatusOr<migd::daemon::Config> cfg = migd::daemon::ParseConfig(text, "fuzz.yaml");
  if (!cfg.ok()) return 0;
  FUZZ_CHECK(migd::daemon::ValidateConfig(*cfg, "fuzz.yaml").ok(),
             "ParseConfig accepted a config ValidateConfig refuses");
  const migd::daemon::Config defaults;
  (void)migd::daemon::DiffConfigs(defaults, *cfg);
  (void)migd::daemon::MergeReloadable(defaults, *cfg);
  return 0;
}
