#include "MsptiLibrary.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ForkGuard.h"

namespace torch_mspti {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLibName = "libmspti.so";
constexpr const char* kProfapiName = "libprofapi.so";
constexpr const char* kFixNotFound = "source CANN's set_env.sh or set TORCH_MSPTI_LIBRARY to the path of libmspti.so";

#if defined(__x86_64__)
constexpr uint16_t kOwnMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kOwnMachine = EM_AARCH64;
#else
constexpr uint16_t kOwnMachine = EM_NONE;
#endif

std::string machineName(uint16_t m) {
  switch (m) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_RISCV: return "riscv";
    default: return fmt::format("ELF machine {}", m);
  }
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Explains why `path` cannot be a loadable shared library for this process, or "" if it may be.
std::string inspectFile(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return "no such file";
  if (fs::is_directory(st)) return "is a directory, not a library file";
  if (!fs::is_regular_file(st)) return "not a regular file";
  std::ifstream in(path, std::ios::binary);
  unsigned char h[20] = {};
  in.read(reinterpret_cast<char*>(h), sizeof(h));
  if (in.gcount() < static_cast<std::streamsize>(sizeof(h)) || std::memcmp(h, ELFMAG, SELFMAG) != 0)
    return "not an ELF shared library";
  if (h[EI_CLASS] != ELFCLASS64) return "a 32-bit ELF file; this process is 64-bit";
  if (h[EI_DATA] != ELFDATA2LSB) return "a big-endian ELF file";
  const uint16_t type = static_cast<uint16_t>(h[16] | (h[17] << 8));
  const uint16_t machine = static_cast<uint16_t>(h[18] | (h[19] << 8));
  if (type != ET_DYN) return "an ELF file that is not a shared library";
  if (kOwnMachine != EM_NONE && machine != kOwnMachine)
    return fmt::format("built for {}, this process is {}", machineName(machine), machineName(kOwnMachine));
  return "";
}

// LD_LIBRARY_PATH's entries, split at ':' (none when it is unset or empty).
std::vector<std::string> ldLibraryPathEntries() {
  std::vector<std::string> entries;
  const std::string raw = envOr("LD_LIBRARY_PATH");
  if (raw.empty()) return entries;
  size_t pos = 0;
  while (pos <= raw.size()) {
    size_t next = raw.find(':', pos);
    if (next == std::string::npos) next = raw.size();
    entries.push_back(raw.substr(pos, next - pos));
    pos = next + 1;
  }
  return entries;
}

// Empty and relative entries mean "the current directory" to the loader: never searched.
bool searchableDir(const std::string& dir) { return !dir.empty() && dir[0] == '/'; }

std::vector<std::string> absoluteLdLibraryPathDirs() {
  std::vector<std::string> dirs;
  for (std::string& dir : ldLibraryPathEntries())
    if (searchableDir(dir)) dirs.push_back(std::move(dir));
  return dirs;
}

// libmspti resolves its CANN dependencies as $ASCEND_HOME_PATH/lib64/<so>, else by bare name
// (mspti.md 6, item 7). Returns where libprofapi would be found, or "".
std::string findProfapi() {
  if (void* h = dlopen(kProfapiName, RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(h);  // only drops the reference NOLOAD added
    return "already loaded";
  }
  std::vector<std::string> dirs;
  const std::string home = envOr("ASCEND_HOME_PATH");
  if (!home.empty() && home[0] == '/') dirs.push_back(home + "/lib64");  // never a relative directory
  for (auto& d : absoluteLdLibraryPathDirs()) dirs.push_back(d);
  for (const auto& d : dirs) {
    std::string p = d + "/" + kProfapiName;
    if (inspectFile(p).empty()) return p;
  }
  return "";
}

// Versioned CANN roots, newest first: /usr/local/Ascend/cann-<version>.
std::vector<std::string> versionedCannRoots(const std::string& base) {
  std::vector<std::pair<std::vector<int>, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("cann-", 0) != 0) continue;
    std::vector<int> key;
    int cur = -1;
    for (char c : name.substr(5)) {
      if (c >= '0' && c <= '9') {
        cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
      } else if (cur >= 0) {
        key.push_back(cur);
        cur = -1;
      }
    }
    if (cur >= 0) key.push_back(cur);
    found.emplace_back(key, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  if (!found.empty()) out.push_back(found.front().second);
  return out;
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, LibraryReport& report, bool required) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (!sym) {
    (required ? report.missingRequired : report.missingOptional).push_back(name);
    return false;
  }
  slot = reinterpret_cast<Fn>(sym);
  report.resolved.push_back(name);
  return true;
}

std::string deriveVersion(const MsptiFunctions& f, const std::string& path) {
  std::string gen;
  // Master builds after 2026-05-28 have IsEnabled while their version.info still says 26.0.0 (mspti.md 8).
  if (f.isEnabled) gen = ">=26.1 generation (has msptiActivityIsEnabled; master builds may call themselves 26.0.0)";
  else if (f.pushExternalCorrelationId) gen = ">=8.1.RC1, <26.1 (external correlation, no msptiActivityIsEnabled)";
  else gen = "8.0.RC3 generation (no external correlation)";
  // CANN >= 8.5 installs under /usr/local/Ascend/cann-<version> (mspti.md 1).
  const auto at = path.find("/cann-");
  if (at != std::string::npos) {
    const auto end = path.find('/', at + 1);
    gen += fmt::format("; installed in {}", path.substr(at + 1, end == std::string::npos ? end : end - at - 1));
  }
  return gen;
}

}  // namespace

LibraryReport MsptiLibrary::report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LibraryReport r = report_;
  if (forkedFromMsptiParent()) {
    r.available = false;
    r.reason = kForkedChildReason;
    r.fix = kForkedChildFix;
  }
  return r;
}

bool MsptiLibrary::adoptHandle(void* handle, const std::string& path, const std::string& source) {
  LibraryReport r = report_;
  r.resolved.clear();
  r.missingRequired.clear();
  r.missingOptional.clear();
  MsptiFunctions f;
  resolve(handle, "msptiSubscribe", f.subscribe, r, true);
  resolve(handle, "msptiUnsubscribe", f.unsubscribe, r, true);
  resolve(handle, "msptiActivityRegisterCallbacks", f.registerCallbacks, r, true);
  resolve(handle, "msptiActivityEnable", f.enable, r, true);
  resolve(handle, "msptiActivityDisable", f.disable, r, true);
  resolve(handle, "msptiActivityFlushAll", f.flushAll, r, true);
  resolve(handle, "msptiActivityPushExternalCorrelationId", f.pushExternalCorrelationId, r, false);
  resolve(handle, "msptiActivityPopExternalCorrelationId", f.popExternalCorrelationId, r, false);
  resolve(handle, "msptiActivityIsEnabled", f.isEnabled, r, false);
  resolve(handle, "msptiActivityEnableMarkerDomain", f.enableMarkerDomain, r, false);
  resolve(handle, "msptiActivityDisableMarkerDomain", f.disableMarkerDomain, r, false);
  // Reported for the generation table, not used: the plugin walks buffers itself and flushes on
  // its own schedule (MsptiRecordWalker.h, DrainPolicy.h).
  for (const char* name : {"msptiActivityFlushPeriod", "msptiActivityGetNextRecord"}) {
    dlerror();
    (dlsym(handle, name) ? r.resolved : r.missingOptional).push_back(name);
  }
  // A domain switched off that cannot be switched on again would outlive the session: both or neither.
  if (!f.enableMarkerDomain || !f.disableMarkerDomain) {
    f.enableMarkerDomain = nullptr;
    f.disableMarkerDomain = nullptr;
  }
  // Push without pop (or the reverse) cannot keep MSPTI's stack balanced: use neither.
  if (!f.pushExternalCorrelationId || !f.popExternalCorrelationId) {
    f.pushExternalCorrelationId = nullptr;
    f.popExternalCorrelationId = nullptr;
  }
  if (!r.missingRequired.empty()) {
    std::string missing;
    for (const auto& m : r.missingRequired) missing += (missing.empty() ? "" : ", ") + m;
    r.candidates.push_back({path, source, "rejected", "missing required symbols: " + missing});
    r.reason = fmt::format("{} lacks required MSPTI symbols ({})", path, missing);
    r.fix = "point TORCH_MSPTI_LIBRARY at CANN's tools/mspti/lib64/libmspti.so (CANN 8.0.RC3 or newer)";
    report_ = r;
    // The handle stays open (never dlclose a library that may have started threads).
    return false;
  }
  r.candidates.push_back({path, source, "loaded", ""});
  r.available = true;
  r.path = path;
  r.foundBy = source;
  r.reason.clear();
  r.fix.clear();
  r.version = deriveVersion(f, path);
  report_ = r;
  fns_ = f;
  loadedPath_ = path;
  loaded_.store(true, std::memory_order_release);
  noteMsptiLoaded();
  return true;
}

bool MsptiLibrary::tryCandidate(const std::string& path, const std::string& source, bool allowMissingProfapi) {
  std::string why = inspectFile(path);
  if (!why.empty()) {
    report_.candidates.push_back({path, source, why == "no such file" ? "skipped" : "rejected", why});
    return false;
  }
  // The simulator needs no CANN; anything else may be a real libmspti, whose static initialiser
  // terminates the process when libprofapi cannot be loaded (mspti.md 6, item 7).
  if (!allowMissingProfapi && !elfExportsSymbol(path, "msptiSimGeneration") && findProfapi().empty()) {
    report_.candidates.push_back(
        {path, source, "rejected",
         "libprofapi.so cannot be found ($ASCEND_HOME_PATH/lib64 or LD_LIBRARY_PATH); loading a real libmspti "
         "without it would terminate the process (set allow_missing_profapi / TORCH_MSPTI_ALLOW_MISSING_PROFAPI=1 "
         "to load it anyway, e.g. for an MSPTI implementation that does not need CANN)"});
    return false;
  }
  dlerror();
  // RTLD_NODELETE: the library must outlive any accidental dlclose, since MSPTI keeps our callbacks.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* err = dlerror();
    report_.candidates.push_back({path, source, "rejected", fmt::format("dlopen failed: {}", err ? err : "unknown")});
    return false;
  }
  return adoptHandle(handle, path, source);
}

bool MsptiLibrary::ensureLoaded(const LoadRequest& request) {
  if (forkedFromMsptiParent()) return false;  // MSPTI's threads did not survive the fork (ForkGuard.h)
  if (loaded()) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded()) return true;
  const std::string& explicitPath = request.explicitPath;
  const std::string key = explicitPath + (request.allowMissingProfapi ? "\n1\n" : "\n0\n") + envOr("ASCEND_HOME_PATH") +
                          '\n' + envOr("ASCEND_TOOLKIT_HOME") + '\n' + envOr("LD_LIBRARY_PATH") + '\n' +
                          envOr("TORCH_MSPTI_LIBRARY");
  if (report_.attempted && key == searchKey_) return false;
  searchKey_ = key;
  report_ = LibraryReport{};
  report_.attempted = true;
  try {
    if (!explicitPath.empty()) {
      std::error_code ec;
      std::string abs = fs::absolute(explicitPath, ec).lexically_normal().string();
      if (ec) abs = explicitPath;
      const bool relative = explicitPath[0] != '/';
      const bool ok = tryCandidate(abs, "explicit", request.allowMissingProfapi);
      if (relative && !report_.candidates.empty() && !ec) {
        // Used as given, but resolved once against the current directory: say so.
        std::string& why = report_.candidates.back().reason;
        why = fmt::format("relative path '{}' resolved against the current directory to {}{}{}", explicitPath, abs,
                          why.empty() ? "" : "; ", why);
      }
      if (ok) return true;
      if (report_.reason.empty()) {
        report_.reason = fmt::format("TORCH_MSPTI_LIBRARY={}: {}", explicitPath, report_.candidates.back().reason);
        report_.fix =
            "set TORCH_MSPTI_LIBRARY to the absolute path of libmspti.so (CANN tools/mspti/lib64), or unset it to "
            "search";
      }
      return false;  // an explicit choice is never silently replaced by another library
    }
    dlerror();
    if (void* h = dlopen(kLibName, RTLD_NOW | RTLD_NOLOAD)) {
      Dl_info info{};
      std::string path = kLibName;
      void* sym = dlsym(h, "msptiActivityEnable");
      if (sym && dladdr(sym, &info) && info.dli_fname) path = info.dli_fname;
      return adoptHandle(h, path, "already-loaded");
    }
    // Paths in the report are absolute or empty: this entry names no file.
    report_.candidates.push_back({"", "already-loaded", "skipped", "no libmspti.so loaded in this process"});

    std::vector<std::pair<std::string, std::string>> roots;
    for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"}) {
      std::string root = envOr(var);
      if (!root.empty() && root[0] == '/') roots.emplace_back(root, var);
      else if (!root.empty())
        report_.candidates.push_back(
            {"", var, "skipped", fmt::format("'{}' is not an absolute path: never searched", root)});
    }
    roots.emplace_back("/usr/local/Ascend/cann", "default CANN root");
    for (const auto& r : versionedCannRoots("/usr/local/Ascend")) roots.emplace_back(r, "newest versioned CANN root");
    roots.emplace_back("/usr/local/Ascend/ascend-toolkit/latest", "default CANN root (before 8.5)");
    for (const auto& [root, source] : roots) {
      for (const char* sub : {"/lib64/", "/tools/mspti/lib64/"}) {
        if (tryCandidate(root + sub + kLibName, source, /*allowMissingProfapi=*/false)) return true;
        if (!report_.reason.empty()) return false;  // loaded but unusable: stop here
      }
    }
    for (const std::string& dir : ldLibraryPathEntries())
      if (!searchableDir(dir))
        report_.candidates.push_back(
            {"", "LD_LIBRARY_PATH", "skipped",
             fmt::format("entry '{}' is empty or relative (the current directory): never searched", dir)});
    for (const auto& dir : absoluteLdLibraryPathDirs()) {
      if (tryCandidate(dir + "/" + kLibName, "LD_LIBRARY_PATH", /*allowMissingProfapi=*/false)) return true;
      if (!report_.reason.empty()) return false;
    }
    bool anyRejected = false;
    for (const auto& c : report_.candidates) anyRejected |= c.outcome == "rejected";
    report_.reason = anyRejected ? "libmspti.so found but not loadable (see candidates)" : "libmspti.so not found";
    report_.fix = kFixNotFound;
    // No explicit path, yet the variable is set now: it was set after import, when the settings
    // were read (os.environ changes reach getenv). Say that, not "set TORCH_MSPTI_LIBRARY".
    if (const std::string late = envOr("TORCH_MSPTI_LIBRARY"); !late.empty()) {
      report_.reason += fmt::format(
          "; TORCH_MSPTI_LIBRARY={} was set after torch_mspti was imported and is ignored (the variable is read "
          "only at import): call torch_mspti.use_library('{}') instead, before the profile",
          late, late);
      report_.fix = fmt::format(
          "call torch_mspti.use_library('{}') before profiling, or set TORCH_MSPTI_LIBRARY before importing torch",
          late);
    }
  } catch (const std::exception& e) {
    report_.reason = fmt::format("library search failed: {}", e.what());
    report_.fix = kFixNotFound;
  } catch (...) {
    report_.reason = "library search failed with an unknown exception";
    report_.fix = kFixNotFound;
  }
  return false;
}

bool elfExportsSymbol(const std::string& path, const char* name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shnum > 4096)
    return false;
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  in.seekg(static_cast<std::streamoff>(eh.e_shoff));
  if (!in.read(reinterpret_cast<char*>(sections.data()),
               static_cast<std::streamsize>(sections.size() * sizeof(Elf64_Shdr))))
    return false;
  const std::string wanted(name);
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= sections.size() || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (strtab.sh_size > (64u << 20) || sh.sh_size > (64u << 20)) return false;
    std::string names(strtab.sh_size, '\0');
    std::vector<Elf64_Sym> syms(sh.sh_size / sizeof(Elf64_Sym));
    in.seekg(static_cast<std::streamoff>(strtab.sh_offset));
    if (!in.read(names.data(), static_cast<std::streamsize>(names.size()))) return false;
    in.seekg(static_cast<std::streamoff>(sh.sh_offset));
    if (!in.read(reinterpret_cast<char*>(syms.data()), static_cast<std::streamsize>(syms.size() * sizeof(Elf64_Sym))))
      return false;
    for (const Elf64_Sym& sym : syms) {
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= names.size()) continue;
      if (std::strncmp(names.data() + sym.st_name, wanted.c_str(), names.size() - sym.st_name) == 0) return true;
    }
  }
  return false;
}

}  // namespace torch_mspti
