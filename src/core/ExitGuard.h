// Process exit with a profiling session still running (a profile started and never stopped).
//
// kineto's profiler is a static object of libtorch, destroyed during static destruction, and it
// destroys our session then; MSPTI's own singletons may already be gone at that point (the
// simulator's destroy_at_exit option reproduces that), and torch's warning machinery too. So once
// the process is exiting, sessions make no MSPTI call and raise no warning: they only let go of
// MSPTI's external-correlation stack without popping it (the process is ending).
// Exiting is known from Python's atexit (the package registers noteProcessExit) and, for exits
// without Python, from a static object of this library, destroyed before libtorch's (it was
// loaded after it).
// Thread-safety: lock-free.
#pragma once

namespace torch_mspti {

void noteProcessExit() noexcept;
bool processExiting() noexcept;

}  // namespace torch_mspti
