// Which user callback, if any, the calling thread is inside. MSPTI calls the request callback
// and FlushAll's completion of the current buffer while holding its (non-recursive) buffer mutex,
// and FlushAll joins the completion worker threads (mspti.md 5.2, 11). Calling FlushAll or
// Disable from those places deadlocks the real library or makes it join its own thread. The
// simulator turns that into a loud abort instead of a silent hang, so a test names the bug.
#pragma once

namespace torch_mspti::sim {

enum class CallbackContext {
  kNone,
  kRequest,           // request callback, buffer lock held
  kCompleteLocked,    // FlushAll delivering the current buffer, buffer lock held
  kCompleteUnlocked,  // FlushAll delivering a queued full buffer on the caller's thread
  kCompleteWorker,    // a completion worker thread spawned by the ActivityManager thread
};

class CallbackScope {
 public:
  explicit CallbackScope(CallbackContext context) : previous_(slot()) { slot() = context; }
  ~CallbackScope() { slot() = previous_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

  static CallbackContext current() { return slot(); }
  static bool holdsBufferLock() {
    return slot() == CallbackContext::kRequest || slot() == CallbackContext::kCompleteLocked;
  }

 private:
  static CallbackContext& slot() {
    static thread_local CallbackContext context = CallbackContext::kNone;
    return context;
  }
  CallbackContext previous_;
};

// Prints "libmspti_sim: <api> called from <context>: <what the real library does>" and aborts.
[[noreturn]] void abortOnReentry(const char* api, const char* realBehaviour);

}  // namespace torch_mspti::sim
