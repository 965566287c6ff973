// Fuzz target: the CDI spec named by cdi.commonEditsFrom (cdi/spec_builder.h),
// a file written by another tool (e.g. `nvidia-ctk cdi generate`) that migd
// merges into every spec it publishes.
//
// Input: the bytes of that file (JSON when it starts with '{', else YAML).
// The rest of the host (/proc, /dev) is a fixed in-memory fake, so every
// input reaches the merge. Properties: Build never crashes or throws; a spec
// it builds parses back (strictly) to a spec that validates and serialises to
// the same bytes, i.e. migd never publishes a file that CDI consumers reject.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cdi/host_reader.h"
#include "cdi/names.h"
#include "cdi/spec.h"
#include "cdi/spec_builder.h"
#include "fuzz/fuzz_check.h"

namespace {

// No extension: ParseSpecDocument picks JSON for text starting with '{', else YAML.
constexpr char kCommonPath[] = "/etc/cdi/common-edits";

// /proc from fixed text, every /dev path a character device, and the common
// spec from the fuzz input.
class FuzzHostReader final : public migd::cdi::HostReader {
 public:
  explicit FuzzHostReader(std::string_view common) : common_(common) {}

  migd::StatusOr<std::string> ReadFile(const std::string& path) const override {
    if (path == kCommonPath) return std::string(common_);
    if (path == "/proc/devices") return std::string("Character devices:\n195 nvidia\n511 nvidia-caps\n");
    if (path == "/proc/driver/nvidia-caps/mig-minors") {
      return std::string("gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n");
    }
    return migd::NotFoundError(path + ": No such file or directory");
  }
  migd::StatusOr<migd::cdi::DeviceNodeInfo> StatDeviceNode(const std::string&) const override {
    return migd::cdi::DeviceNodeInfo{.type = 'c', .major = 195, .minor = 0, .mode = 0666};
  }

 private:
  std::string_view common_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  FuzzHostReader reader(text);
  migd::cdi::BuilderOptions options;
  options.common_edits_from = kCommonPath;
  migd::cdi::SpecBuilder builder(options, &reader);

  migd::cdi::MigInstance instance;
  instance.gpu_minor = 0;
  instance.gi_id = migd::NvmlGiId(1);
  instance.ci_id = migd::NvmlCiId(0);
  instance.mig_uuid = migd::MigUuid("MIG-5e1c4ab2-7c1d-4f52-9a55-0c6c5d07f5a1");
  migd::StatusOr<migd::cdi::BuiltSpec> built = builder.Build(instance);
  // MIGD_FUZZ_DEBUG=1 shows why inputs are refused, to check that seeds get
  // past the parser into the merge.
  if (std::getenv("MIGD_FUZZ_DEBUG") != nullptr) {
    std::fprintf(stderr, "build: %s\n", built.status().ToString().c_str());
  }
  if (!built.ok()) return 0;

  migd::StatusOr<migd::cdi::Spec> reparsed =
      migd::cdi::ParseSpecDocument(built->content, "published.json");
  FUZZ_CHECK(reparsed.ok(), "a published spec does not parse back");
  FUZZ_CHECK(migd::cdi::ValidateSpec(*reparsed, options.max_version).ok(),
             "a published spec does not validate after parsing back");
  FUZZ_CHECK(migd::cdi::SerializeSpec(*reparsed) == built->content,
             "a published spec changes across parse/serialise");
  return 0;
}
