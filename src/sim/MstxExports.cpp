// The mstx C ABI of libms_tools_ext.so (declared in torch_npu's third_party/mstx/ms_tools_ext.h,
// mspti.md 5.9), exported by libmspti_sim*.so so that the simulated device can mark code as
// torch_npu does; and MSPTI's msptiActivityEnable/DisableMarkerDomain (26.x generations only).
// aclrtStream is an opaque pointer; the simulator's handles come from msptiSimStreamHandle.
#include <cstdint>

#include "Export.h"
#include "Generation.h"
#include "Simulator.h"
#include "Teardown.h"
#include "mspti/mspti.h"

namespace sim = torch_mspti::sim;

extern "C" {
typedef uint64_t mstxRangeId;
typedef void* mstxDomainHandle_t;
typedef void* aclrtStream;
}

namespace {

// Nothing may throw across the C boundary: an allocation failure writes no marker.
template <typename Fn>
auto noThrow(Fn&& fn, decltype(fn()) fallback) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    return fallback;
  }
}

}  // namespace

TORCH_MSPTI_SIM_EXPORT void mstxMarkA(const char* message, aclrtStream stream) {
  noThrow(
      [&] {
        sim::Simulator::instance().markers().mark(nullptr, message, stream);
        return 0;
      },
      0);
}

TORCH_MSPTI_SIM_EXPORT mstxRangeId mstxRangeStartA(const char* message, aclrtStream stream) {
  return noThrow([&] { return sim::Simulator::instance().markers().rangeStart(nullptr, message, stream); },
                 mstxRangeId{0});
}

TORCH_MSPTI_SIM_EXPORT void mstxRangeEnd(mstxRangeId id) {
  noThrow(
      [&] {
        sim::Simulator::instance().markers().rangeEnd(nullptr, id);
        return 0;
      },
      0);
}

TORCH_MSPTI_SIM_EXPORT mstxDomainHandle_t mstxDomainCreateA(const char* name) {
  return noThrow([&] { return sim::Simulator::instance().markers().createDomain(name); }, mstxDomainHandle_t{nullptr});
}

// Domains live as long as the process (handles stay valid for records already written).
TORCH_MSPTI_SIM_EXPORT void mstxDomainDestroy(mstxDomainHandle_t) {}

TORCH_MSPTI_SIM_EXPORT void mstxDomainMarkA(mstxDomainHandle_t domain, const char* message, aclrtStream stream) {
  noThrow(
      [&] {
        sim::Simulator::instance().markers().mark(domain, message, stream);
        return 0;
      },
      0);
}

TORCH_MSPTI_SIM_EXPORT mstxRangeId mstxDomainRangeStartA(mstxDomainHandle_t domain, const char* message,
                                                         aclrtStream stream) {
  return noThrow([&] { return sim::Simulator::instance().markers().rangeStart(domain, message, stream); },
                 mstxRangeId{0});
}

TORCH_MSPTI_SIM_EXPORT void mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id) {
  noThrow(
      [&] {
        sim::Simulator::instance().markers().rangeEnd(domain, id);
        return 0;
      },
      0);
}

#if TORCH_MSPTI_SIM_HAS_MARKER_DOMAINS
TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityEnableMarkerDomain(const char* name) {
  sim::checkNotTornDown("msptiActivityEnableMarkerDomain");
  return noThrow(
      [&] {
        return sim::Simulator::instance().markers().setDomainEnabled(name, true) ? MSPTI_SUCCESS
                                                                                 : MSPTI_ERROR_INVALID_PARAMETER;
      },
      MSPTI_ERROR_INNER);
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityDisableMarkerDomain(const char* name) {
  sim::checkNotTornDown("msptiActivityDisableMarkerDomain");
  return noThrow(
      [&] {
        return sim::Simulator::instance().markers().setDomainEnabled(name, false) ? MSPTI_SUCCESS
                                                                                  : MSPTI_ERROR_INVALID_PARAMETER;
      },
      MSPTI_ERROR_INNER);
}
#endif
