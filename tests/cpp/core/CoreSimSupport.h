// The simulator as the plugin core sees it in production: loaded once per process through the
// process's PluginContext (library_path = libmspti_sim.so), sessions built from that context's
// SessionDeps, plus the simulator's msptiSim* control functions resolved from the same loaded
// copy. Sessions get their MSPTI function table from a copy the test owns (sessionTable()), so a
// forked child can replace its entry points with tripwires without touching the library's.
// Thread-safety: loadSimulator()/simControl() once from the test's main thread; the rest as the
// parts they reach.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "MsptiActivityProfilerSession.h"
#include "MsptiLibrary.h"
#include "PluginContext.h"
#include "mspti_sim_control.h"

namespace torch_mspti::test {

// The simulator's msptiSim* functions (src/sim/include/mspti_sim_control.h).
using SimControl = mspti_sim::Control;

// The process's context with the simulator loaded (fails the test when it cannot be).
PluginContext& simContext();
// Loads the simulator (once per process); nullptr on failure.
const MsptiFunctions* loadSimulator();
const SimControl& simControl();
// The function table sessions built by simSessionDeps() use: a copy of the loaded library's.
MsptiFunctions& sessionTable();
// simContext().sessionDeps() with `config`, the table above, and warnings kept in simWarnings().
SessionDeps simSessionDeps(const ConfigSnapshot& config);
std::vector<std::string> simWarnings();

// Empties MSPTI's external-correlation stacks (CUSTOM0..CUSTOM2) directly.
void drainExternalStacks();

}  // namespace torch_mspti::test
