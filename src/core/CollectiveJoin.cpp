#include "CollectiveJoin.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <tuple>
#include <vector>

#include <mspti/mspti_activity.h>

namespace torch_mspti {
namespace {

// kineto's NCCL field names (kineto.md 8).
const std::string kInNelems = "In msg nelems";
const std::string kOutNelems = "Out msg nelems";
const std::string kGroupSize = "Group size";
const std::string kGroupName = "Process Group Name";
const std::string kGroupDesc = "Process Group Description";
const std::string kGroupRanks = "Process Group Ranks";
const std::string kRank = "Rank";
const std::string kSrcRank = "Src Rank";
const std::string kDstRank = "Dst Rank";
const std::string kSeq = "Seq";

// How far back, by start, a lookup walks for a range that holds the launch: ranges of one lane
// follow each other (one per HCCL call), so the holder is the latest or close to it.
constexpr size_t kMaxRangesWalked = 16;

// --- the message: a flat JSON object, read by hand (no JSON library is among the core's
// dependencies; the core builds without torch for the fuzzer)

class MessageReader {
 public:
  explicit MessageReader(const std::string& text) : s_(text) {}

  std::optional<std::map<std::string, std::string>> object() {
    std::map<std::string, std::string> out;
    space();
    if (!take('{')) return std::nullopt;
    space();
    if (take('}')) return end() ? std::optional(out) : std::nullopt;
    for (;;) {
      space();
      auto key = string();
      space();
      if (!key || !take(':')) return std::nullopt;
      space();
      auto value = peek() == '"' ? string() : scalar();
      if (!value) return std::nullopt;
      out.insert_or_assign(std::move(*key), std::move(*value));
      space();
      if (take(',')) continue;
      if (take('}')) return end() ? std::optional(out) : std::nullopt;
      return std::nullopt;
    }
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool take(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool end() {
    space();
    return i_ == s_.size();
  }
  std::optional<std::string> string() {
    if (!take('"')) return std::nullopt;
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      const char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': out += "\\u"; break;  // kept as written: no field the join reads needs it
        default: out += e; break;       // \" \\ \/
      }
    }
    return std::nullopt;
  }
  // A number, true, false or null, as written.
  std::optional<std::string> scalar() {
    const size_t from = i_;
    while (i_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' || s_[i_] == '.'))
      ++i_;
    if (i_ == from) return std::nullopt;
    return s_.substr(from, i_ - from);
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::optional<int64_t> integer(const std::map<std::string, std::string>& fields, const char* key) {
  const auto it = fields.find(key);
  if (it == fields.end() || it->second.empty() || it->second.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// --- the ranges: "communication" ranges by lane, in order of start

using LaneKey = std::tuple<bool, int32_t, int32_t>;  // on device, pid or device, tid or stream

class RangeIndex {
 public:
  explicit RangeIndex(const MarkerTable& markers) {
    for (const Marker& m : markers.markers)  // already in order of start
      if (m.kind == MarkerKind::kRange && m.domain && *m.domain == kCommunicationMarkerDomain && m.message)
        lanes_[{m.onDevice, m.lane, m.row}].push_back(&m);
  }

  // The innermost range of the lane that holds `t`, or null.
  const Marker* holding(const LaneKey& lane, int64_t t) const {
    const auto it = lanes_.find(lane);
    if (it == lanes_.end()) return nullptr;
    const std::vector<const Marker*>& v = it->second;
    auto after = std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const Marker* m) { return x < m->start; });
    for (size_t walked = 0; after != v.begin() && walked < kMaxRangesWalked; ++walked) {
      const Marker* m = *--after;
      if (m->start <= t && t <= m->end) return m;
    }
    return nullptr;
  }

 private:
  std::map<LaneKey, std::vector<const Marker*>> lanes_;
};

const Marker* rangeOf(const RangeIndex& ranges, const Launch& l, const DeviceRow& row) {
  const Marker* m = ranges.holding({true, row.device, static_cast<int32_t>(row.record.streamId)}, row.record.start);
  if (!m && l.call && l.callTrusted)
    m = ranges.holding({false, static_cast<int32_t>(l.call->processId), static_cast<int32_t>(l.call->threadId)},
                       l.callStart);
  return m;
}

// count * ranks, or -1 (unknown, as kineto writes it) for a negative count or one whose product
// does not fit in int64 (a corrupt message).
int64_t timesRanks(int64_t count, int64_t n) {
  if (count < 0 || n <= 0 || count > std::numeric_limits<int64_t>::max() / n) return -1;
  return count * n;
}

// In and Out msg nelems from HCCL's count, in torch's NCCL convention (In = the input tensor's
// elements, Out = the output's, on every rank): HCCL's count is the send count of an all-gather
// and of an all-to-all (per peer), and the per-rank count of a reduce-scatter, a scatter and a
// gather (torch_npu.md 6), so the whole buffer is count * ranks: Out of an all-gather and of a
// gather, In of a reduce-scatter and of a scatter.
void nelems(const std::string& collective, int64_t count, int64_t n, JoinedCollective& j) {
  j.inNelems = j.outNelems = count < 0 ? -1 : count;
  if (collective == "allgather" || collective == "gather") j.outNelems = timesRanks(count, n);
  else if (collective == "reduce_scatter" || collective == "scatter") j.inNelems = timesRanks(count, n);
  else if (collective == "all_to_all") j.inNelems = j.outNelems = timesRanks(count, n);
  else if (collective == "all_to_allv") j.outNelems = -1;
}

std::string ranksText(const std::vector<int64_t>& ranks) {  // as Python prints a list: "[0, 1]"
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

}  // namespace

std::optional<std::map<std::string, std::string>> parseCollectiveMessage(const std::string& message) {
  if (auto plain = MessageReader(message).object()) return plain;
  // torch_npu writes every quote of the object as \" (torch_npu.md 5): undo that, then read again.
  if (message.find("\\\"") == std::string::npos) return std::nullopt;
  std::string unescaped;
  unescaped.reserve(message.size());
  for (size_t i = 0; i < message.size(); ++i)
    if (!(message[i] == '\\' && i + 1 < message.size() && message[i + 1] == '"')) unescaped += message[i];
  return MessageReader(unescaped).object();
}

CollectiveTable CollectiveTable::build(const LaunchTable& launches, const MarkerTable& markers,
                                       const CommunicatorMap& atStart, bool sampledAtStart, CommunicatorMap atStop,
                                       SessionCounters& c) {
  CollectiveTable t;
  t.groups = std::move(atStop);
  // A group destroyed before stop is still named from the start sample; the calls it made since
  // are unknown, so its rows get no Seq (seq -1).
  for (const auto& [name, info] : atStart)
    if (t.groups.find(name) == t.groups.end()) {
      CommunicatorInfo gone = info;
      gone.seq = -1;
      t.groups.emplace(name, std::move(gone));
    }
  const RangeIndex ranges(markers);
  // commName -> its rows (index, device start), for Seq.
  std::map<std::string, std::vector<std::pair<int64_t, uint32_t>>> byGroup;

  for (const Launch& l : launches.launches) {
    for (uint32_t k = l.firstRow; k < l.firstRow + l.rowCount; ++k) {
      const DeviceRow& row = launches.rows[k];
      const DeviceRecord& r = row.record;
      if (r.kind != MSPTI_ACTIVITY_KIND_COMMUNICATION) continue;
      ++c.collectiveRows;
      const std::string commName = r.group ? *r.group : std::string();
      byGroup[commName].emplace_back(r.start, k);

      const Marker* m = rangeOf(ranges, l, row);
      if (!m) {
        ++c.collectivesNoMarker;
        continue;
      }
      const auto fields = parseCollectiveMessage(*m->message);
      const std::string collective = r.name ? collectiveName(*r.name) : std::string();
      const bool p2p = collective == "send" || collective == "recv";
      const auto group = fields ? fields->find("groupName") : std::map<std::string, std::string>::const_iterator{};
      const auto peer = fields ? integer(*fields, collective == "send" ? "destRank" : "srcRank") : std::nullopt;
      if (!fields || group == fields->end() || group->second != commName || (p2p && !peer)) {
        ++c.collectivesBadMessage;
        continue;
      }
      const auto g = t.groups.find(commName);
      if (g == t.groups.end() || g->second.rank < 0 || g->second.ranks.empty()) {
        ++c.collectivesNoGroup;
        continue;
      }
      if (p2p && *peer >= static_cast<int64_t>(g->second.ranks.size())) {  // no rank of the group
        ++c.collectivesBadMessage;
        continue;
      }
      JoinedCollective j;
      j.group = &g->second;
      nelems(collective, static_cast<int64_t>(r.count), static_cast<int64_t>(g->second.ranks.size()), j);
      if (p2p) {
        j.srcRank = collective == "send" ? g->second.rank : *peer;
        j.dstRank = collective == "send" ? *peer : g->second.rank;
      }
      t.joined.emplace(k, j);
    }
  }
  c.collectivesJoined = t.joined.size();
  c.collectivesUnjoined = c.collectiveRows - c.collectivesJoined;

  // Seq: the group's rows are its calls seq_at_start + 1 ... seq_at_stop, in order, when and only
  // when they are exactly that many.
  for (auto& [commName, rows] : byGroup) {
    const auto g = t.groups.find(commName);
    if (g == t.groups.end()) continue;  // no joined row: nothing to number
    int64_t first = -1;
    if (sampledAtStart) {
      const auto s = atStart.find(commName);
      first = s == atStart.end() ? 0 : s->second.seq;  // a group made during the session began at 0
    }
    const int64_t last = g->second.seq;
    const bool numbered = first >= 0 && last >= first && static_cast<uint64_t>(last - first) == rows.size();
    std::sort(rows.begin(), rows.end());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto it = t.joined.find(rows[i].second);
      if (it == t.joined.end()) continue;
      if (numbered) it->second.seq = first + 1 + static_cast<int64_t>(i);
      else ++c.collectivesNoSeq;
    }
  }
  return t;
}

void describeCollective(const CollectiveTable* table, uint32_t row, const DeviceRecord& r, RowFacts& out) {
  if (r.kind != MSPTI_ACTIVITY_KIND_COMMUNICATION) return;
  const JoinedCollective* j = table ? table->find(row) : nullptr;
  if (!j) {
    out.number(kInNelems, r.count);
    if (r.group) out.text(kGroupName, *r.group);
    return;
  }
  const CommunicatorInfo& g = *j->group;
  out.number(kInNelems, static_cast<uint64_t>(j->inNelems));
  if (j->outNelems >= 0) out.number(kOutNelems, static_cast<uint64_t>(j->outNelems));
  out.number(kGroupSize, g.ranks.size());
  out.text(kGroupName, g.pgName);
  out.text(kGroupDesc, g.pgDesc);
  out.text(kGroupRanks, ranksText(g.ranks));
  out.number(kRank, static_cast<uint64_t>(g.rank));
  if (j->srcRank >= 0) out.number(kSrcRank, static_cast<uint64_t>(j->srcRank));
  if (j->dstRank >= 0) out.number(kDstRank, static_cast<uint64_t>(j->dstRank));
  if (j->seq >= 0) out.number(kSeq, static_cast<uint64_t>(j->seq));
}

}  // namespace torch_mspti
