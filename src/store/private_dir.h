// File: store/private_dir.h
//
// CheckPrivateDir: the rule for every directory migd keeps durable state in
// (the state directory, its quarantine and GPU health mark directories):
// ours alone, i.e. not a symlink, a real directory, owned by migd's euid and
// not writable by group or others. `st` is the entry's lstat; `role` names
// it in the error ("state directory"), which also says the fix.
//
// Thread-safety: a pure function.
#ifndef MIGD_STORE_PRIVATE_DIR_H_
#define MIGD_STORE_PRIVATE_DIR_H_

#include <sys/stat.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace migd::store {

// kFailedPrecondition naming `role`, the directory and the fix.
Status CheckPrivateDir(const std::string& dir, const struct stat& st, std::string_view role);

}  // namespace migd::store

#endif  // MIGD_STORE_PRIVATE_DIR_H_
