#include "PeerBackends.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <fstream>
#include <regex>

namespace torch_mspti {
namespace {

// Symbols only torch_npu's MSPTI backend defines (mangled names of its profiler class).
const char* const kBackendSymbols[] = {
    "_ZTVN9torch_npu8profiler24MsptiActivityProfilerPocE",  // vtable of MsptiActivityProfilerPoc
    "_ZTVN9torch_npu8profiler21MsptiActivityProfilerE",     // vtable of its session class
};

int findLibrary(struct dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  if (std::strcmp(base, "libtorch_npu.so") == 0) {
    *static_cast<std::string*>(out) = name;
    return 1;
  }
  return 0;
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

PeerBackend detectPeerBackend() {
  PeerBackend p;
  std::string path;
  dl_iterate_phdr(&findLibrary, &path);
  if (path.empty()) return p;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return p;
  bool found = false;
  for (const char* sym : kBackendSymbols) found = found || dlsym(h, sym) != nullptr;
  dlclose(h);  // only drops the reference RTLD_NOLOAD added
  if (!found) return p;
  p.present = true;
  p.library = path;
  p.version = readVersion(path);
  p.description = "torch_npu's built-in MSPTI backend" +
                  (p.version.empty() ? std::string() : " (torch_npu " + p.version + ")");
  return p;
}

}  // namespace torch_mspti
