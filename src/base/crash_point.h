// File: base/crash_point.h
//
// Crash points: named places in migd's own code (record and CDI spec writes
// and removals) where a test can make the process die with SIGKILL, the way
// the simulator's CRASH hooks do for NVML calls (docs/simulator.md §7). The
// crash campaign (tests/crash, docs/reliability.md) uses them to kill migd
// exactly inside a record or CDI write instead of hoping a timer lands there.
//
//   MIGD_CRASH_POINTS="record.write.before_rename@3,cdi.remove@1"
//
// kills the process at the 3rd time it reaches record.write.before_rename (or
// the 1st cdi.remove, whichever comes first). N counts per point, from 1, in
// this process. Unset or empty: CrashPoint() costs a once-flag check and an
// atomic load.
// A malformed value is reported on stderr once and ignored (test-only knob;
// production never sets it). Points are listed in kCrashPointNames.
//
// Thread-safety: CrashPoint may be called from any thread.
#ifndef MIGD_BASE_CRASH_POINT_H_
#define MIGD_BASE_CRASH_POINT_H_

#include <array>
#include <string_view>

namespace migd {

inline constexpr std::array<std::string_view, 6> kCrashPointNames = {
    "record.write.before_rename",  // temp file written (and synced), not renamed
    "record.write.after_rename",   // renamed, directory not yet synced
    "record.remove",               // just before unlink
    "cdi.write.before_rename",
    "cdi.write.after_rename",
    "cdi.remove",
};

// Dies with SIGKILL if `name` is armed and this is its Nth arrival.
void CrashPoint(std::string_view name);

}  // namespace migd

#endif  // MIGD_BASE_CRASH_POINT_H_
