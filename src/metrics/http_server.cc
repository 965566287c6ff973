#include "metrics/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace migd::metrics {

struct MetricsHttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> exited{false};  // listen_after_bind() returned
  int port = 0;
};

StatusOr<ListenAddress> ParseListenAddress(std::string_view listen) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("metrics listen address \"" + std::string(listen) +
                                "\": " + std::string(why) +
                                " (want host:port, e.g. 127.0.0.1:9400 or [::1]:9400)");
  };
  ListenAddress out;
  std::string_view host;
  std::string_view port;
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string_view::npos) return bad("unterminated '['");
    host = listen.substr(1, close - 1);
    std::string_view rest = listen.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("missing ':port' after ']'");
    port = rest.substr(1);
    if (host.find(':') == std::string_view::npos)
      return bad("brackets only around an IPv6 address");
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':port'");
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return bad("an IPv6 address must be in brackets");
    }
  }
  if (host.empty()) return bad("empty host");
  if (std::any_of(host.begin(), host.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '[' || c == ']' || c == '/' ||
               static_cast<unsigned char>(c) < 0x20;
      })) {
    return bad("invalid character in host");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("port is not a number in 0..65535");
  }
  const int p = std::stoi(std::string(port));
  if (p > 65535) return bad("port is not a number in 0..65535");
  out.host = std::string(host);
  out.port = p;
  return out;
}

MetricsHttpServer::MetricsHttpServer(const Registry* registry) : registry_(registry) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

StatusOr<int> MetricsHttpServer::Start(std::string_view listen) {
  StatusOr<ListenAddress> addr = ParseListenAddress(listen);
  if (!addr.ok()) return addr.status();
  MutexLock lock(&mu_);
  if (impl_) {
    return FailedPreconditionError("metrics server already listening on port " +
                                   std::to_string(impl_->port));
  }
  auto impl = std::make_unique<Impl>();
  const Registry* registry = registry_;
  impl->server.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Expose(), Registry::kContentType);
  });
  // Unmatched paths get cpp-httplib's 404; a short body says what exists.
  impl->server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found; metrics are at /metrics\n", "text/plain");
  });
  // cpp-httplib's default sets SO_REUSEPORT, which lets a second process
  // bind the same port and silently share the scrapes. SO_REUSEADDR alone
  // still allows a quick restart over TIME_WAIT sockets while making a live
  // listener a bind error.
  impl->server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // An idle keep-alive connection holds a worker until it times out, and
  // Stop() waits for the workers: keep that short (scrapes are seconds apart
  // anyway).
  impl->server.set_keep_alive_timeout(2);
  // The cpp-httplib default of 8 workers is more than a scrape target needs.
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(2); };

  errno = 0;
  int port = 0;
  if (addr->port == 0) {
    port = impl->server.bind_to_any_port(addr->host);
  } else {
    port = impl->server.bind_to_port(addr->host, addr->port) ? addr->port : -1;
  }
  if (port < 0) {
    const int err = errno;
    return UnavailableError(
        "cannot listen on " + std::string(listen) + " for metrics" +
        (err != 0 ? std::string(": ") + std::strerror(err) : std::string()) +
        "; another process may hold the port or the host is not a local address (change "
        "metrics.listen)");
  }
  impl->port = port;
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->exited = true;
  });
  impl_ = std::move(impl);
  return port;
}

void MetricsHttpServer::Stop() {
  std::unique_ptr<Impl> impl;
  {
    MutexLock lock(&mu_);
    impl = std::move(impl_);
  }
  if (!impl) return;
  // cpp-httplib's stop() is a no-op until the listen loop has started
  // (is_running()); a Stop() right after Start() must not be lost.
  while (!impl->server.is_running() && !impl->exited) std::this_thread::yield();
  impl->server.stop();
  if (impl->thread.joinable()) impl->thread.join();
}

int MetricsHttpServer::port() const {
  MutexLock lock(&mu_);
  return impl_ ? impl_->port : 0;
}

}  // namespace migd::metrics
