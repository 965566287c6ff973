// File: metrics/http_server.h
//
// MetricsHttpServer: serves a Registry over HTTP (cpp-httplib) for a
// Prometheus server to scrape (config key metrics.listen, default
// 127.0.0.1:9400):
//
//   GET /metrics   200, Content-Type "text/plain; version=0.0.4; charset=utf-8",
//                  Registry::Expose() (collectors run on the server's thread)
//   anything else  404
//
// Example:
//   metrics::MetricsHttpServer server(&registry);
//   MIGD_ASSIGN_OR_RETURN(int port, server.Start("127.0.0.1:9400"));
//   ...
//   server.Stop();
//
// Thread-safety: all methods are thread-safe. Requests are served on
// cpp-httplib's worker threads until Stop() returns.
#ifndef MIGD_METRICS_HTTP_SERVER_H_
#define MIGD_METRICS_HTTP_SERVER_H_

#include <absl/base/thread_annotations.h>

#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "metrics/registry.h"

namespace migd::metrics {

// A parsed "host:port" listen address. IPv6 hosts are bracketed
// ("[::1]:9400"); the brackets are not part of `host`.
struct ListenAddress {
  std::string host;
  int port = 0;  // 0 = an ephemeral port
};

// kInvalidArgument naming `listen` unless it is "host:port" with a non-empty
// host (no spaces; brackets only around an IPv6 literal) and a decimal port in
// 0..65535.
StatusOr<ListenAddress> ParseListenAddress(std::string_view listen);

class MetricsHttpServer {
 public:
  // `registry` is not owned and must outlive the server.
  explicit MetricsHttpServer(const Registry* registry);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds `listen` ("host:port"; port 0 picks a free port) and starts serving
  // on a background thread. Returns the bound port. kInvalidArgument for a
  // malformed address (ParseListenAddress); kUnavailable naming the address
  // when it cannot be bound (in use, unknown host, no permission);
  // kFailedPrecondition if already started. After Stop() it may be started
  // again.
  StatusOr<int> Start(std::string_view listen);

  // Stops accepting, finishes the request in progress and joins the server
  // thread. Idempotent; a no-op before Start().
  void Stop();

  // The bound port; 0 when not running.
  int port() const;

 private:
  struct Impl;
  const Registry* const registry_;
  mutable Mutex mu_;
  std::unique_ptr<Impl> impl_ ABSL_GUARDED_BY(mu_);  // null when not running
};

}  // namespace migd::metrics

#endif  // MIGD_METRICS_HTTP_SERVER_H_
