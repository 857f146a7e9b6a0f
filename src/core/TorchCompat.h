// The one place where torch-mspti adapts to the torch minor it is compiled against (torch 2.7
// ... 2.15). cmake/TorchFeatures.cmake reads that torch's headers and writes
// torch_mspti_torch_features.h; this header turns each difference into one function or
// constant, so no other file tests a torch version. What differs, per minor, and what torch's
// profiler then does with our rows: docs/kineto.md section 7.
//
// * PrivateUse1ProfilerRegistry (torch >= 2.12): torch's one-slot registry for a PrivateUse1
//   profiler. Older torch has none, so there is no slot to inspect or take; kineto's own list of
//   child profilers is the only registration (kineto.md 1.1).
// * IActivityProfilerSession::getMetadata (kineto #1057): where it exists kineto merges a child
//   session's key/values into the trace's metadata; older kineto has no such call, and the session
//   hands its report to kineto's parent profiler (ActivityProfilerInterface::addMetadata) from
//   getDeviceProperties(), which kineto calls before it writes the trace's metadata (kineto.md 7).
// * DeviceInfo / ResourceInfo: aggregates in newer kineto, classes with constructors in older
//   kineto, whose ResourceInfo constructor takes (deviceId, id, sortIndex, name), an order unlike
//   the fields'. makeDeviceInfo/makeResourceInfo take named arguments and build either.
// * Autograd nodes (the simulated device's CPU-graph ops): torch::autograd::Edge::function is a
//   std::shared_ptr<Node> in torch 2.7 and a c10::intrusive_ptr<Node> in torch 2.13; makeNode()
//   makes whichever this torch holds nodes by.
// * GenericTraceActivity::Flow::id: 27 bits in older kineto. flowIdFor() maps the plugin's
//   correlation ids into that range without ever giving 0 (kineto writes no flow for id 0).
// * Counter events (kineto #1303): ActivityType::MTIA_COUNTERS with addCounterValue, written as
//   "ph": "C". Older kineto has no counter output: setCounter() returns false there and the
//   memory counter track is left out (counted: memory.counter_samples stays 0).
// Thread-safety: pure functions and constants.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <c10/util/intrusive_ptr.h>

#include <torch_mspti_torch_features.h>

// `getMetadata() TORCH_MSPTI_SESSION_METADATA_OVERRIDE;` overrides kineto's virtual where it exists.
#if TORCH_MSPTI_KINETO_SESSION_METADATA
#define TORCH_MSPTI_SESSION_METADATA_OVERRIDE override
#else
#define TORCH_MSPTI_SESSION_METADATA_OVERRIDE
#endif

namespace torch_mspti::compat {

// The torch this build was compiled against, e.g. "2.7.1+cu126".
inline constexpr const char* kBuildTorchVersion = TORCH_MSPTI_TORCH_VERSION;
inline constexpr bool kHasPrivateUse1ProfilerRegistry = TORCH_MSPTI_HAS_PRIVATEUSE1_PROFILER_REGISTRY != 0;
inline constexpr bool kSessionMetadata = TORCH_MSPTI_KINETO_SESSION_METADATA != 0;
inline constexpr int kFlowIdBits = TORCH_MSPTI_KINETO_FLOW_ID_BITS;
inline constexpr bool kCounterEvents = TORCH_MSPTI_KINETO_COUNTER_EVENTS != 0;

// Makes `act` a counter sample (one value named `key`) that kineto writes as a "ph": "C" event on
// the track (act.device, act.resource) named act's name. Returns false, leaving `act` unchanged,
// where kineto has no counter events.
inline bool setCounter(libkineto::GenericTraceActivity& act, const std::string& key, double value) {
#if TORCH_MSPTI_KINETO_COUNTER_EVENTS
  act.activityType = libkineto::ActivityType::MTIA_COUNTERS;
  act.addCounterValue(key, value);
  return true;
#else
  (void)act, (void)key, (void)value;
  return false;
#endif
}

// Whether torch's PrivateUse1 profiler registry holds a factory (false where torch has none).
bool privateUse1RegistryHasFactory();
// Puts `factory` in torch's PrivateUse1 registry slot, replacing what is there. Returns false
// (and does nothing) where torch has no registry.
bool takePrivateUse1RegistrySlot(std::function<std::unique_ptr<libkineto::IActivityProfiler>()> factory);

// Adds key: value to the metadata of the trace kineto is collecting (a no-op before kineto is
// initialised). For kineto without IActivityProfilerSession::getMetadata.
void addTraceMetadata(const std::string& key, const std::string& value);

// A kineto flow id for one of the plugin's ids (in [2^30, 2^31)): the id itself where flow ids
// have 32 bits; else the id folded into [1, 2^27), distinct for 2^27 - 1 consecutive ids.
constexpr uint32_t flowIdFor(int32_t id) {
  constexpr uint64_t kSpan = (uint64_t{1} << kFlowIdBits) - 1u;
  if constexpr (kFlowIdBits >= 32) return static_cast<uint32_t>(id);
  return static_cast<uint32_t>(1u + static_cast<uint64_t>(static_cast<uint32_t>(id)) % kSpan);
}

// A new autograd node of type T, held the way `Edge` (torch::autograd::Edge, a template parameter
// so this header needs no autograd include) holds its function: std::shared_ptr or intrusive_ptr.
template <typename T, typename Edge>
auto makeNode() {
  using Handle = decltype(Edge::function);
  if constexpr (std::is_same_v<Handle, std::shared_ptr<typename Handle::element_type>>) return std::make_shared<T>();
  else return c10::make_intrusive<T>();
}

namespace detail {
template <typename T>
T makeDeviceInfo(int64_t id, int64_t sortIndex, std::string name, std::string label) {
  if constexpr (std::is_aggregate_v<T>)
    return T{.id = id, .sortIndex = sortIndex, .name = std::move(name), .label = std::move(label)};
  else return T(id, sortIndex, name, label);
}
template <typename T>
T makeResourceInfo(int64_t deviceId, int64_t id, int64_t sortIndex, std::string name) {
  if constexpr (std::is_aggregate_v<T>)
    return T{.id = id, .sortIndex = sortIndex, .deviceId = deviceId, .name = std::move(name)};
  else return T(deviceId, id, sortIndex, name);
}
}  // namespace detail

// A kineto device (trace process): pid-like id, sort position, process name, label.
inline libkineto::DeviceInfo makeDeviceInfo(int64_t id, int64_t sortIndex, std::string name, std::string label) {
  return detail::makeDeviceInfo<libkineto::DeviceInfo>(id, sortIndex, std::move(name), std::move(label));
}
// A kineto resource (trace lane) of device `deviceId`.
inline libkineto::ResourceInfo makeResourceInfo(int64_t deviceId, int64_t id, int64_t sortIndex, std::string name) {
  return detail::makeResourceInfo<libkineto::ResourceInfo>(deviceId, id, sortIndex, std::move(name));
}

}  // namespace torch_mspti::compat
