// Fills a RecordStore the way MSPTI's completions do: the packed records of one buffer walked
// by MsptiRecordWalker and appended as one batch.
// Thread-safety: as RecordStore::append.
#pragma once

#include "MsptiRecordWalker.h"
#include "RecordBuilder.h"
#include "RecordStore.h"

namespace torch_mspti::test {

inline void appendRecords(RecordStore& store, const RecordBuilder& records) {
  MsptiRecordWalker walker;
  WalkResult batch;
  walker.walk(records.data(), records.size(), &store.names(), batch);
  store.append(batch);
}

}  // namespace torch_mspti::test
