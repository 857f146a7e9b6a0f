#include "PeerBackends.h"

#include <link.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <regex>

namespace torch_mspti {
namespace {

// The released libtorch_npu.so exports no symbol of its MSPTI backend (its vtables and typeinfo
// are hidden), but RTTI keeps the class's mangled name as a string in a read-only segment.
constexpr char kBackendRtti[] = "N9torch_npu8profiler24MsptiActivityProfilerPocE";

struct Scan {
  std::string library;
  bool backend = false;
};

int visit(struct dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  if (std::strcmp(base, "libtorch_npu.so") != 0) return 0;
  auto* scan = static_cast<Scan*>(out);
  scan->library = name;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) & ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & (PF_W | PF_X)) || !(ph.p_flags & PF_R)) continue;
    const void* segment = reinterpret_cast<const void*>(info->dlpi_addr + ph.p_vaddr);
    if (memmem(segment, ph.p_filesz, kBackendRtti, sizeof(kBackendRtti) - 1)) {
      scan->backend = true;
      break;
    }
  }
  return 1;
}

// The loader's counters of objects added and removed: the scan is repeated only when they move.
int counters(struct dl_phdr_info* info, size_t size, void* out) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    auto* c = static_cast<std::pair<unsigned long long, unsigned long long>*>(out);
    *c = {info->dlpi_adds, info->dlpi_subs};
  }
  return 1;  // the first object carries them
}

std::string readVersion(const std::string& library) {
  // .../torch_npu/lib/libtorch_npu.so -> .../torch_npu/version.py: __version__ = '2.13.0'
  const auto lib = library.rfind("/lib/");
  if (lib == std::string::npos) return "";
  std::ifstream in(library.substr(0, lib) + "/version.py");
  std::string line;
  static const std::regex kVersion(R"(^__version__\s*=\s*['"]([^'"]+)['"])");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, kVersion)) return m[1];
  return "";
}

}  // namespace

namespace {
std::mutex gPeerMutex;  // detectPeerBackend's cache (process-wide: PluginContext.h says why)
}  // namespace

void lockPeerBackendsForFork() { gPeerMutex.lock(); }
void unlockPeerBackendsAfterFork() { gPeerMutex.unlock(); }

PeerBackend detectPeerBackend() {
  static std::pair<unsigned long long, unsigned long long> seen{~0ull, ~0ull};
  static PeerBackend cached;
  std::lock_guard<std::mutex> lock(gPeerMutex);
  std::pair<unsigned long long, unsigned long long> now{0, 0};
  dl_iterate_phdr(&counters, &now);
  if (now == seen && now.first != 0) return cached;
  seen = now;
  Scan scan;
  dl_iterate_phdr(&visit, &scan);
  PeerBackend p;
  if (scan.backend) {
    p.present = true;
    p.library = scan.library;
    p.version = readVersion(scan.library);
    p.description =
        "torch_npu's built-in MSPTI backend" + (p.version.empty() ? std::string() : " (torch_npu " + p.version + ")");
  }
  cached = p;
  return p;
}

}  // namespace torch_mspti
