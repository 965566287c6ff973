// File: testing/privileges.h
//
// What this test process may do, so that a test can pick the exact behaviour
// to assert instead of skipping. HasCapability reads the effective
// capability set (CAP_MKNOD, ...). RunUnprivileged runs a function in a forked child that holds no root
// privileges, so a test of a permission failure tests the same thing as root
// (as CI runs) as it does as a user. As root, the child first drops to
// uid/gid 65534 (nobody) with no supplementary groups; otherwise it keeps
// the caller's identity. The files the function touches must be reachable
// by that user (e.g. directories 0755).
//
// Example:
//   Status s = RunUnprivileged([&] { return AtomicWriteFile(ro_dir + "/f", "x"); });
//   EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
//
// Thread-safety: forks; `fn` runs in the child with only the calling thread,
// so it must not wait for other threads of the test.
#ifndef MIGD_TESTING_PRIVILEGES_H_
#define MIGD_TESTING_PRIVILEGES_H_

#include <sys/types.h>

#include <functional>

#include "base/status.h"

namespace migd::testing {

// The unprivileged identity root drops to.
inline constexpr uid_t kNobodyUid = 65534;
inline constexpr gid_t kNobodyGid = 65534;

// fn's Status as the child returned it (code and message); kInternal if the
// child could not drop privileges or died.
Status RunUnprivileged(const std::function<Status()>& fn);

// Whether capability `cap` (linux/capability.h numbering, e.g. 27 for
// CAP_MKNOD) is in this process's effective set (/proc/self/status CapEff).
bool HasCapability(int cap);
inline constexpr int kCapMknod = 27;  // CAP_MKNOD

}  // namespace migd::testing

#endif  // MIGD_TESTING_PRIVILEGES_H_
