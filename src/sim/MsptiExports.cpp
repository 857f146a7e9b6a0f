// The MSPTI C ABI exported by libmspti_sim*.so (declared in third_party/mspti/include/mspti/).
// The default build is the 26.1 generation (kinds 1..12, MSPTI_ERROR_WITHOUT_LD_PRELOAD and
// msptiActivityIsEnabled); older generations (Generation.h) compile without the entry points they
// lacked. Each entry point's real semantics are listed in src/sim/README.md.
#include <cstring>
#include <stdexcept>
#include <string>

#include "ActivityKinds.h"
#include "Export.h"
#include "Generation.h"
#include "Simulator.h"
#include "Teardown.h"
#include "mspti/mspti.h"
#include "mspti_sim.h"

namespace sim = torch_mspti::sim;

namespace {

// The simulator itself does not throw; should an allocation fail, answer INNER rather than let
// an exception cross the C boundary (the real library may throw there, mspti.md 6 item 7).
template <typename Fn>
msptiResult guarded(Fn&& fn) {
  try {
    return fn();
  } catch (...) {
    return MSPTI_ERROR_INNER;
  }
}

// Fault injection (option throw_in): the entry point throws, as the real one can when a CANN
// dependency is missing (mspti.md 2, 6 item 7). Thrown before any state changes.
void throwIfInjected(int64_t bit, const char* api) {
  if ((sim::Simulator::instance().options().get(sim::Option::kThrowIn) & bit) != 0) {
    throw std::runtime_error(std::string("libmspti_sim: injected exception in ") + api);
  }
}

// The raw 32-bit value of an enum argument. A C caller may pass any int (say -1), which is
// outside the C++ enum's value range: reading it through the enum type would be undefined.
template <typename Enum>
int32_t rawValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int32_t));
  int32_t raw;
  std::memcpy(&raw, &value, sizeof(raw));
  return raw;
}

// Option destroy_at_exit: marks the library torn down when static destruction reaches this
// object. It is built when the library is loaded, so the static objects of anything loaded before
// (a plugin that dlopens MSPTI later) are destroyed after it, and their MSPTI calls abort, as they
// would touch the real library's destroyed singletons.
struct TeardownAtExit {
  TeardownAtExit() = default;
  TeardownAtExit(const TeardownAtExit&) = delete;
  TeardownAtExit& operator=(const TeardownAtExit&) = delete;
  ~TeardownAtExit() {
    if (sim::Simulator::instance().options().flag(sim::Option::kDestroyAtExit)) {
      sim::markTornDown();
    }
  }
} gTeardownAtExit;

}  // namespace

TORCH_MSPTI_SIM_EXPORT msptiResult msptiSubscribe(msptiSubscriberHandle* subscriber, msptiCallbackFunc callback,
                                                  void* userdata) {
  sim::checkNotTornDown("msptiSubscribe");
  throwIfInjected(MSPTI_SIM_THROW_SUBSCRIBE, "msptiSubscribe");
  return guarded([&] { return sim::Simulator::instance().subscribe(subscriber, callback, userdata); });
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiUnsubscribe(msptiSubscriberHandle subscriber) {
  sim::checkNotTornDown("msptiUnsubscribe");
  throwIfInjected(MSPTI_SIM_THROW_UNSUBSCRIBE, "msptiUnsubscribe");
  return guarded([&] { return sim::Simulator::instance().unsubscribe(subscriber); });
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityRegisterCallbacks(
    msptiBuffersCallbackRequestFunc funcBufferRequested, msptiBuffersCallbackCompleteFunc funcBufferCompleted) {
  sim::checkNotTornDown("msptiActivityRegisterCallbacks");
  throwIfInjected(MSPTI_SIM_THROW_REGISTER_CALLBACKS, "msptiActivityRegisterCallbacks");
  return guarded(
      [&] { return sim::Simulator::instance().buffers().registerCallbacks(funcBufferRequested, funcBufferCompleted); });
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityEnable(msptiActivityKind kind) {
  sim::checkNotTornDown("msptiActivityEnable");
  throwIfInjected(MSPTI_SIM_THROW_ENABLE, "msptiActivityEnable");
  return guarded([&] { return sim::Simulator::instance().enable(rawValue(kind)); });
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityDisable(msptiActivityKind kind) {
  sim::checkNotTornDown("msptiActivityDisable");
  throwIfInjected(MSPTI_SIM_THROW_DISABLE, "msptiActivityDisable");
  return guarded([&] { return sim::Simulator::instance().disable(rawValue(kind)); });
}

#if TORCH_MSPTI_SIM_HAS_IS_ENABLED
TORCH_MSPTI_SIM_EXPORT bool msptiActivityIsEnabled(msptiActivityKind kind) {
  sim::checkNotTornDown("msptiActivityIsEnabled");
  return sim::Simulator::instance().isEnabled(rawValue(kind));
}
#endif

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                              msptiActivity** record) {
  sim::checkNotTornDown("msptiActivityGetNextRecord");
  // MSPTI's cursor is a function-static thread_local; `*record` is never read. The cursor is
  // reset only when the end is reported, so a buffer left half-walked poisons the thread's next
  // buffer, and an unknown kind leaves it stale (mspti.md 2.3, 6 item 2).
  static thread_local size_t position = 0;
  if (buffer == nullptr || record == nullptr) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  if (position >= validBufferSizeBytes) {
    position = 0;
    return MSPTI_ERROR_MAX_LIMIT_REACHED;
  }
  int32_t kind = 0;
  std::memcpy(&kind, buffer + position, sizeof(kind));                         // the buffer need not be aligned
  const size_t stride = torch_mspti::recordSize(static_cast<uint32_t>(kind));  // 0: a kind MSPTI does not know
  if (stride == 0) {
    return MSPTI_ERROR_INNER;
  }
  *record = reinterpret_cast<msptiActivity*>(buffer + position);
  position += stride;
  return MSPTI_SUCCESS;
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityFlushAll(uint32_t flag) {
  sim::checkNotTornDown("msptiActivityFlushAll");
  (void)flag;  // ignored by MSPTI (mspti.md 2.3)
  throwIfInjected(MSPTI_SIM_THROW_FLUSH_ALL, "msptiActivityFlushAll");
  return guarded([&] { return sim::Simulator::instance().buffers().flushAll(); });
}

#if TORCH_MSPTI_SIM_HAS_FLUSH_PERIOD
TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityFlushPeriod(uint32_t time) {
  sim::checkNotTornDown("msptiActivityFlushPeriod");
  return guarded([&] { return sim::Simulator::instance().buffers().flushPeriod(time); });
}
#endif

#if TORCH_MSPTI_SIM_HAS_EXTERNAL_CORRELATION
TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind kind,
                                                                          uint64_t id) {
  sim::checkNotTornDown("msptiActivityPushExternalCorrelationId");
  throwIfInjected(MSPTI_SIM_THROW_PUSH, "msptiActivityPushExternalCorrelationId");
  return guarded(
      [&] { return sim::Simulator::instance().pushExternalCorrelationId(static_cast<uint32_t>(rawValue(kind)), id); });
}

TORCH_MSPTI_SIM_EXPORT msptiResult msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind kind,
                                                                         uint64_t* lastId) {
  sim::checkNotTornDown("msptiActivityPopExternalCorrelationId");
  throwIfInjected(MSPTI_SIM_THROW_POP, "msptiActivityPopExternalCorrelationId");
  return guarded([&] {
    return sim::Simulator::instance().popExternalCorrelationId(static_cast<uint32_t>(rawValue(kind)), lastId);
  });
}
#endif  // TORCH_MSPTI_SIM_HAS_EXTERNAL_CORRELATION
