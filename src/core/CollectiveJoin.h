// Each collective row joined with what torch_npu says about it, decided at stop (the health
// report's collective counts are final before kineto reads it, kineto.md 1.3 step 4b).
//
// MSPTI's COMMUNICATION record names a collective, its algorithm, data type, element count and
// HCCL communicator (mspti.md 3.3). torch_npu's ProcessGroupHCCL adds, per HCCL call, an mstx range
// in the domain "communication" whose message is a flat JSON object of strings (opName, groupName,
// dataType, count, streamId, and srcRank/destRank for point-to-point; torch_npu.md 5). A row is
// joined when:
//  1. a "communication" range contains its launch: the device range on the row's own device and
//     stream that contains the row's start (innermost first), else the host range on the launch
//     call's thread that contains the call's start (MARKER records carry no correlation id, so
//     correlation cannot take part, mspti.md 3.4);
//  2. the range's message parses (its quotes may be backslash-escaped, as torch_npu writes them),
//     names the row's communicator (groupName == commName) and, for a send or a receive, its peer;
//  3. torch.distributed knows the communicator (Communicators.h): its process group's name,
//     description and ranks, and this process's rank in it (from the stop sample, or from the
//     start sample for a group destroyed meanwhile, whose rows then get no Seq); a point-to-point
//     peer must be a rank of that group.
// A joined row carries kineto's NCCL names (kineto.md 8): Process Group Name/Description/Ranks,
// Group size, Rank, In and Out msg nelems worked out from HCCL's count (torch_npu.md 6), Src and
// Dst Rank for point-to-point, and Seq. Seq numbers a group's collectives as its backend does
// (ProcessGroupHCCL's seq_, the same on every rank): the group's rows in the window, in order of
// their device start, are numbered seq_at_start + 1 ... seq_at_stop, and only when their count
// is exactly seq_at_stop - seq_at_start (a coalesced call, a lost record or a call issued before
// start but launched after it breaks the equality: the group's rows then get no Seq, counted).
// A row that is not joined keeps what MSPTI gave (its Process Group Name is the commName) and is
// counted by reason (collectives.no_marker, bad_message, no_group).
// Thread-safety: none; built at stop and read by processTrace, one at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "Communicators.h"
#include "KindHandlers.h"
#include "LaunchTable.h"
#include "MarkerTable.h"
#include "SessionCounters.h"

namespace torch_mspti {

struct JoinedCollective {
  const CommunicatorInfo* group = nullptr;  // in CollectiveTable::groups
  int64_t seq = -1;                         // -1: not numbered
  int64_t inNelems = 0;
  int64_t outNelems = -1;  // -1: not written (all-to-all-v: per-peer counts are not in the record)
  int64_t srcRank = -1;    // point-to-point only: ranks in the group
  int64_t dstRank = -1;
};

struct CollectiveTable {
  CommunicatorMap groups;                                 // the stop sample
  std::unordered_map<uint32_t, JoinedCollective> joined;  // by LaunchTable::rows index; point into `groups`

  CollectiveTable() = default;
  // Moved, never copied: a move keeps the map's nodes, which `joined` points into.
  CollectiveTable(CollectiveTable&&) = default;
  CollectiveTable& operator=(CollectiveTable&&) = default;
  CollectiveTable(const CollectiveTable&) = delete;
  CollectiveTable& operator=(const CollectiveTable&) = delete;

  // Joins the COMMUNICATION rows of `launches` (rules in the header comment); `atStart` and
  // `atStop` are the communicator samples (empty when no provider answered); `sampledAtStart`
  // says whether a provider was asked at start (a group missing from that sample then began
  // during the session, at seq 0). Counts into `counters` (collectives.*).
  static CollectiveTable build(const LaunchTable& launches, const MarkerTable& markers, const CommunicatorMap& atStart,
                               bool sampledAtStart, CommunicatorMap atStop, SessionCounters& counters);

  const JoinedCollective* find(uint32_t row) const {
    const auto it = joined.find(row);
    return it == joined.end() ? nullptr : &it->second;
  }
};

// Writes a COMMUNICATION row's group facts (nothing for rows of other kinds): a joined row's
// kineto NCCL fields, else "In msg nelems" and "Process Group Name" as MSPTI gives them
// (the count and the commName). `table` may be null (nothing joined).
void describeCollective(const CollectiveTable* table, uint32_t row, const DeviceRecord& record, RowFacts& out);

// torch_npu's mstx message, as key -> value text (strings unquoted, numbers as written): a flat JSON
// object, read as it is or, when that fails, with every \" read as a quote (torch_npu's form);
// nullopt when it is neither.
std::optional<std::map<std::string, std::string>> parseCollectiveMessage(const std::string& message);

}  // namespace torch_mspti
