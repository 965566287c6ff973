#include "cli/reply_tables.h"

#include <vector>

#include "cli/output.h"
#include "cli/status_view.h"

namespace migd::cli {
namespace {

std::string PlacementText(const migd::v1::Placement& p) {
  return std::to_string(p.start()) + ":" + std::to_string(p.size());
}

std::string PathName(migd::v1::AllocationPath path) {
  switch (path) {
    case migd::v1::ALLOCATION_PATH_REUSE:
      return "reuse";
    case migd::v1::ALLOCATION_PATH_CREATE:
      return "create";
    case migd::v1::ALLOCATION_PATH_RECLAIM_CREATE:
      return "reclaim+create";
    default:
      return "-";
  }
}

std::string FullOwner(const migd::v1::Owner& owner) {
  std::string label = OwnerLabel(owner);
  if (owner.has_pod() && !owner.pod().container().empty()) {
    label += " (" + owner.pod().container() + ")";
  }
  return label.empty() ? "-" : label;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::vector<std::string> InstanceHeader() {
  return {"GPU", "PLACEMENT", "PROFILE", "STATE", "OWNER", "REQUEST", "MIG"};
}

std::vector<std::string> InstanceRow(const migd::v1::Instance& i) {
  return {std::to_string(i.gpu_index()),
          PlacementText(i.placement()),
          i.profile(),
          std::string(StateLabel(i.state())),
          FullOwner(i.owner()),
          OrDash(i.request_id()),
          OrDash(i.mig_uuid())};
}

std::string InstanceTable(const google::protobuf::RepeatedPtrField<migd::v1::Instance>& list) {
  std::vector<std::vector<std::string>> rows = {InstanceHeader()};
  for (const migd::v1::Instance& i : list) rows.push_back(InstanceRow(i));
  return FormatTable(rows);
}

}  // namespace

std::string ListTable(const migd::v1::ListResponse& response) {
  std::string out;
  if (response.instances_size() == 0) {
    out += "no instances\n";
  } else {
    out += InstanceTable(response.instances());
  }
  if (response.foreign_size() > 0) {
    out += "\nforeign (not created by migd, preserved):\n";
    std::vector<std::vector<std::string>> rows = {{"GPU", "PLACEMENT", "PROFILE", "GI", "CI"}};
    for (const migd::v1::ForeignInstance& f : response.foreign()) {
      std::string cis;
      for (uint32_t ci : f.ci_ids()) cis += (cis.empty() ? "" : ",") + std::to_string(ci);
      rows.push_back({std::to_string(f.gpu_index()), PlacementText(f.placement()), f.profile(),
                      std::to_string(f.gi_id()), OrDash(cis)});
    }
    out += FormatTable(rows);
  }
  return out;
}

std::string AllocateTable(const migd::v1::AllocateResponse& response) {
  std::string out = "allocated " + response.request_id() + ": " +
                    std::to_string(response.instances_size()) + " instance(s)" +
                    (response.replayed() ? " (replayed: the result of the earlier identical "
                                           "request)"
                                         : "") +
                    "\n";
  std::vector<std::vector<std::string>> rows = {{"GPU", "PLACEMENT", "PROFILE", "PATH", "MIG"}};
  for (const migd::v1::AllocatedInstance& a : response.instances()) {
    const migd::v1::Instance& i = a.instance();
    rows.push_back({std::to_string(i.gpu_index()), PlacementText(i.placement()), i.profile(),
                    PathName(a.path()), OrDash(i.mig_uuid())});
  }
  out += FormatTable(rows);
  // What a container runtime needs, one line each: CDI names, or the legacy
  // environment and device nodes.
  if (response.cdi_devices_size() > 0) {
    out += "cdi";
    for (const std::string& d : response.cdi_devices()) out += " " + d;
    out += "\n";
  }
  for (const migd::v1::EnvVar& e : response.envs()) {
    out += "env " + e.name() + "=" + e.value() + "\n";
  }
  if (response.device_nodes_size() > 0) {
    out += "devices";
    for (const migd::v1::DeviceNode& d : response.device_nodes()) {
      out += " " + d.host_path();
      if (d.container_path() != d.host_path()) out += "->" + d.container_path();
      if (d.permissions() != "rw") out += ":" + d.permissions();
    }
    out += "\n";
  }
  return out;
}

std::string ReleaseTable(const migd::v1::ReleaseResponse& response) {
  std::string out = "released " + std::to_string(response.instances_size()) +
                    " instance(s); now Idle, kept for reuse\n";
  if (response.instances_size() > 0) out += InstanceTable(response.instances());
  return out;
}

std::string PlanTable(const migd::v1::PlanResponse& response) {
  std::string out = "plan (" + OrDash(response.search()) + " search; dry run, nothing changed):\n";
  std::vector<std::vector<std::string>> rows = {
      {"#", "GPU", "PLACEMENT", "PROFILE", "PATH", "DETAIL"}};
  for (int n = 0; n < response.instances_size(); ++n) {
    const migd::v1::PlannedInstance& p = response.instances(n);
    std::string detail;
    if (p.path() == migd::v1::ALLOCATION_PATH_REUSE) {
      detail = "reuses Idle " + OrDash(p.reuse_mig_uuid());
    } else if (p.path() == migd::v1::ALLOCATION_PATH_RECLAIM_CREATE) {
      detail = "after destroying";
      for (const migd::v1::ReclaimedInstance& r : p.reclaims()) {
        detail += " " + r.profile() + "@gpu" + std::to_string(r.gpu_index()) + ":" +
                  PlacementText(r.placement()) + " (" + OrDash(r.mig_uuid()) + ")";
      }
    } else if (p.path() == migd::v1::ALLOCATION_PATH_CREATE) {
      detail = "in free space";
    }
    rows.push_back({std::to_string(n), std::to_string(p.gpu_index()), PlacementText(p.placement()),
                    p.profile(), PathName(p.path()), detail});
  }
  return out + FormatTable(rows);
}

std::string ReclaimTable(const migd::v1::ReclaimResponse& response) {
  std::string out;
  if (response.destroyed_size() == 0 && response.failed_size() == 0) {
    return "nothing to reclaim: no Idle instance matches\n";
  }
  out += "destroyed " + std::to_string(response.destroyed_size()) + " Idle instance(s)\n";
  if (response.destroyed_size() > 0) out += InstanceTable(response.destroyed());
  if (response.failed_size() > 0) {
    out += "\nfailed to destroy " + std::to_string(response.failed_size()) +
           " instance(s); now Error, migd's reconciler retries (see migd's log):\n";
    out += InstanceTable(response.failed());
  }
  return out;
}

std::string HealthClearTable(uint32_t gpu, const migd::v1::ClearHealthResponse& response) {
  const std::string name = "GPU " + std::to_string(gpu) + ": ";
  if (!response.gpu_was_unhealthy() && response.instances_cleared() == 0) {
    return name + "nothing to clear (no health marks)\n";
  }
  std::string out = name + "cleared ";
  if (response.gpu_was_unhealthy()) out += "the GPU's health mark and ";
  out += std::to_string(response.instances_cleared()) + " instance mark(s)";
  if (response.gpu_was_unhealthy()) out += "; it takes new allocations again";
  return out + "\n";
}

}  // namespace migd::cli
