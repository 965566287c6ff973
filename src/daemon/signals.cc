#include "daemon/signals.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/logging.h"
#include "daemon/daemon.h"

namespace migd::daemon {

SignalWaiter::~SignalWaiter() {
  if (fd_ >= 0) ::close(fd_);
}

MaybeFailure SignalWaiter::Block() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    return Failure{kExitStartup, "cannot block signals"};
  }
  ::signal(SIGPIPE, SIG_IGN);
  fd_ = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (fd_ < 0) return Failure{kExitStartup, std::string("signalfd: ") + std::strerror(errno)};
  return std::nullopt;
}

SignalWaiter::Event SignalWaiter::Wait(std::string* name) {
  while (true) {
    signalfd_siginfo si{};
    const ssize_t n = ::read(fd_, &si, sizeof(si));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(si))) {
      spdlog::error("reading signals failed; shutting down{}",
                    Fields().Add("error", std::strerror(errno)));
      *name = "none (read failed)";
      return Event::kStop;
    }
    *name = ::strsignal(static_cast<int>(si.ssi_signo));
    return si.ssi_signo == SIGHUP ? Event::kReload : Event::kStop;
  }
}

}  // namespace migd::daemon
