// File: driver/nvml/nvml_session.h
//
// NvmlSession: the one NVML session of a process (docs/architecture.md, "NVML"). It is the
// ONLY code in migd that calls nvmlInit_v2 and nvmlShutdown:
//   Open()    calls nvmlInit_v2 (or nvmlInit) exactly once;
//   Acquire() admits one NVML operation while the session is open;
//   Close()   stops admitting, waits until every admitted operation has
//             finished, then calls nvmlShutdown exactly once.
// At most one session may be open per process at a time. Every Open() starts a
// new generation (a process-wide, strictly increasing number); NvmlDriver tags
// the device handles it caches with it and drops them when it changes, after
// DCGM's generation-tagged handles.
//
// Example:
//   auto session = std::make_shared<NvmlSession>(lib);
//   MIGD_RETURN_IF_ERROR(session->Open());
//   {
//     MIGD_ASSIGN_OR_RETURN(NvmlSession::Token token, session->Acquire());
//     ... NVML calls through session->library() ...
//   }  // token released
//   session->Close();
//
// Thread-safety: all methods are thread-safe. Close() blocks until the tokens
// admitted before it are released, so a thread must not call Close() (or
// destroy the session) while it holds a Token.
#ifndef MIGD_DRIVER_NVML_NVML_SESSION_H_
#define MIGD_DRIVER_NVML_NVML_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "base/mutex.h"
#include "base/status.h"
#include "driver/nvml/nvml_library.h"

namespace migd::driver {

class NvmlSession {
 public:
  // Admits one operation; releases it when destroyed. Movable, not copyable.
  class Token {
   public:
    Token() = default;
    Token(Token&& other) noexcept;
    Token& operator=(Token&& other) noexcept;
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token();

    // The generation of the session that admitted this token (0 if empty).
    uint64_t generation() const { return generation_; }
    bool valid() const { return session_ != nullptr; }

   private:
    friend class NvmlSession;
    Token(NvmlSession* session, uint64_t generation)
        : session_(session), generation_(generation) {}
    void Release();
    NvmlSession* session_ = nullptr;
    uint64_t generation_ = 0;
  };

  // REQUIRES: `library` is not null.
  explicit NvmlSession(std::shared_ptr<NvmlLibrary> library);
  // Closes the session if it is open (see Close()).
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  // Calls nvmlInit_v2 once. kFailedPrecondition if this session is already
  // open or another NvmlSession of the process is open (or closing); the
  // FromNvml status of nvmlInit_v2 if it fails (the session stays closed and
  // nvmlShutdown is not called). A closed session may be opened again; each
  // successful Open starts a new generation.
  Status Open();

  // Admits one operation. kUnavailable when the session is not open or is
  // closing. The token must be released before Close() can finish.
  StatusOr<Token> Acquire();

  // Stops admitting new operations, waits for every admitted token to be
  // released, then calls nvmlShutdown exactly once and returns its status.
  // OK and no NVML call if the session is not open. Concurrent Close() calls
  // wait for the first and return OK.
  Status Close();

  bool is_open() const;
  // The generation of the current (or last) Open; 0 before the first Open.
  uint64_t generation() const;
  // Operations admitted and not yet released.
  int in_flight() const;

  // Runs `hook` once when Close() has admitted its last token and before it
  // calls nvmlShutdown (objects that die with the session, e.g. an event
  // set, are freed there). Hooks run on the closing thread, without a token
  // and without this session's lock, in the order they were added. Returns
  // an id for RemoveCloseHook. A hook stays for later Close() calls until
  // removed.
  uint64_t AddCloseHook(std::function<void()> hook);
  // Removes a hook; a no-op for an unknown id. A hook may be running while
  // this returns (the closing thread copied the hooks before running them).
  void RemoveCloseHook(uint64_t id);

  NvmlLibrary& library() const { return *library_; }
  const std::shared_ptr<NvmlLibrary>& shared_library() const { return library_; }

 private:
  enum class State { kClosed, kOpening, kOpen, kClosing };
  void ReleaseToken();

  const std::shared_ptr<NvmlLibrary> library_;
  mutable Mutex mu_;
  CondVar cv_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_hook_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void()>> close_hooks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace migd::driver

#endif  // MIGD_DRIVER_NVML_NVML_SESSION_H_
