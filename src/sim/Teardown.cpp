#include "Teardown.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace torch_mspti::sim {

namespace {
std::atomic<bool> gTornDown{false};
}  // namespace

bool tornDown() { return gTornDown.load(std::memory_order_acquire); }

void markTornDown() { gTornDown.store(true, std::memory_order_release); }

void checkNotTornDown(const char* api) {
  if (tornDown()) {
    std::fprintf(stderr, "libmspti_sim: %s called after the library was torn down at process exit\n", api);
    std::fflush(stderr);
    std::abort();
  }
}

}  // namespace torch_mspti::sim
