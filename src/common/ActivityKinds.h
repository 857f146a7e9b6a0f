// MSPTI's facts about each activity kind, shared by the plugin core (record walker, arming,
// reports) and the simulator (record strides, which kinds a generation accepts, the LD_PRELOAD
// rule), so that each fact is stated once. The record-walker fuzzer checks the walker against
// numbers of its own (tests/cpp/core/DocumentedLayout.h), not against this table.
//
// Facts and their sources: values and record layouts from MSPTI mspti_activity.h as measured in
// mspti.md 3.2 and 3.4 (the stride of a record in a buffer is sizeof of its kind's packed struct;
// ACL_API, NODE_API and RUNTIME_API records use msptiActivityApi); the generation that introduced
// each kind from mspti.md 8; the 26.x rule that Enable refuses HCCL, MEMORY, MEMSET and MEMCPY
// with MSPTI_ERROR_WITHOUT_LD_PRELOAD unless LD_PRELOAD names libmspti.so from mspti.md 2.3 and 5.5.
// What the plugin makes of a kind (the setting that collects it, how its records are read and
// shown) is the plugin's own decision: the core's kind table, src/core/KindHandlers.h.
// Thread-safety: constant data.
#pragma once

#include <cstddef>
#include <cstdint>

#include <mspti/mspti_activity.h>

namespace torch_mspti {

// MSPTI generations as numbers (mspti.md 8): 80 = CANN 8.0.RC3, 81 = 8.1.RC1, 82 = 8.2.RC1,
// 260 = MindStudio 26.0, 261 = the 26.1 branch.
inline constexpr int kGeneration80 = 80;
inline constexpr int kGeneration81 = 81;
inline constexpr int kGeneration82 = 82;
inline constexpr int kGeneration260 = 260;

struct ActivityKindInfo {
  msptiActivityKind kind;
  const char* name;     // "KERNEL"; as in MSPTI_ACTIVITY_KIND_KERNEL
  size_t recordSize;    // bytes a record of this kind takes in a buffer
  int sinceGeneration;  // first MSPTI generation that knows the kind
  bool needsPreload;    // 26.x refuses Enable without libmspti.so in LD_PRELOAD
};

inline constexpr ActivityKindInfo kActivityKinds[] = {
    {MSPTI_ACTIVITY_KIND_INVALID, "INVALID", 0, 0, false},
    {MSPTI_ACTIVITY_KIND_MARKER, "MARKER", sizeof(msptiActivityMarker), kGeneration80, false},
    {MSPTI_ACTIVITY_KIND_KERNEL, "KERNEL", sizeof(msptiActivityKernel), kGeneration80, false},
    {MSPTI_ACTIVITY_KIND_API, "API", sizeof(msptiActivityApi), kGeneration80, false},
    {MSPTI_ACTIVITY_KIND_HCCL, "HCCL", sizeof(msptiActivityHccl), kGeneration81, true},
    {MSPTI_ACTIVITY_KIND_MEMORY, "MEMORY", sizeof(msptiActivityMemory), kGeneration81, true},
    {MSPTI_ACTIVITY_KIND_MEMSET, "MEMSET", sizeof(msptiActivityMemset), kGeneration81, true},
    {MSPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", sizeof(msptiActivityMemcpy), kGeneration81, true},
    {MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", sizeof(msptiActivityExternalCorrelation),
     kGeneration81, false},
    {MSPTI_ACTIVITY_KIND_COMMUNICATION, "COMMUNICATION", sizeof(msptiActivityCommunication), kGeneration82, false},
    {MSPTI_ACTIVITY_KIND_ACL_API, "ACL_API", sizeof(msptiActivityApi), kGeneration260, false},
    {MSPTI_ACTIVITY_KIND_NODE_API, "NODE_API", sizeof(msptiActivityApi), kGeneration260, false},
    {MSPTI_ACTIVITY_KIND_RUNTIME_API, "RUNTIME_API", sizeof(msptiActivityApi), kGeneration260, false},
};

inline constexpr size_t kActivityKindCount = sizeof(kActivityKinds) / sizeof(kActivityKinds[0]);
static_assert(kActivityKindCount == MSPTI_ACTIVITY_KIND_COUNT, "one entry per MSPTI activity kind");

constexpr bool kindTableInOrder() {
  for (size_t i = 0; i < kActivityKindCount; ++i)
    if (static_cast<size_t>(kActivityKinds[i].kind) != i) return false;
  return true;
}
static_assert(kindTableInOrder(), "kActivityKinds is indexed by the kind's value");

// The entry of `kind`, or nullptr for a value outside the known kinds (any uint32_t may be read
// from a buffer).
constexpr const ActivityKindInfo* activityKind(uint32_t kind) {
  return kind < kActivityKindCount ? &kActivityKinds[kind] : nullptr;
}
// Stride of a record of `kind` in a buffer; 0 when the kind is unknown (the walk must stop).
constexpr size_t recordSize(uint32_t kind) {
  const ActivityKindInfo* k = activityKind(kind);
  return k && k->kind != MSPTI_ACTIVITY_KIND_INVALID ? k->recordSize : 0;
}
constexpr const char* kindName(uint32_t kind) {
  const ActivityKindInfo* k = activityKind(kind);
  return k ? k->name : "UNKNOWN";
}
// True when a library of `generation` knows `kind` (Enable accepts it).
constexpr bool kindKnownTo(uint32_t kind, int generation) {
  const ActivityKindInfo* k = activityKind(kind);
  return k && k->kind != MSPTI_ACTIVITY_KIND_INVALID && k->sinceGeneration <= generation;
}

}  // namespace torch_mspti
