// The simulator as the plugin core sees it: loaded once per process through MsptiLibrary (with
// library_path pointing at libmspti_sim.so), plus the simulator's msptiSim* control functions
// resolved from that same loaded copy.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "MsptiLibrary.h"
#include "mspti_sim.h"

namespace torch_mspti::test {

struct SimControl {
  decltype(&msptiSimLaunchKernel) launchKernel = nullptr;
  decltype(&msptiSimLaunchKernels) launchKernels = nullptr;
  decltype(&msptiSimSynchronize) synchronize = nullptr;
  decltype(&msptiSimSetOption) setOption = nullptr;
  decltype(&msptiSimGetStats) getStats = nullptr;
  decltype(&msptiSimResetOptions) resetOptions = nullptr;

  msptiSimStats stats() const {
    msptiSimStats s{};
    getStats(&s);
    return s;
  }
};

// Loads the simulator through MsptiLibrary (once per process); fails the test when it cannot.
// Returns nullptr on failure.
const MsptiFunctions* loadSimulator();
const SimControl& simControl();

// Empties MSPTI's external-correlation stacks (CUSTOM0..CUSTOM2) directly.
void drainExternalStacks();

}  // namespace torch_mspti::test
