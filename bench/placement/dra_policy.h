// File: bench/placement/dra_policy.h
//
// DraPolicy: a node under Kubernetes DRA in the placement benchmark. Every
// decision is what kube-scheduler and the node's DRA driver do for one claim:
//   1. the driver's published ResourceSlices for the current layout
//      (ResourceSlice JSON, as the API server stores it);
//   2. the scheduler's allocator on them: the allocator model of
//      k8s/dra/testing/allocator_model.h (first fit over pools, slices and
//      devices in order, counters, backtracking), with the devices of the
//      Active instances allocated; one request per claim instance selecting
//      `profile == <the class's GI profile>`;
//   3. Prepare of the chosen devices on the node.
// Two drivers:
//   kNvidia  NVIDIA's dynamic MIG (kubernetes-sigs/dra-driver-nvidia-gpu
//            cmd/gpu-kubelet-plugin: one counter slice, then one device slice
//            per GPU in PCI bus order, devices sorted by their names
//            gpu-<minor>-mig-<profile without '.'>-<GI profile id>-<start>);
//            Prepare creates the instance; Unprepare destroys it (no Idle).
//   kMigd    migd (src/k8s/dra): the pool of k8s::dra::BuildPool (per
//            profile, an Idle instance first, then the planner-preferred free
//            placement, ...) rendered by k8s::dra::RenderSlices; Prepare
//            reuses an Idle instance at the device's placement, else destroys
//            the Idle instances that overlap it and creates; Unprepare keeps
//            the instance Idle.
// Both use the same counters (k8s/dra/device_table.h: memory slices, engine
// budget, instance caps; mig::Layout's legality), so the comparison is of
// the order and of Idle reuse alone.
//
// Time-to-ready of a claim (Prepare's critical path) comes from DraLatency:
// reuse_ms per reused instance, destroy_ms per reclaimed Idle instance,
// create_ms per created instance. NVIDIA's destroys happen at Unprepare, off
// the path. The defaults are placeholders to be replaced with measured
// figures (docs/benchmarks/dra.md).
//
// Thread-safety: one object per thread.
#ifndef MIGD_BENCH_PLACEMENT_DRA_POLICY_H_
#define MIGD_BENCH_PLACEMENT_DRA_POLICY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bench/placement/sim.h"

namespace migd::bench {

enum class DraOrder { kNvidia, kMigd };

struct DraLatency {
  double create_ms = 100;   // one GI + CI create
  double destroy_ms = 120;  // one GI + CI destroy
  double reuse_ms = 1;      // handing out an Idle instance (CDI spec check)
};
// "create=100,destroy=120,reuse=1" (any subset); kInvalidArgument otherwise.
StatusOr<DraLatency> ParseDraLatency(std::string_view text);

struct DraPolicyOptions {
  DraOrder order = DraOrder::kMigd;
  // The allocator modelled: 36 sorts slices by name, 35 lists them in
  // publishing order reversed (an unspecified order that is not migd's).
  int kubernetes_minor = 36;
  DraLatency latency;
  double half_life = 10.0;  // migd's demand mix, in mean lifetimes (0: none)
};

class DraPolicy final : public Policy {
 public:
  explicit DraPolicy(DraPolicyOptions options);
  ~DraPolicy() override;

  std::string name() const override;
  Status Reset(const RunContext& ctx) override;
  std::optional<Decision> Decide(const ClusterState& state, const Request& req) override;
  bool KeepsIdle() const override { return options_.order == DraOrder::kMigd; }
  int64_t Errors() const override { return errors_; }

  // Time-to-ready (ms) of every claim admitted so far, by request id.
  const std::map<int64_t, double>& ready_ms() const { return ready_ms_; }

 private:
  struct Impl;
  const DraPolicyOptions options_;
  std::unique_ptr<Impl> impl_;
  std::map<int64_t, double> ready_ms_;
  int64_t errors_ = 0;
};

// NVIDIA's device name for profile `gi` at `start` on GPU minor `minor`.
std::string NvidiaDeviceName(int minor, std::string_view gi_name, uint32_t gi_id, uint32_t start);

}  // namespace migd::bench

#endif  // MIGD_BENCH_PLACEMENT_DRA_POLICY_H_
