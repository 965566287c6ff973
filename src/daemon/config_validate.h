// File: daemon/config_validate.h
//
// The invariants of a Config: each key's checks from the schema (ranges,
// choices, absolute paths, socket mode and path length, listen address, CDI
// names, Kubernetes names, MIG profile names in the built-in catalogue), then
// the rules that span keys (config_validate.cc: a node name when
// kubernetes.enabled or recovery.ownerSource: hami needs one, inCluster and
// kubeconfig not both, ...). ParseConfig runs it on every file; the daemon
// runs it again after the command-line overrides.
//
// Thread-safety: pure function.
#ifndef MIGD_DAEMON_CONFIG_VALIDATE_H_
#define MIGD_DAEMON_CONFIG_VALIDATE_H_

#include <string_view>

#include "base/status.h"
#include "daemon/config.h"

namespace migd::daemon {

// OK, or kInvalidArgument for the first problem in schema order, worded
// "config <source>: <key path>: <what is wrong, and what to write>".
Status ValidateConfig(const Config& config, std::string_view source);

}  // namespace migd::daemon

#endif  // MIGD_DAEMON_CONFIG_VALIDATE_H_
