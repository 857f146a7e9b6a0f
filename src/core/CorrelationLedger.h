// What the session knows about each MSPTI correlation id (one launch), shared by the drain and
// the trace builder so that "correlation id -> launch" is kept once.
//
// MSPTI mints one correlation id per kernel launch task, per communication node launch and per
// hooked ACL memory call (mspti.md 4). The id appears in:
//  * EXTERNAL_CORRELATION records, written when the id is minted, one per external kind whose
//    process-global stack is not empty, with that stack's top (mspti.md 5.4): the hint of which
//    op (CUSTOM0) and user range (CUSTOM1) the launch belongs to;
//  * API records: every API record carries its thread's *current* id, i.e. that of the thread's
//    most recent launch (mspti.md 4). The launch call itself is one of them; calls that launch
//    nothing (synchronize, event record, ...) share the id of the launch before them, and may
//    carry an id of an earlier session;
//  * device records (KERNEL, COMMUNICATION, MEMCPY, MEMSET), delivered about 200 ms after the
//    work ran (mspti.md 5.3), often in a later buffer.
// A launch is "pending" while its launch call says it started device work of a class being
// collected and no device record with its id arrived. The launch call is recognised by its API
// name (classifyApiName); an id named by an EXTERNAL_CORRELATION record whose launch call is
// unknown (API records not collected, or a name not recognised) is pending as "unclassified".
// Thread-safety: none (RecordStore serialises access).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "NpuRecords.h"

namespace torch_mspti {

// Classifies an API record name: case-insensitive substrings "memcpy" -> kMemcpy, "memset" ->
// kMemset, "hccl"/"hcom"/"lccl" -> kCommunication; the exact kernel-launch calls of the runtime
// and ACL (LaunchKernelV2, rtKernelLaunch, aclrtLaunchKernel, ... : the table in the .cpp) ->
// kKernel; the ACL allocation calls that MSPTI records as MEMORY (aclrtMalloc, aclrtFree, ...:
// the table in the .cpp) -> kMemory; anything else -> kNone (a call that launches nothing,
// aclrtLaunchCallback and aclrtMallocHost included).
// The names are those of the CANN runtime and ACL APIs MSPTI reports (mspti.md 4); a library
// naming launches otherwise leaves them unclassified, which costs the drain its early exit and
// the link its launch time (the earliest API record of the id is used then), never a wrong link.
LaunchClass classifyApiName(std::string_view name);

// 32 bytes: one per correlation id a session sees, up to max_session_records of them.
struct LaunchEntry {
  uint64_t opHint = 0;    // first CUSTOM0 external id (torch's op id), 0 = none
  uint64_t userHint = 0;  // first CUSTOM1 external id (torch's user-range id), 0 = none
  // Indices into RecordStore::apis (int32: a session keeps at most 2^31 records, the setting
  // max_session_records), -1 = none: the earliest API record classified as a launch, and the
  // earliest API record with this id.
  int32_t launchApi = -1;
  int32_t firstApi = -1;
  uint32_t deviceRecords = 0;
  LaunchClass launchClass = LaunchClass::kNone;
  bool external = false;  // an EXTERNAL_CORRELATION record named the id
  bool present = false;   // the ledger holds an entry for this id (dense storage keeps gaps)
};
static_assert(sizeof(LaunchEntry) == 32, "LaunchEntry is sized for 1M launches per session");

class CorrelationLedger {
 public:
  // Ids at or below `staleBelow` belong to earlier sessions: never pending.
  explicit CorrelationLedger(uint64_t staleBelow) : staleBelow_(staleBelow) {}

  void noteExternal(const ExternalCorrelationRecord& e);
  // Notes apis[index]; `apis` are the store's API records, which the entries index (the earliest
  // call of an id is chosen by comparing starts there).
  void noteApi(const ApiRecords& apis, size_t index);
  void noteDevice(const DeviceRecord& d);
  // A MEMORY record answers its allocation call as a device row answers its launch.
  void noteMemory(const MemoryRecord& m);
  // A device record that is not kept (over the store's cap): ends its launch's wait when the id
  // has an entry, never adds one.
  void noteDeviceIfKnown(const DeviceRecord& d);
  // The same for any record that answers its call (a MEMORY record over the cap).
  void noteAnswerIfKnown(uint64_t correlationId);

  // Launches still waiting for a device record of a class in `waitFor` (bit 1 << LaunchClass;
  // bit 1 << kNone = unclassified launches).
  uint64_t pending(uint32_t waitFor) const;
  // The drain's first flush has every launch made before stop() (MSPTI writes a launch's host
  // records as it is made): launches with a higher id than any noted so far are made after stop()
  // and hold no wait; they are counted apart while they wait (launchesAfterCloseWaiting) and their
  // rows, if any come, are dropped as outside the window.
  void closeAdmissions();
  uint64_t launchesAfterCloseWaiting(uint32_t waitFor) const;
  static constexpr uint32_t kAnyClass = (1u << static_cast<int>(LaunchClass::kCount)) - 1;

  // For the store's cap, which keeps room for the answer of every launch it kept:
  // whether a record with `id` that answers its call (device or MEMORY) would end a pending wait;
  bool awaitsAnswer(uint64_t id) const;
  // the LaunchClass (as int) of the wait the id holds, -1 when it holds none;
  int pendingClassOf(uint64_t id) const;
  // whether noting a launch call (or an external record, which names a launch) with `id` would
  // start a wait: the id is the session's and has no entry, or one that neither waits nor has
  // been answered. Junk ids are not told apart (at worst a record is refused that would fit).
  bool wouldOpenWait(uint64_t id) const;
  // The class of an API record's name (classifyApiName, once per interned name).
  LaunchClass classOf(const ApiRecord& api);
  bool knowsLaunches() const { return knows_; }
  // The highest id this session saw launched (an EXTERNAL_CORRELATION record or a launch call,
  // i.e. minted while it collected), junk ids excepted; 0 when none. Device records and calls
  // that launch nothing never raise it. It becomes the next sessions' `staleBelow`.
  uint64_t maxCorrelationId() const { return maxId_; }
  // Launched ids more than kMaxIdGap above every sane id so far (and `staleBelow`): a foreign or
  // misread record (MSPTI's ids are one process-wide counter from 1). Ignored: no entry, no
  // effect on maxCorrelationId() or firstOwnId(); their device records are windowed like rows
  // whose launch is unknown. The bound assumes fewer than 2^32 ids are minted between two
  // sessions (or before the first) without the plugin collecting: over an hour at 10^6 launches
  // per second. Counted per record (an id named by an external record and a launch call: 2).
  uint64_t junkIds() const { return junkIds_; }
  static constexpr uint64_t kMaxIdGap = uint64_t{1} << 32;

  // The id later sessions take as `staleBelow`, and the launched ids left out of it as junk.
  // MSPTI mints ids from one counter, one per launch, only while a kind is collected (mspti.md 4),
  // so a session's own launched ids form one dense run; a foreign or misread id (2^32 - 1 from a
  // 32-bit -1, 2^31, ...) lies apart from it. The ids are split where two neighbours are more
  // than kClusterGap apart, and the run holding the most ids (the lowest on a tie) is the
  // session's own: its highest id is the watermark, every id outside it is an outlier. O(n log n)
  // over the launched ids, once per session (at stop).
  struct Watermark {
    uint64_t id = 0;        // 0 when the session saw no launch
    uint64_t outliers = 0;  // launched ids outside the session's run
  };
  Watermark watermark() const;
  static constexpr uint64_t kClusterGap = uint64_t{1} << 20;
  uint64_t staleBelow() const { return staleBelow_; }
  // Lowest id minted in this session that the session saw at its launch (external record or
  // launch call), UINT64_MAX when none: device records below it with no entry are stale.
  uint64_t firstOwnId() const { return firstOwnId_; }

  // API records seen per LaunchClass (kNone: calls that launch nothing).
  uint64_t apiCalls(LaunchClass c) const { return apiCalls_[static_cast<int>(c)]; }

  // nullptr when the id has no entry (or the entries were released).
  const LaunchEntry* find(uint64_t id) const;
  size_t size() const { return size_; }
  // Frees the entries once the session's launch table has taken what it needs (the counters,
  // pending counts and apiCalls stay); find() answers nullptr from then on.
  void releaseEntries();

 private:
  void recount(uint64_t id, const LaunchEntry& before, const LaunchEntry& after);
  bool junk(uint64_t id);  // counts it
  // An id this session minted: nonzero and above every earlier session's.
  bool ours(uint64_t id) const { return id != 0 && id > staleBelow_; }
  static int bucket(const LaunchEntry& e);  // pending bucket, -1 when not pending

  // The entry of `id`; created (present) when `create`, else nullptr when absent.
  LaunchEntry* slot(uint64_t id, bool create);
  const LaunchEntry* lookup(uint64_t id) const;

  const uint64_t staleBelow_;
  // MSPTI mints ids from one process-wide counter, one per launch (mspti.md 4), so a session's
  // ids are dense: entries live in a deque indexed by id - base_ (base_ = the first id noted; a
  // deque grows without copying or doubling its storage, ~33 B per id). Ids below base_ or far
  // beyond the dense run (more than kDenseSlack past its end, plus a quarter of its length) go to
  // the sparse map, as do junk-free outliers; an id is in one of the two, never both.
  static constexpr uint64_t kDenseSlack = uint64_t{1} << 16;
  uint64_t base_ = 0;  // 0 = nothing noted yet
  std::deque<LaunchEntry> dense_;
  std::unordered_map<uint64_t, LaunchEntry> sparse_;
  size_t size_ = 0;
  std::unordered_map<const std::string*, LaunchClass> classOfName_;  // interned API names, classified
  // Pending launches per LaunchClass (index kNone = known only from external records).
  void noteAnswer(uint64_t correlationId);
  uint64_t pending_[static_cast<int>(LaunchClass::kCount)] = {};
  uint64_t afterClose_[static_cast<int>(LaunchClass::kCount)] = {};  // waits of launches after closeAdmissions
  uint64_t admitThrough_ = UINT64_MAX;                               // ids above it opened after stop()
  uint64_t apiCalls_[static_cast<int>(LaunchClass::kCount)] = {};
  bool knows_ = false;
  uint64_t maxId_ = 0;
  uint64_t firstOwnId_ = UINT64_MAX;
  uint64_t junkIds_ = 0;
};

}  // namespace torch_mspti
