#include "store/instance_identity.h"

#include <string_view>

namespace migd::store {
namespace {

// At most 64 characters of a value that may be hostile or huge.
std::string Quote(std::string_view s) { return "'" + std::string(s.substr(0, 64)) + "'"; }

}  // namespace

std::string RecordKey::ToString() const {
  return "gpu=" + gpu_uuid.value() + " profile=" + std::to_string(profile_id.value()) +
         " placement=" + placement.ToString();
}

std::ostream& operator<<(std::ostream& os, const RecordKey& key) { return os << key.ToString(); }

std::string InstanceIdentity::ToString() const {
  return RecordKey::ToString() + " gi=" + std::to_string(gi_id.value()) +
         " ci=" + std::to_string(ci_id.value()) +
         " mig=" + (mig_uuid.value().empty() ? std::string("-") : mig_uuid.value());
}

Status ValidateMigUuidOf(const GpuUuid& parent, const MigUuid& mig_uuid) {
  const std::string& mig = mig_uuid.value();
  if (mig == parent.value()) {
    return InvalidArgumentError("MIG UUID " + Quote(mig) + " is the UUID of its parent GPU " +
                                Quote(parent.value()) +
                                ": it was read from the parent device, not from the MIG "
                                "device (a MIG device's own UUID starts with MIG-)");
  }
  if (mig.rfind("MIG-", 0) != 0) {
    return InvalidArgumentError("MIG UUID " + Quote(mig) + " of an instance of GPU " +
                                Quote(parent.value()) + " does not start with MIG-");
  }
  if (!IsValidMigUuid(mig)) {
    return InvalidArgumentError("MIG UUID " + Quote(mig) + " of an instance of GPU " +
                                Quote(parent.value()) +
                                " is not of the form MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  }
  return OkStatus();
}

}  // namespace migd::store
