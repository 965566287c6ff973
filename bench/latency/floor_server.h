// File: bench/latency/floor_server.h
//
// The floor of the socket benchmark: a migd.v1.MigManager server whose
// Allocate and Release handlers return OK with an empty response at once,
// served the way migd serves (api/server.h): gRPC's synchronous server with
// the same receive limit, no listening port, connections accepted on a unix
// socket by our own thread and handed over with AddInsecureChannelFromFd.
// A round trip to it is what gRPC and the socket cost before migd does any
// work. Every other RPC answers UNIMPLEMENTED. FloorApi::kCallback serves the
// same handlers on gRPC's callback API instead (finished inline), to show
// what the synchronous server's thread hand-offs cost.
//
// latency_socket runs it in a child process (RunFloorServer), as migd runs
// in one, so that client and server do not share a process.
//
// Thread-safety: RunFloorServer blocks the calling thread until SIGTERM or
// SIGINT.
#ifndef MIGD_BENCH_LATENCY_FLOOR_SERVER_H_
#define MIGD_BENCH_LATENCY_FLOOR_SERVER_H_

#include <string>

namespace migd::bench::latency {

// Serves on `socket_path` (created; removed at the end), prints "floor
// ready" to stderr once it accepts connections, returns 0 after SIGTERM or
// SIGINT, 1 if the socket cannot be bound.
enum class FloorApi { kSync, kCallback };
int RunFloorServer(const std::string& socket_path, FloorApi api);

}  // namespace migd::bench::latency

#endif  // MIGD_BENCH_LATENCY_FLOOR_SERVER_H_
