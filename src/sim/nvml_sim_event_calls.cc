// libnvidia-ml-sim.so: the event calls (nvml.h "Event Handling Methods";
// docs/simulator.md "Events"). The log is SimState::events; a set is a
// per-process EventSetObj (sim/nvml_sim_session.h).
#include <vector>

#include "sim/events.h"
#include "sim/nvml_sim_calls.h"

namespace migd::sim::lib {
namespace {

namespace abi = ::migd::nvml_abi;

uint64_t SupportedTypes(const SimConfig& config) {
  // Every model of the catalogue is MIG-capable.
  return DefaultSupportedEventTypes(/*mig_capable=*/true, kLegacy) &
         ~config.unsupported_event_types;
}

// A lost GPU shows as GPU_IS_LOST from the wait unless it is reported as an
// nvmlEventTypeGpuUnavailableError event registered on the set.
bool ReportsLostAsEvent(const SimConfig& config, const std::map<uint64_t, uint64_t>& types) {
  return !kLegacy && config.gpu_lost == GpuLostReport::kEvent &&
         types.contains(abi::kEventTypeGpuUnavailableError);
}

bool LostWaitError(const SimState& state, const SimConfig& config, const EventSetObj& set) {
  for (const auto& [gpu, types] : set.registered) {
    if (gpu < state.gpus.size() && state.gpus[gpu].lost && !ReportsLostAsEvent(config, types)) {
      return true;
    }
  }
  return false;
}

bool Deliverable(const SimConfig& config, const EventSetObj& set, const SimEvent& e) {
  if (set.delivered.contains(e.seq)) return false;
  auto g = set.registered.find(e.gpu);
  if (g == set.registered.end()) return false;
  auto t = g->second.find(e.type);
  if (t == g->second.end() || e.seq <= t->second) return false;
  if (e.type == abi::kEventTypeGpuUnavailableError) return ReportsLostAsEvent(config, g->second);
  return true;
}

// The events the next wait delivers: one, or (MIGD_SIM_EVENT_COALESCE=last)
// every pending one of the first one's GPU and type, the last reported.
std::vector<const SimEvent*> NextEvents(const SimState& state, const SimConfig& config,
                                        const EventSetObj& set) {
  std::vector<const SimEvent*> out;
  for (const SimEvent& e : state.events) {
    if (!Deliverable(config, set, e)) continue;
    if (out.empty()) {
      out.push_back(&e);
      if (config.event_coalesce == EventCoalesce::kEach) break;
    } else if (e.gpu == out[0]->gpu && e.type == out[0]->type) {
      out.push_back(&e);
    }
  }
  return out;
}

}  // namespace

bool EventReady(const SimState& state, const SimConfig& config, const EventSetObj& set) {
  return LostWaitError(state, config, set) || !NextEvents(state, config, set).empty();
}

nvmlReturn_t EventSetCreate(Ctx& c, nvmlEventSet_t* set) {
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = reinterpret_cast<nvmlEventSet_t>(c.NewEventSet());
  return NVML_SUCCESS;
}

nvmlReturn_t EventSetFree(Ctx& c, nvmlEventSet_t set) {
  EventSetObj* obj = c.EventSet(set);
  if (obj == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  obj->freed = true;
  return NVML_SUCCESS;
}

nvmlReturn_t SupportedEventTypes(const Ctx& c, nvmlDevice_t device, unsigned long long* types) {
  std::optional<Resolved> r = c.Gpu(device);
  if (!r || types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  *types = SupportedTypes(c.config());
  return NVML_SUCCESS;
}

nvmlReturn_t RegisterEvents(Ctx& c, nvmlDevice_t device, unsigned long long types,
                            nvmlEventSet_t set) {
  std::optional<Resolved> r = c.Gpu(device);
  EventSetObj* obj = c.EventSet(set);
  if (!r || obj == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & ~KnownEventTypes(kLegacy)) != 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (r->gpu->lost) return NVML_ERROR_GPU_IS_LOST;
  // "If function reports NVML_ERROR_NOT_SUPPORTED, event set can still be
  // used. None of the requested eventTypes are registered in that case."
  if ((types & ~SupportedTypes(c.config())) != 0) return NVML_ERROR_NOT_SUPPORTED;
  std::map<uint64_t, uint64_t>& registered = obj->registered[r->gpu->index.value()];
  for (uint64_t bit = 1; bit != 0 && bit <= types; bit <<= 1) {
    // "All events that occurred before this call are not recorded."
    if ((types & bit) != 0) registered.emplace(bit, c.m.state().event_seq);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t EventSetWait(Ctx& c, nvmlEventSet_t set, nvmlEventData_t* data) {
  EventSetObj* obj = c.EventSet(set);
  if (obj == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const SimState& state = c.m.state();
  if (LostWaitError(state, c.config(), *obj)) return NVML_ERROR_GPU_IS_LOST;
  const std::vector<const SimEvent*> next = NextEvents(state, c.config(), *obj);
  if (next.empty()) return NVML_ERROR_TIMEOUT;
  for (const SimEvent* e : next) obj->delivered.insert(e->seq);
  const SimEvent& e = *next.back();
  *data = nvmlEventData_t{};
  data->device = c.GpuHandle(state.gpus[e.gpu]);
  data->eventType = e.type;
  data->eventData = e.data;
  data->gpuInstanceId = e.gi;
  data->computeInstanceId = e.ci;
  // Seqs older than the log's oldest entry can never come back.
  if (!state.events.empty()) {
    obj->delivered.erase(obj->delivered.begin(),
                         obj->delivered.lower_bound(state.events.front().seq));
  }
  return NVML_SUCCESS;
}

}  // namespace migd::sim::lib
