// fork() after MSPTI was loaded (DataLoader workers, multiprocessing with the "fork" method).
//
// A forked child has only the thread that called fork(): MSPTI's worker threads (buffer
// completion, driver readers) do not exist there, and any lock one of them held at the fork stays
// held for good. Calling MSPTI in the child may therefore hang or lose every record. The guard,
// installed when the plugin loads MSPTI, makes the child refuse profiling instead:
//  * prepare/parent: our own locks that MSPTI's threads take inside the buffer callbacks (the
//    statistics registry and the name table) are held across fork(), so the child gets them
//    unlocked and consistent;
//  * child: marks the process (forkedFromMsptiParent() becomes true, for this process and every
//    process it forks in turn) and disarms the correlation forwarder with atomic stores only, so
//    the op hooks (push/pop) never call MSPTI again. MsptiLibrary then reports itself unavailable
//    with kForkedChildReason, so a session started in the child fails cleanly (one warning), and a
//    session inherited from the parent stops without calling MSPTI.
// Thread-safety: installForkGuard() is thread-safe and idempotent; the query is lock-free.
#pragma once

namespace torch_mspti {

inline constexpr const char* kForkedChildReason =
    "process was forked from a parent that loaded MSPTI; profiling is disabled in the child";
inline constexpr const char* kForkedChildFix =
    "profile in the parent, or start the worker with the 'spawn' or 'forkserver' multiprocessing method "
    "(torch.utils.data.DataLoader(multiprocessing_context='spawn'))";

// Registers the pthread_atfork handlers (once per process).
void installForkGuard();

// True in a process forked from one that had loaded MSPTI through the plugin.
bool forkedFromMsptiParent() noexcept;

}  // namespace torch_mspti
