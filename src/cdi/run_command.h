// File: cdi/run_command.h
//
// RunForOutput: runs a program (no shell, no $PATH search) with this
// process's environment and returns what it wrote to stdout. Used to run
// `nvidia-ctk cdi generate` once at startup (cdi/common_edits.h).
//
// Errors: kNotFound if argv[0] cannot be executed; kDeadlineExceeded if it
// runs past `timeout` (it is then killed with SIGKILL); kFailedPrecondition
// naming the exit status or signal and the last line of its stderr when it
// exits non-zero; kResourceExhausted if stdout exceeds `max_bytes`.
//
// Thread-safety: reentrant (each call owns its child and pipes).
#ifndef MIGD_CDI_RUN_COMMAND_H_
#define MIGD_CDI_RUN_COMMAND_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace migd::cdi {

StatusOr<std::string> RunForOutput(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout,
                                   size_t max_bytes = 16 << 20);

}  // namespace migd::cdi

#endif  // MIGD_CDI_RUN_COMMAND_H_
