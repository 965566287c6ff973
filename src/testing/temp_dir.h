// File: testing/temp_dir.h
//
// TempDir: a fresh directory under $TMPDIR (or /tmp), or under a parent the
// test names, removed with its content when the object dies. One per test.
#ifndef MIGD_TESTING_TEMP_DIR_H_
#define MIGD_TESTING_TEMP_DIR_H_

#include <string>

namespace migd::testing {

class TempDir {
 public:
  TempDir();
  // Under `parent` (an existing directory), e.g. /dev/shm for tmpfs.
  explicit TempDir(const std::string& parent);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `content` to `path` (creating parents); aborts the test binary on
// failure, since a test cannot proceed without its fixture.
void WriteFileOrDie(const std::string& path, const std::string& content);

}  // namespace migd::testing

#endif  // MIGD_TESTING_TEMP_DIR_H_
