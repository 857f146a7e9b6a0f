// fork() after MSPTI was loaded (DataLoader workers, multiprocessing with the "fork" method).
//
// A forked child has only the thread that called fork(): MSPTI's worker threads (buffer
// completion, driver readers) do not exist there, and any lock one of them held at the fork stays
// held for good. Calling MSPTI in the child may therefore hang or lose every record. The guard
// makes the child refuse profiling instead:
//  * participants (registerForkParticipant) hold the locks that MSPTI's threads or the plugin take
//    across fork() (prepare), release them in the parent and reset what the child must not use
//    (child); ForkGuard itself knows none of them. Its own registration lock is not held across
//    fork(): it is held while calling pthread_atfork, whose lock fork() holds while it runs the
//    prepare handlers (participants register once, when the process's context is built);
//  * the child is marked: forkedFromMsptiParent() is true there (and in every process it forks in
//    turn) once MSPTI had been loaded, and the library then reports itself unavailable with
//    kForkedChildReason, so a session started in the child fails cleanly and a session inherited
//    from the parent stops without calling MSPTI. Both have the same cause, which lasts for the
//    child's life: the child prints it once (claimForkedChildWarning), however many sessions fail.
// Thread-safety: thread-safe; the query is lock-free.
#pragma once

namespace torch_mspti {

inline constexpr const char* kForkedChildReason =
    "process was forked from a parent that loaded MSPTI; profiling is disabled in the child";
inline constexpr const char* kForkedChildFix =
    "profile in the parent, or start the worker with the 'spawn' or 'forkserver' multiprocessing method "
    "(torch.utils.data.DataLoader(multiprocessing_context='spawn'))";

struct ForkParticipant {
  void (*prepare)(void* self) = nullptr;  // before fork(), in the forking thread: take locks
  void (*parent)(void* self) = nullptr;   // after fork(), in the parent: release them
  void (*child)(void* self) = nullptr;    // after fork(), in the child: release them, reset state
  void* self = nullptr;
};

// Adds a participant (at most 8; registered once each, never removed) and installs the
// pthread_atfork handlers on first use.
void registerForkParticipant(const ForkParticipant& p);
// Marks that MSPTI has been loaded in this process: children forked from now on are refused.
void noteMsptiLoaded();
// True in a process forked from one that had loaded MSPTI through the plugin.
bool forkedFromMsptiParent() noexcept;
// In a forked child: true for the first caller only (each forked process has its own first), so
// the fork's warning is printed once per process. False in a process that was not forked.
bool claimForkedChildWarning() noexcept;

}  // namespace torch_mspti
