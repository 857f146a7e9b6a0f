#include "ExitGuard.h"

#include <atomic>

namespace torch_mspti {
namespace {

// Process-wide: PluginContext.h says why.
std::atomic<bool> gExiting{false};

struct ExitMarker {
  ~ExitMarker() { gExiting.store(true, std::memory_order_release); }
};
ExitMarker gMarker;

}  // namespace

void noteProcessExit() noexcept { gExiting.store(true, std::memory_order_release); }

bool processExiting() noexcept { return gExiting.load(std::memory_order_acquire); }

}  // namespace torch_mspti
