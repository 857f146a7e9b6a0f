// The activity buffer the recorders write into, and FlushAll.
//
// Real behaviour mimicked (mspti.md 5.1, 5.2, 2.3):
//  * records are copied packed, back to back, at offset = sum of the previous records' sizes;
//  * the request callback runs synchronously on the RECORDING thread while the buffer lock is
//    held, when there is no current buffer or the current one is >= threshold (80 %) full; the
//    old one is then queued for a completion worker;
//  * a declined request (NULL or size 0) makes records drop; the next record queues the empty
//    buffer, so the complete callback later receives (NULL, 0, 0), and requests again;
//  * a record that does not fit the remaining space is dropped;
//  * FlushAll delivers the queued full buffers and then the current buffer on the caller's
//    thread, the latter while HOLDING the buffer lock, then joins the completion workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

#include "CompletionDispatcher.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

class ActivityBuffers {
 public:
  ActivityBuffers(const SimOptions& options, SimCounters& counters)
      : options_(options), counters_(counters), dispatcher_(callbacks_, options, counters) {}
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // NULL for either: INVALID_PARAMETER. Later calls overwrite; the first starts the
  // ActivityManager thread (mspti.md 2.3).
  msptiResult registerCallbacks(msptiBuffersCallbackRequestFunc request, msptiBuffersCallbackCompleteFunc complete);
  // Copies one packed record of `size` bytes. False when it was dropped (and counted).
  bool record(const void* bytes, size_t size);
  // Queues the current buffer as full if it holds anything (fault injection: reorder_external).
  void retireCurrent();
  msptiResult flushAll();
  msptiResult flushPeriod(uint32_t periodMs);
  // Calls the registered complete callback with a buffer the simulator owns (another tool's
  // buffer, msptiSimCompleteForeignBuffer), on a new thread (joined) or on the caller's. False
  // when no callbacks were ever registered.
  bool completeForeign(const ActivityBuffer& buffer, bool onNewThread);

 private:
  bool needsNewBufferLocked() const;

  const SimOptions& options_;
  SimCounters& counters_;
  BufferCallbacks callbacks_;
  CompletionDispatcher dispatcher_;

  std::mutex mutex_;  // "the buffer lock": current_, and every request callback
  std::optional<ActivityBuffer> current_;
};

}  // namespace torch_mspti::sim
