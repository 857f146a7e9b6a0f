// The room of a session's record cap (max_session_records): how many records the store may still
// keep, and which launches it refused, across every batch of the session.
//
// The store keeps room for the answer of every launch it kept (its device row, or its MEMORY
// record), so that over the cap a session holds whole launches. Room is held only for answers the
// session waits for: the launch classes of the kinds it collects (waitFor, the drain's set). A
// copy call while MEMCPY is off, an allocation while MEMORY is off or a collective while
// COMMUNICATION is off opens no wait and holds no room (it would hold it for the whole session:
// no record ever ends that wait).
// Two more rules keep every kept row with its launch call:
//  * a launch call refused for want of room is remembered (refuseLaunch): its answers and hints
//    are refused too, in whatever later batch they come;
//  * a row that comes before its launch call (a later buffer holding the call) takes room for
//    that call as well when launch calls are collected (expectCalls), and the call, when it
//    comes, takes the room kept for it (takeHeldCall).
// So the store never keeps more than `max` records (kept() + held() <= max at every step).
// Thread-safety: none (RecordStore serialises access).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_set>

#include "NpuRecords.h"

namespace torch_mspti {

class CapRoom {
 public:
  explicit CapRoom(uint64_t max) : max_(max) {}

  // The launch classes whose answers the session waits for (bit 1 << LaunchClass; bit kNone =
  // launches known only from an external record). Set as the kinds are enabled; until then none.
  void waitFor(uint32_t classes) { waitFor_ |= classes; }
  uint32_t waitMask() const { return waitFor_; }
  bool waitsFor(LaunchClass c) const { return (waitFor_ >> static_cast<int>(c)) & 1u; }
  // A pending bucket (CorrelationLedger::pendingClassOf; -1 = none) the session waits for.
  bool waitsFor(int pendingClass) const { return pendingClass >= 0 && ((waitFor_ >> pendingClass) & 1u); }
  // Launch calls are collected (RUNTIME_API or API on): a row that precedes its call holds room for it.
  void expectCalls() { expectCalls_ = true; }
  bool callsExpected() const { return expectCalls_; }

  // `need` more records fit beside those kept, the answers still awaited (`awaited`: the ledger's
  // pending launches of the waited classes) and the calls held for rows that came first.
  bool fits(uint64_t need, uint64_t awaited) const { return kept_ + awaited + held_.size() + need <= max_; }
  void keep(uint64_t n = 1) { kept_ += n; }
  uint64_t kept() const { return kept_; }
  uint64_t max() const { return max_; }

  // A launch call refused for want of room; its later answers and hints are refused with it.
  void refuseLaunch(uint64_t id);
  bool refused(uint64_t id) const;
  // No launch refused yet: a batch that fits whole needs no look at each record.
  bool noneRefused() const { return refused_.empty(); }

  // A row kept before its call: one record of room is held for the call.
  void holdCall(uint64_t id) { held_.insert(id); }
  // The call of a row kept before it: true (and the room held is taken) when room was held.
  bool takeHeldCall(uint64_t id) { return held_.erase(id) > 0; }
  uint64_t held() const { return held_.size(); }

 private:
  const uint64_t max_;
  uint64_t kept_ = 0;
  uint32_t waitFor_ = 0;
  bool expectCalls_ = false;
  // Refused launch ids as closed intervals first -> last: ids are one dense counter (mspti.md 4),
  // and past the cap most launches are refused one after another, so a long session over its cap
  // holds a few intervals, not one entry per launch.
  std::map<uint64_t, uint64_t> refused_;
  std::unordered_set<uint64_t> held_;
};

}  // namespace torch_mspti
