// Process-exit teardown (option destroy_at_exit). The real library's singletons are static objects
// that die during static destruction; a plugin that still calls MSPTI from its own static
// destructors or exit handlers (a profile started and never stopped) then touches destroyed state.
// With the option on, a static destructor of the simulator marks it torn down, and every MSPTI
// entry point called after that prints
//   libmspti_sim: <function> called after the library was torn down at process exit
// to stderr and aborts, so a test sees the call instead of undefined behaviour.
#pragma once

namespace torch_mspti::sim {

// True once static destruction tore the library down (only with destroy_at_exit=1).
bool tornDown();
void markTornDown();
// Aborts with the message above when torn down; returns otherwise.
void checkNotTornDown(const char* api);

}  // namespace torch_mspti::sim
