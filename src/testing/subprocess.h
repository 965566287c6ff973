// File: testing/subprocess.h
//
// RunCommand: fork+exec of a program with this process's environment (plus
// overrides), stdout and stderr captured through files in a scratch
// directory. For end-to-end tests of the real binaries (migctl, migd).
//
// Example:
//   TempDir dir;
//   CommandResult r = RunCommand({MIGCTL, "probe", "-o", "json"}, dir.path(),
//                                {{"MIGD_SIM_STATE", state}});
//   EXPECT_EQ(r.exit_code, 0) << r.err;
//
// Thread-safety: safe to call from one thread at a time per scratch dir.
#ifndef MIGD_TESTING_SUBPROCESS_H_
#define MIGD_TESTING_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace migd::testing {

struct CommandResult {
  // The exit status; 128 + N when killed by signal N; -1 if it could not run.
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path, not searched in $PATH) with argv and waits for it.
// `env` entries are set in the child before exec; an empty value unsets.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         const std::map<std::string, std::string>& env = {});

}  // namespace migd::testing

#endif  // MIGD_TESTING_SUBPROCESS_H_
