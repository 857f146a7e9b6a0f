// The mstx markers of the simulated process: what libms_tools_ext.so's mstxMarkA,
// mstxRangeStartA, mstxRangeEnd and their mstxDomain* variants lead MSPTI to write
// (mspti.md 5.9). A call does nothing unless MARKER is enabled and its domain is (a range
// started then returns 0, MSTX_INVALID_ID; an end refused so leaves its range open). Otherwise
// it writes at once:
//  * a host record (sourceKind HOST, objectId pt = pid/tid of the calling thread, timestamp the
//    call's CLOCK_REALTIME ns; the message and the domain's name, "default" for the default
//    domain; an end record has "" for both);
//  * when the call names a stream, a device record as well (sourceKind DEVICE, objectId ds =
//    physical device (ASCEND_RT_VISIBLE_DEVICES, mspti.md 4)/stream, timestamp the time the stream reaches the marker:
//    the later of now and the stream's tail; "" for message and domain), both with the *_WITH_DEVICE flag. The real
//    device record comes later through the driver channel; the simulator writes it at the call.
// A range's start and end share its id (ids count up from 1 per process; 0 is MSTX_INVALID_ID);
// a mark gets an id of its own. mstxDomainCreateA refuses "default" (NULL).
// Stream handles (aclrtStream) of the simulated device come from msptiSimStreamHandle.
// Thread-safety: every member function may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "DeviceTimeline.h"
#include "Environment.h"
#include "HostRecords.h"
#include "NameTable.h"
#include "SimCounters.h"

namespace torch_mspti::sim {

// The default domain's name in records and in Enable/DisableMarkerDomain (mspti.md 5.9).
extern const char* const kDefaultDomain;

struct MarkerContext {
  SimCounters& counters;
  const ActivitySwitches& switches;
  const DeviceTimeline& timeline;
  const Environment& environment;
  ActivityBuffers& buffers;
  NameTable& names;
  const HostRecords& hostRecords;  // MSPTI's host clock (api_clock)
};

// Where a marker is placed on the device: valid = false for a host-only marker.
struct MarkerStream {
  bool valid = false;
  uint32_t device = 0;
  uint32_t stream = 0;
};

// aclrtStream handles of the simulator: (logical device + 1) << 32 | stream, never NULL.
void* streamHandle(uint32_t device, uint32_t stream);
MarkerStream streamOf(const void* handle);

class MstxMarkers {
 public:
  explicit MstxMarkers(const MarkerContext& context) : ctx_(context) {}
  MstxMarkers(const MstxMarkers&) = delete;
  MstxMarkers& operator=(const MstxMarkers&) = delete;

  // A domain handle for `name` (the same handle for the same name; nullptr for NULL or "").
  void* createDomain(const char* name);
  // The domain's name, nullptr for the default domain (handle nullptr).
  const char* domainName(const void* handle) const;

  void mark(const void* domain, const char* message, const void* stream);
  // The range's id; 0 (MSTX_INVALID_ID) for a NULL message.
  uint64_t rangeStart(const void* domain, const char* message, const void* stream);
  // Ends range `id` (unknown ids write nothing).
  void rangeEnd(const void* domain, uint64_t id);

  // msptiActivityEnable/DisableMarkerDomain: NULL or "" -> false (MSPTI answers 1).
  bool setDomainEnabled(const char* name, bool on);

 private:
  bool domainOn(const char* name) const;
  bool collecting(const char* domain) const;
  void write(uint32_t flag, uint64_t id, const char* name, const char* domain, const MarkerStream& where);

  MarkerContext ctx_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<std::string>> domains_;  // name -> handle (the string)
  std::set<std::string> disabled_;
  std::unordered_map<uint64_t, MarkerStream> openRanges_;
  uint64_t nextId_ = 1;
};

}  // namespace torch_mspti::sim
