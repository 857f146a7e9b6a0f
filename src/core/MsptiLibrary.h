// Finding, loading and resolving libmspti.so at run time.
//
// The plugin never links libmspti and never dlcloses it: MSPTI keeps our buffer callbacks and its
// own threads for the life of the process (mspti.md 5.6). Search order, first hit wins:
//   1. the explicit path (setting library_path / TORCH_MSPTI_LIBRARY), loaded as given;
//   2. a libmspti already loaded in the process (LD_PRELOAD, torch_npu), found with RTLD_NOLOAD;
//   3. $ASCEND_HOME_PATH/{lib64,tools/mspti/lib64}, then the same under $ASCEND_TOOLKIT_HOME;
//   4. /usr/local/Ascend/cann, the newest /usr/local/Ascend/cann-<version>,
//      /usr/local/Ascend/ascend-toolkit/latest (each with lib64 and tools/mspti/lib64);
//   5. the absolute directories of LD_LIBRARY_PATH (never an empty or relative entry).
// Every candidate that is not the torch-mspti simulator (recognised by its exported
// msptiSimGeneration) is loaded only when libprofapi.so can be found too, because libmspti's
// static initialiser terminates the process otherwise (mspti.md 6, item 7); an explicit path
// that fails this check is refused with the reason unless allowMissingProfapi is set.
// One MsptiLibrary per process (PluginContext): the process has one loaded MSPTI.
// Thread-safety: all functions are thread-safe; the symbol table is immutable once loaded.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <mspti/mspti.h>

namespace torch_mspti {

// Function pointers resolved from the loaded library; a missing optional symbol is nullptr.
struct MsptiFunctions {
  // required
  msptiResult (*subscribe)(msptiSubscriberHandle*, msptiCallbackFunc, void*) = nullptr;
  msptiResult (*unsubscribe)(msptiSubscriberHandle) = nullptr;
  msptiResult (*registerCallbacks)(msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc) = nullptr;
  msptiResult (*enable)(msptiActivityKind) = nullptr;
  msptiResult (*disable)(msptiActivityKind) = nullptr;
  msptiResult (*flushAll)(uint32_t) = nullptr;
  // optional (absent from older generations, mspti.md 8)
  msptiResult (*pushExternalCorrelationId)(msptiExternalCorrelationKind, uint64_t) = nullptr;
  msptiResult (*popExternalCorrelationId)(msptiExternalCorrelationKind, uint64_t*) = nullptr;
  bool (*isEnabled)(msptiActivityKind) = nullptr;
  // From CANN 8.3.RC1 (mspti.md 2.3, 5.9); both or neither.
  msptiResult (*enableMarkerDomain)(const char*) = nullptr;
  msptiResult (*disableMarkerDomain)(const char*) = nullptr;
};

// What a search is asked to do (from the session's ConfigSnapshot).
struct LoadRequest {
  std::string explicitPath;          // library_path ("" = search)
  bool allowMissingProfapi = false;  // allow_missing_profapi
};

struct LibraryCandidate {
  std::string path;
  std::string source;   // "explicit", "already-loaded", "ASCEND_HOME_PATH", ... "LD_LIBRARY_PATH"
  std::string outcome;  // "loaded", "rejected", "skipped"
  std::string reason;
};

struct LibraryReport {
  bool attempted = false;  // a search has run
  bool available = false;  // a library with every required symbol is loaded
  std::string path;        // absolute path of the loaded library
  std::string foundBy;     // source of the loaded candidate
  std::string reason;      // why not available (empty when available)
  std::string fix;         // what the user can do about it
  std::string version;     // best knowledge of the MSPTI generation, e.g. ">=26.1 (msptiActivityIsEnabled)"
  std::vector<LibraryCandidate> candidates;
  std::vector<std::string> resolved;
  std::vector<std::string> missingRequired;
  std::vector<std::string> missingOptional;
};

class MsptiLibrary {
 public:
  MsptiLibrary() = default;
  MsptiLibrary(const MsptiLibrary&) = delete;
  MsptiLibrary& operator=(const MsptiLibrary&) = delete;

  // Searches and loads once per process (later calls return the cached outcome; a failed search
  // is retried when the request or the environment changed). Never throws. False in a process
  // forked after the library was loaded (ForkGuard.h); report() then gives that reason.
  bool ensureLoaded(const LoadRequest& request);
  bool loaded() const { return loaded_.load(std::memory_order_acquire); }
  // Valid (and immutable) only when loaded() is true.
  const MsptiFunctions& functions() const { return fns_; }
  // Absolute path of the loaded library; "" when none. Lock-free (immutable once loaded).
  const std::string& loadedPath() const {
    static const std::string kNone;
    return loaded() ? loadedPath_ : kNone;
  }
  LibraryReport report() const;

  // The fork guard holds the lock across fork(), so a fork during the first load waits for it to
  // end and the child finds the lock free (report() takes it).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  bool tryCandidate(const std::string& path, const std::string& source, bool allowMissingProfapi);
  bool adoptHandle(void* handle, const std::string& path, const std::string& source);

  mutable std::mutex mutex_;
  std::atomic<bool> loaded_{false};
  MsptiFunctions fns_;
  std::string loadedPath_;
  LibraryReport report_;
  std::string searchKey_;  // inputs of the last failed search
};

// True when the ELF shared library at `path` exports the dynamic symbol `name` (read from the file's
// .dynsym; nothing is loaded). False for anything that is not a readable 64-bit ELF.
bool elfExportsSymbol(const std::string& path, const char* name);

}  // namespace torch_mspti
