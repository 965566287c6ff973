// migd_config_doc: keeps docs/config.md's key table equal to the schema.
//
//   migd_config_doc --check docs/config.md   exit 1 (and why) if they differ
//   migd_config_doc --write docs/config.md   rewrite the table in place
//   migd_config_doc --print                  the table on stdout
#include <cstdio>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "daemon/config_doc.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: migd_config_doc --check FILE | --write FILE | --print\n");
  return 2;
}

int Fail(const migd::Status& s) {
  std::fprintf(stderr, "migd_config_doc: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--print") {
    std::fputs(migd::daemon::RenderKeyTable().c_str(), stdout);
    return 0;
  }
  if (argc != 3) return Usage();
  const std::string_view mode = argv[1];
  const std::string path = argv[2];
  migd::StatusOr<std::string> doc = migd::ReadFileToString(path, 1 << 20);
  if (!doc.ok()) return Fail(doc.status());
  if (mode == "--check") {
    const migd::Status s = migd::daemon::CheckKeyTable(*doc, path);
    if (!s.ok()) return Fail(s);
    std::printf("%s: the key table matches the config schema\n", path.c_str());
    return 0;
  }
  if (mode != "--write") return Usage();
  migd::StatusOr<std::string> updated = migd::daemon::WithRenderedKeyTable(*doc);
  if (!updated.ok()) return Fail(updated.status());
  if (*updated == *doc) return 0;
  const migd::Status s = migd::AtomicWriteFile(path, *updated, {.mode = 0644});
  if (!s.ok()) return Fail(s);
  std::printf("%s: key table rewritten from the config schema\n", path.c_str());
  return 0;
}
