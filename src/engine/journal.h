// File: engine/journal.h
//
// RecordJournal: how the engine writes an instance's ownership record
// (store::RecordStore): the record of a TrackedInstance in a given state and
// journal phase, stamped with this boot's id. The owner and request id are
// written only for Active instances (an Idle record has no owner).
//
// Thread-safety: thread-safe (RecordStore serialises per key).
#ifndef MIGD_ENGINE_JOURNAL_H_
#define MIGD_ENGINE_JOURNAL_H_

#include <string>

#include "base/status.h"
#include "engine/instance_state.h"
#include "engine/tracked_instance.h"
#include "store/record.h"
#include "store/record_store.h"

namespace migd::engine {

// The record of `instance` in `state` and `phase`. REQUIRES: state != kNone.
store::Record RecordOf(const TrackedInstance& instance, InstanceState state,
                       store::RecordPhase phase, const std::string& boot_id);

class RecordJournal {
 public:
  // `store` is not owned and must outlive the journal.
  RecordJournal(store::RecordStore& store, std::string boot_id)
      : store_(store), boot_id_(std::move(boot_id)) {}

  // Puts RecordOf(instance, state, phase). Errors: the store's, with the key.
  Status Write(const TrackedInstance& instance, InstanceState state, store::RecordPhase phase);
  // Removes the record of `key` (queued for retry by the store on failure).
  Status Remove(const store::RecordKey& key) { return store_.Remove(key); }

  store::RecordStore& store() { return store_; }
  const std::string& boot_id() const { return boot_id_; }

 private:
  store::RecordStore& store_;
  const std::string boot_id_;
};

}  // namespace migd::engine

#endif  // MIGD_ENGINE_JOURNAL_H_
