#include "testing/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "base/file_util.h"

namespace migd::testing {

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         const std::map<std::string, std::string>& env) {
  CommandResult result;
  if (argv.empty()) return result;
  const std::string out_path = scratch_dir + "/command.out";
  const std::string err_path = scratch_dir + "/command.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    for (const auto& [key, value] : env) {
      if (value.empty()) {
        ::unsetenv(key.c_str());
      } else {
        ::setenv(key.c_str(), value.c_str(), 1);
      }
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (pid < 0) return result;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return result;
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  result.out = ReadFileToString(out_path).value_or("");
  result.err = ReadFileToString(err_path).value_or("");
  return result;
}

}  // namespace migd::testing
