// Checked calls into the loaded MSPTI library (everything but the per-op push/pop, which
// CorrelationForwarder makes itself).
//
// MSPTI's C API can throw C++ exceptions (its dependency loader throws std::runtime_error when a
// CANN symbol is missing; mspti.md 2, 6 item 7): every call here catches everything and turns it
// into kCallThrew, so no exception ever crosses into kineto or torch.
// Thread-safety: stateless apart from the immutable function table; safe from any thread.
#pragma once

#include <string>

#include <mspti/mspti.h>

#include "MsptiLibrary.h"

namespace torch_mspti {

// Result reported when the MSPTI call threw a C++ exception (not an MSPTI code).
inline constexpr msptiResult kCallThrew = static_cast<msptiResult>(-1);
// Result reported when the symbol is absent from the loaded library.
inline constexpr msptiResult kCallUnavailable = static_cast<msptiResult>(-2);

const char* resultName(msptiResult r);
// "msptiActivityEnable(KERNEL) -> 6 MSPTI_ERROR_WITHOUT_LD_PRELOAD"
std::string describeCall(const char* call, const std::string& arg, msptiResult r);

class MsptiActivityApi {
 public:
  explicit MsptiActivityApi(const MsptiFunctions& fns) : f_(fns) {}

  msptiResult subscribe(msptiSubscriberHandle* handle);
  msptiResult unsubscribe(msptiSubscriberHandle handle);
  msptiResult registerCallbacks(msptiBuffersCallbackRequestFunc req, msptiBuffersCallbackCompleteFunc done);
  msptiResult enable(msptiActivityKind kind);
  msptiResult disable(msptiActivityKind kind);
  msptiResult flushAll();
  bool hasExternalCorrelation() const { return f_.pushExternalCorrelationId != nullptr; }
  bool hasIsEnabled() const { return f_.isEnabled != nullptr; }
  const MsptiFunctions& functions() const { return f_; }

 private:
  const MsptiFunctions f_;  // a copy: a table of function pointers
};

}  // namespace torch_mspti
