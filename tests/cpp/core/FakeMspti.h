// A fake MSPTI for tests that build sessions without the simulator library: a function table
// (MsptiFunctions) whose entry points act on this object, plus knobs that make it misbehave.
//
// What it models (mspti.md 2, 5): one subscriber; one process-wide pair of buffer callbacks;
// per-kind enable switches; process-global external-correlation stacks (CUSTOM0..CUSTOM2); a
// correlation-id counter from 1. launchKernel() plays a kernel launch on the calling thread: it
// mints an id, writes one EXTERNAL_CORRELATION record per non-empty stack (its top) and a
// RUNTIME_API "LaunchKernelV2" record into MSPTI's current buffer, and puts the KERNEL record in
// flight. FlushAll moves the records in flight into the current buffer and delivers it on the
// calling thread through the registered callbacks (request a buffer, copy, complete), as MSPTI
// does; deliverNow() delivers the current buffer alone (a buffer filled during the session).
// Unsubscribe discards what is in flight unless keepInFlightAfterUnsubscribe is set (then a
// later FlushAll delivers it, also into a later session).
// Misbehaviour: result codes per entry point and per kind, entry points that throw, a FlushAll
// that never delivers, records delivered after Unsubscribe, a foreign buffer completed into the
// registered callback, optional symbols absent (older generations).
// One FakeMspti exists at a time (its table reaches it through a static pointer).
// Thread-safety: every entry point and launchKernel() may be called from any thread (one mutex);
// callbacks are called without holding it.
#pragma once

#include <mspti/mspti.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "MsptiLibrary.h"
#include "RecordBuilder.h"

namespace torch_mspti::test {

class FakeMspti {
 public:
  // Entry points, as bits of `throwIn`.
  enum Entry : uint32_t {
    kSubscribe = 1u << 0,
    kUnsubscribe = 1u << 1,
    kRegisterCallbacks = 1u << 2,
    kEnable = 1u << 3,
    kDisable = 1u << 4,
    kFlushAll = 1u << 5,
    kPush = 1u << 6,
    kPop = 1u << 7,
  };

  FakeMspti();
  ~FakeMspti();
  FakeMspti(const FakeMspti&) = delete;
  FakeMspti& operator=(const FakeMspti&) = delete;

  // The table a session loads: every required entry point, push/pop unless
  // `withExternalCorrelation` is false, isEnabled unless `withIsEnabled` is false.
  MsptiFunctions functions() const;

  // ---- knobs (set before the calls they affect) ----
  bool withExternalCorrelation = true;
  bool withIsEnabled = true;
  msptiResult subscribeResult = MSPTI_SUCCESS;
  msptiResult unsubscribeResult = MSPTI_SUCCESS;
  msptiResult registerResult = MSPTI_SUCCESS;
  msptiResult flushResult = MSPTI_SUCCESS;
  std::map<int, msptiResult> enableResults;   // per kind; absent = MSPTI_SUCCESS
  uint32_t throwIn = 0;                       // Entry bits: those entry points throw std::runtime_error
  bool flushDelivers = true;                  // false: FlushAll succeeds and delivers nothing
  bool keepInFlightAfterUnsubscribe = false;  // records in flight survive Unsubscribe (delivered later)
  bool inFlightOnlyAfterUnsubscribe = false;  // FlushAll brings records in flight only once unsubscribed

  // ---- the workload ----
  // A kernel launch on the calling thread (see the header comment); records only while
  // subscribed with KERNEL enabled. `start`/`end`: the kernel's device times (0: now + 1 us,
  // + 1 us). Returns the minted id, 0 when none.
  uint64_t launchKernel(const char* name, uint32_t device = 0, uint32_t stream = 1, uint64_t start = 0,
                        uint64_t end = 0);
  // Puts records into the current buffer / in flight as they are.
  void writeNow(const RecordBuilder& records);
  void putInFlight(const RecordBuilder& records);
  // Puts records in flight that only the `flushes`-th FlushAll from now delivers (1 = the next):
  // records that reach MSPTI later than others, such as a multi-kernel launch's siblings.
  void putInFlightLater(const RecordBuilder& records, int flushes);
  // Delivers the current buffer through the registered callbacks (as when it fills up).
  void deliverNow();
  // Completes a buffer this fake allocated itself (another tool's) holding `records` into the
  // registered complete callback. Returns false when the callback wrote into it, or when its
  // bytes changed; a callback that freed it is caught by ASan or glibc (double free).
  bool completeForeignBuffer(const RecordBuilder& records);

  // Lets go of the subscriber without a call (after a test made Unsubscribe throw).
  void releaseSubscriber();

  // ---- what happened ----
  std::vector<std::string> calls() const;  // "subscribe", "enable(KERNEL)", "flushAll", ... in order
  size_t count(const std::string& call) const;
  bool subscribed() const;
  bool enabled(int kind) const;
  size_t stackDepth(uint32_t externalKind) const;
  uint64_t lastId() const;
  uint64_t buffersDelivered() const;
  uint64_t recordsDeclined() const;  // bytes of records lost to a declined request

  // ---- the table's entry points ----
  static msptiResult subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc cb, void* user);
  static msptiResult unsubscribe(msptiSubscriberHandle handle);
  static msptiResult registerCallbacks(msptiBuffersCallbackRequestFunc req, msptiBuffersCallbackCompleteFunc done);
  static msptiResult enable(msptiActivityKind kind);
  static msptiResult disable(msptiActivityKind kind);
  static msptiResult flushAll(uint32_t flag);
  static msptiResult push(msptiExternalCorrelationKind kind, uint64_t id);
  static msptiResult pop(msptiExternalCorrelationKind kind, uint64_t* lastId);
  static bool isEnabled(msptiActivityKind kind);

 private:
  static FakeMspti& self();
  void note(const std::string& call, Entry entry);  // logs; throws when `entry` is in throwIn
  void deliver(RecordBuilder records);

  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
  bool subscribed_ = false;
  bool enabled_[32] = {};
  msptiBuffersCallbackRequestFunc request_ = nullptr;
  msptiBuffersCallbackCompleteFunc complete_ = nullptr;
  std::vector<uint64_t> stacks_[5];
  uint64_t nextId_ = 1;
  RecordBuilder current_;                            // host records written, waiting in the current buffer
  RecordBuilder inFlight_;                           // device records not yet in a buffer
  std::deque<std::pair<int, RecordBuilder>> later_;  // (flushes to go, records): putInFlightLater
  std::deque<std::string> names_;
  uint64_t delivered_ = 0, declinedBytes_ = 0;
};

}  // namespace torch_mspti::test
