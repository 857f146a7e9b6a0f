// The link states: how a device row relates to the op that launched it. One table,
// TORCH_MSPTI_LINK_STATES, from which come the enum, the names, whether a state links, the
// "links" counters of SessionCounters (one per state, keyed by its name) and the list that
// torch_mspti.link_states() returns (which the CLI's checker is tested against). LinkResolver
// decides a launch's state; ActivityBuilder writes the name into each device row's "link"
// argument and counts the row. Adding a state: one row here and its rule in LinkResolver.
// Thread-safety: constants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace torch_mspti {

// M(A, enumerator, name, linked, SessionCounters field, meaning). A is passed through to M, so
// that another X-macro list can embed this one (SessionCounters.h); other users ignore it.
// Meaning: why a row in that state is linked to its op ("linked to ...") or not ("unlinked: ..."),
// the description of its counter and the meaning torch_mspti.link_states() gives.
#define TORCH_MSPTI_LINK_STATES(M, A)                                                                        \
  M(A, kVerified, "verified", true, linkedVerified,                                                          \
    "the op MSPTI's hint named, confirmed by the launch's thread and host time")                             \
  M(A, kRecovered, "recovered", true, linkedRecovered,                                                       \
    "the innermost op open on the launching thread at the launch time (the hint named another op, or none)") \
  M(A, kUnverified, "unverified", true, linkedUnverified,                                                    \
    "MSPTI's hint alone (no API record), as no other thread ran an op meanwhile")                            \
  M(A, kNoOpOnThread, "no_op_on_thread", false, unlinkedNoOp,                                                \
    "the launching thread ran no op at the launch time (task queue, housekeeping thread)")                   \
  M(A, kClockUntrusted, "clock_untrusted", false, unlinkedClockUntrusted,                                    \
    "the launch's host time is on an unknown clock")                                                         \
  M(A, kAmbiguous, "ambiguous", false, unlinkedAmbiguous,                                                    \
    "no API record, and another thread ran an op while the hinted one did")                                  \
  M(A, kNoRecord, "no_record", false, unlinkedNoRecord, "neither an API record nor a hint")

enum class LinkState : uint8_t {
#define TORCH_MSPTI_LINK_ENUM(A, e, name, linked, field, meaning) e,
  TORCH_MSPTI_LINK_STATES(TORCH_MSPTI_LINK_ENUM, _)
#undef TORCH_MSPTI_LINK_ENUM
};

struct LinkStateInfo {
  LinkState state;
  const char* name;  // the device row's "link" argument and the counter's key
  bool linked;       // the row is credited to an op
  const char* meaning;
};

inline constexpr LinkStateInfo kLinkStates[] = {
#define TORCH_MSPTI_LINK_INFO(A, e, name, linked, field, meaning) {LinkState::e, name, linked, meaning},
    TORCH_MSPTI_LINK_STATES(TORCH_MSPTI_LINK_INFO, _)
#undef TORCH_MSPTI_LINK_INFO
};
inline constexpr size_t kLinkStateCount = std::size(kLinkStates);

// Rows are in enum order, so a state indexes its row.
constexpr const LinkStateInfo& linkStateInfo(LinkState s) { return kLinkStates[static_cast<size_t>(s)]; }
constexpr const char* linkStateName(LinkState s) { return linkStateInfo(s).name; }
constexpr bool isLinked(LinkState s) { return linkStateInfo(s).linked; }

}  // namespace torch_mspti
