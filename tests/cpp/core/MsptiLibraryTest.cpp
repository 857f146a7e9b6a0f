// MsptiLibrary: why a candidate is refused, and where the search looks.
// A loaded library stays in the process for good (RTLD_NODELETE; a later search finds it as
// "already loaded"), so every scenario runs in a forked child (runInChild) with its own
// MsptiLibrary and hands that library's report back through a pipe.
#include <gtest/gtest.h>

#include <elf.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "MsptiLibrary.h"

namespace torch_mspti::test {
namespace {

namespace fs = std::filesystem;

// What a child reports back: the library report flattened into lines.
struct Outcome {
  bool loaded = false;
  std::string path, foundBy, reason, fix, extra;
  std::vector<LibraryCandidate> candidates;
  std::vector<std::string> missingRequired;
  bool crashed = false;

  const LibraryCandidate* candidate(const std::string& p) const {
    for (const auto& c : candidates)
      if (c.path == p) return &c;
    return nullptr;
  }
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? ' ' : c == '\t' ? ' ' : c;
  return out;
}

std::string serialize(const MsptiLibrary& lib, const std::string& extra) {
  const LibraryReport r = lib.report();
  std::ostringstream o;
  o << "loaded\t" << (lib.loaded() ? 1 : 0) << "\n"
    << "path\t" << escape(r.path) << "\n"
    << "foundBy\t" << escape(r.foundBy) << "\n"
    << "reason\t" << escape(r.reason) << "\n"
    << "fix\t" << escape(r.fix) << "\n"
    << "extra\t" << escape(extra) << "\n";
  for (const auto& c : r.candidates)
    o << "cand\t" << escape(c.path) << "\t" << escape(c.source) << "\t" << escape(c.outcome) << "\t" << escape(c.reason)
      << "\n";
  for (const auto& m : r.missingRequired) o << "missing\t" << m << "\n";
  return o.str();
}

Outcome parse(const std::string& text) {
  Outcome out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    std::string part;
    while (std::getline(ls, part, '\t')) f.push_back(part);
    if (f.empty()) continue;
    auto at = [&](size_t i) { return i < f.size() ? f[i] : std::string(); };
    if (f[0] == "loaded") out.loaded = at(1) == "1";
    else if (f[0] == "path") out.path = at(1);
    else if (f[0] == "foundBy") out.foundBy = at(1);
    else if (f[0] == "reason") out.reason = at(1);
    else if (f[0] == "fix") out.fix = at(1);
    else if (f[0] == "extra") out.extra = at(1);
    else if (f[0] == "cand") out.candidates.push_back({at(1), at(2), at(3), at(4)});
    else if (f[0] == "missing") out.missingRequired.push_back(at(1));
  }
  return out;
}

// Runs `scenario` in a forked child with a fresh MsptiLibrary and returns that library's report.
// `scenario` returns free text reported as Outcome::extra.
Outcome runInChild(const std::function<std::string(MsptiLibrary&)>& scenario) {
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string text;
    try {
      MsptiLibrary lib;
      const std::string extra = scenario(lib);
      text = serialize(lib, extra);
    } catch (const std::exception& e) {
      text = std::string("extra\tthrew: ") + e.what() + "\n";
    }
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = write(fds[1], text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Outcome out = parse(text);
  out.crashed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  EXPECT_FALSE(out.crashed) << "the child died (status " << status << ")";
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool mapped(const std::string& pathPart) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (contains(line, pathPart)) return true;
  return false;
}

class MsptiLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/torch_mspti_libtest_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    for (const char* v : {"TORCH_MSPTI_LIBRARY", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"}) unsetenv(v);
    // Keep the inherited LD_LIBRARY_PATH out of the search; each test sets what it needs.
    const char* ld = std::getenv("LD_LIBRARY_PATH");
    savedLd_ = ld ? ld : "";
    hadLd_ = ld != nullptr;
    setenv("LD_LIBRARY_PATH", "", 1);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    for (const char* v : {"TORCH_MSPTI_LIBRARY", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"}) unsetenv(v);
    if (hadLd_) setenv("LD_LIBRARY_PATH", savedLd_.c_str(), 1);
    else unsetenv("LD_LIBRARY_PATH");
  }

  std::string file(const std::string& rel) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    return p.string();
  }
  std::string copy(const std::string& from, const std::string& rel) {
    const std::string to = file(rel);
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    return to;
  }
  // A 64-byte ELF header: class, data, type and machine as given, nothing after it.
  std::string elfHeader(const std::string& rel, unsigned char cls, uint16_t type, uint16_t machine) {
    unsigned char h[64] = {};
    h[0] = 0x7f, h[1] = 'E', h[2] = 'L', h[3] = 'F';
    h[EI_CLASS] = cls;
    h[EI_DATA] = ELFDATA2LSB;
    h[EI_VERSION] = EV_CURRENT;
    h[16] = type & 0xff, h[17] = type >> 8;
    h[18] = machine & 0xff, h[19] = machine >> 8;
    const std::string p = file(rel);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(h), sizeof(h));
    return p;
  }
  // Loads with library_path = `path` in a child.
  Outcome explicitPath(const std::string& path, bool allowMissingProfapi = false) {
    return runInChild([path, allowMissingProfapi](MsptiLibrary& lib) {
      lib.ensureLoaded({path, allowMissingProfapi});
      return std::string();
    });
  }

  fs::path dir_;
  std::string savedLd_;
  bool hadLd_ = false;
};

TEST_F(MsptiLibraryTest, ExplicitSimulatorLoadsWithEveryRequiredSymbol) {
  const Outcome o = runInChild([](MsptiLibrary& lib) {
    lib.ensureLoaded({MSPTI_SIM_PATH, false});  // the simulator needs no libprofapi
    const MsptiFunctions& f = lib.functions();
    std::string extra;
    if (!f.subscribe || !f.unsubscribe || !f.registerCallbacks || !f.enable || !f.disable || !f.flushAll)
      extra += "required function missing;";
    if (!f.pushExternalCorrelationId || !f.popExternalCorrelationId || !f.isEnabled) extra += "optional missing;";
    if (lib.report().version.find(">=26.1") == std::string::npos) extra += "version: " + lib.report().version + ";";
    // Loaded once: a later request (another path) gets the same library.
    if (!lib.ensureLoaded({"/somewhere/else/libmspti.so", false}) || lib.loadedPath() != MSPTI_SIM_PATH)
      extra += "not cached;";
    return extra;
  });
  EXPECT_TRUE(o.loaded) << o.reason;
  EXPECT_EQ(o.path, MSPTI_SIM_PATH);
  EXPECT_EQ(o.foundBy, "explicit");
  EXPECT_EQ(o.reason, "");
  EXPECT_EQ(o.extra, "");
}

TEST_F(MsptiLibraryTest, ExplicitLibraryWithoutProfapiIsRefusedUnlessAllowed) {
  // Not the simulator: a real libmspti's initialiser would terminate the process without
  // libprofapi.so, so an explicit path is checked like a searched one.
  const std::string lib = copy(FAKE_LIBRARY_PATH, "sdk/libmspti.so");
  const Outcome refused = explicitPath(lib);
  EXPECT_FALSE(refused.loaded);
  EXPECT_TRUE(contains(refused.reason, "libprofapi.so cannot be found")) << refused.reason;
  EXPECT_TRUE(contains(refused.reason, "TORCH_MSPTI_ALLOW_MISSING_PROFAPI")) << refused.reason;
  const Outcome allowed = explicitPath(lib, /*allowMissingProfapi=*/true);
  EXPECT_FALSE(allowed.loaded);  // loaded, but it is not an MSPTI
  EXPECT_TRUE(contains(allowed.reason, "lacks required MSPTI symbols")) << allowed.reason;
}

TEST_F(MsptiLibraryTest, ExplicitPathThatDoesNotExist) {
  const std::string p = (dir_ / "nope" / "libmspti.so").string();
  const Outcome o = explicitPath(p);
  EXPECT_FALSE(o.loaded);
  EXPECT_TRUE(contains(o.reason, "TORCH_MSPTI_LIBRARY=" + p)) << o.reason;
  EXPECT_TRUE(contains(o.reason, "no such file")) << o.reason;
  EXPECT_FALSE(o.fix.empty());
  ASSERT_EQ(o.candidates.size(), 1u);  // an explicit choice is never replaced by a search
  EXPECT_EQ(o.candidates[0].source, "explicit");
}

TEST_F(MsptiLibraryTest, ExplicitPathThatIsADirectory) {
  fs::create_directories(dir_ / "libmspti.so");
  const Outcome o = explicitPath((dir_ / "libmspti.so").string());
  EXPECT_FALSE(o.loaded);
  EXPECT_TRUE(contains(o.reason, "is a directory")) << o.reason;
}

TEST_F(MsptiLibraryTest, ExplicitPathThatIsNotElf) {
  const std::string p = file("libmspti.so");
  std::ofstream(p) << "INPUT(-lmspti)\n";  // a linker script, as some distributions ship
  const Outcome o = explicitPath(p);
  EXPECT_FALSE(o.loaded);
  EXPECT_TRUE(contains(o.reason, "not an ELF shared library")) << o.reason;
  const std::string empty = file("empty/libmspti.so");
  std::ofstream{empty};
  EXPECT_TRUE(contains(explicitPath(empty).reason, "not an ELF shared library"));
}

TEST_F(MsptiLibraryTest, ExplicitPathBuiltForAnotherArchitecture) {
#if defined(__x86_64__)
  const uint16_t foreign = EM_AARCH64;
  const char *want = "aarch64", *own = "x86_64";
#elif defined(__aarch64__)
  const uint16_t foreign = EM_X86_64;
  const char *want = "x86_64", *own = "aarch64";
#else
  GTEST_SKIP() << "architecture check only on x86_64 / aarch64";
#endif
  const Outcome o = explicitPath(elfHeader("libmspti.so", ELFCLASS64, ET_DYN, foreign));
  EXPECT_FALSE(o.loaded);
  EXPECT_TRUE(contains(o.reason, std::string("built for ") + want)) << o.reason;
  EXPECT_TRUE(contains(o.reason, std::string("this process is ") + own)) << o.reason;
}

TEST_F(MsptiLibraryTest, ExplicitPath32BitOrNotSharedElf) {
  const Outcome o32 = explicitPath(elfHeader("a/libmspti.so", ELFCLASS32, ET_DYN, EM_386));
  EXPECT_TRUE(contains(o32.reason, "32-bit")) << o32.reason;
  const Outcome exec = explicitPath(elfHeader("b/libmspti.so", ELFCLASS64, ET_REL, EM_X86_64));
  EXPECT_TRUE(contains(exec.reason, "not a shared library")) << exec.reason;
}

TEST_F(MsptiLibraryTest, ExplicitLibraryMissingRequiredSymbols) {
  const Outcome o = explicitPath(FAKE_LIBRARY_PATH, /*allowMissingProfapi=*/true);
  EXPECT_FALSE(o.loaded);
  EXPECT_TRUE(contains(o.reason, "lacks required MSPTI symbols")) << o.reason;
  for (const char* sym : {"msptiSubscribe", "msptiUnsubscribe", "msptiActivityRegisterCallbacks", "msptiActivityEnable",
                          "msptiActivityDisable", "msptiActivityFlushAll"}) {
    EXPECT_TRUE(contains(o.reason, sym)) << sym << " not named in: " << o.reason;
  }
  EXPECT_EQ(o.missingRequired.size(), 6u);
}

TEST_F(MsptiLibraryTest, RelativeExplicitPathIsMadeAbsolute) {
  const std::string lib = copy(MSPTI_SIM_PATH, "rel/libmspti.so");
  const fs::path dir = dir_;
  const Outcome o = runInChild([dir](MsptiLibrary& l) {
    fs::current_path(dir);
    l.ensureLoaded({"rel/../rel/libmspti.so", false});
    return std::string();
  });
  EXPECT_TRUE(o.loaded) << o.reason;
  EXPECT_EQ(o.path, lib);
  const LibraryCandidate* c = o.candidate(lib);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(contains(c->reason, "relative path 'rel/../rel/libmspti.so' resolved against the current directory"))
      << c->reason;
}

TEST_F(MsptiLibraryTest, SearchRejectsAscendHomeWithoutProfapiAndNeverOpensIt) {
  // Not the simulator (which needs no CANN and is recognised by its msptiSimGeneration export).
  const std::string lib = copy(FAKE_LIBRARY_PATH, "cann/lib64/libmspti.so");
  setenv("ASCEND_HOME_PATH", (dir_ / "cann").c_str(), 1);
  const std::string dirText = dir_.string();
  const Outcome o = runInChild([dirText](MsptiLibrary& lib) {
    lib.ensureLoaded({});
    return mapped(dirText) ? std::string("candidate was mapped into the process") : std::string();
  });
  EXPECT_FALSE(o.loaded);
  EXPECT_EQ(o.extra, "");
  const LibraryCandidate* c = o.candidate(lib);
  ASSERT_NE(c, nullptr) << "the candidate was not considered";
  EXPECT_EQ(c->source, "ASCEND_HOME_PATH");
  EXPECT_EQ(c->outcome, "rejected");
  EXPECT_TRUE(contains(c->reason, "libprofapi.so")) << c->reason;
  EXPECT_TRUE(contains(o.reason, "not loadable")) << o.reason;
}

TEST_F(MsptiLibraryTest, SearchLoadsFromAscendHomeWhenProfapiIsPresent) {
  const std::string lib = copy(MSPTI_SIM_PATH, "cann/lib64/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cann/lib64/libprofapi.so");
  setenv("ASCEND_HOME_PATH", (dir_ / "cann").c_str(), 1);
  const Outcome o = runInChild([](MsptiLibrary& lib) {
    lib.ensureLoaded({});
    return std::string();
  });
  EXPECT_TRUE(o.loaded) << o.reason;
  EXPECT_EQ(o.path, lib);
  EXPECT_EQ(o.foundBy, "ASCEND_HOME_PATH");
}

TEST_F(MsptiLibraryTest, SearchFindsToolsMsptiLib64UnderAscendHome) {
  const std::string lib = copy(MSPTI_SIM_PATH, "cann/tools/mspti/lib64/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cann/lib64/libprofapi.so");
  setenv("ASCEND_HOME_PATH", (dir_ / "cann").c_str(), 1);
  const Outcome o = runInChild([](MsptiLibrary& lib) {
    lib.ensureLoaded({});
    return std::string();
  });
  EXPECT_TRUE(o.loaded) << o.reason;
  EXPECT_EQ(o.path, lib);
}

TEST_F(MsptiLibraryTest, RelativeAndEmptyLdLibraryPathEntriesAreNeverSearched) {
  // The working directory and a relative directory both hold a loadable libmspti + libprofapi;
  // only the absolute entry may be used.
  copy(MSPTI_SIM_PATH, "cwd/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cwd/libprofapi.so");
  copy(MSPTI_SIM_PATH, "cwd/rel/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cwd/rel/libprofapi.so");
  const std::string abs = copy(MSPTI_SIM_PATH, "abs/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "abs/libprofapi.so");
  const fs::path cwd = dir_ / "cwd";
  const std::string ld = "::rel:.:" + (dir_ / "abs").string() + ":";
  const Outcome o = runInChild([cwd, ld](MsptiLibrary& lib) {
    fs::current_path(cwd);
    setenv("LD_LIBRARY_PATH", ld.c_str(), 1);
    lib.ensureLoaded({});
    return std::string();
  });
  EXPECT_TRUE(o.loaded) << o.reason;
  EXPECT_EQ(o.path, abs);
  EXPECT_EQ(o.foundBy, "LD_LIBRARY_PATH");
  for (const auto& c : o.candidates) {
    if (c.source != "LD_LIBRARY_PATH") continue;
    if (c.path.empty()) {
      // an empty or relative entry: reported as never searched, with no path
      EXPECT_EQ(c.outcome, "skipped");
      EXPECT_TRUE(contains(c.reason, "never searched")) << c.reason;
      continue;
    }
    EXPECT_EQ(c.path.rfind('/', 0), 0u) << "relative candidate " << c.path;
    EXPECT_NE(c.path, "/libmspti.so");
    EXPECT_FALSE(contains(c.path, "/cwd/")) << c.path;
  }
}

TEST_F(MsptiLibraryTest, OnlyRelativeLdLibraryPathEntriesFindNothing) {
  copy(MSPTI_SIM_PATH, "cwd/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cwd/libprofapi.so");
  const fs::path cwd = dir_ / "cwd";
  const std::string dirText = dir_.string();
  const Outcome o = runInChild([cwd, dirText](MsptiLibrary& lib) {
    fs::current_path(cwd);
    setenv("LD_LIBRARY_PATH", ":.::", 1);
    lib.ensureLoaded({});
    return mapped(dirText) ? std::string("a relative candidate was mapped") : std::string();
  });
  EXPECT_FALSE(o.loaded);
  EXPECT_EQ(o.extra, "");
  EXPECT_TRUE(contains(o.reason, "not found")) << o.reason;
}

TEST_F(MsptiLibraryTest, RelativeAscendHomeIsSkipped) {
  copy(MSPTI_SIM_PATH, "cwd/cann/lib64/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cwd/cann/lib64/libprofapi.so");
  const fs::path cwd = dir_ / "cwd";
  const Outcome o = runInChild([cwd](MsptiLibrary& lib) {
    fs::current_path(cwd);
    setenv("ASCEND_HOME_PATH", "cann", 1);
    lib.ensureLoaded({});
    return std::string();
  });
  EXPECT_FALSE(o.loaded);
  // Reported with no path (the report never holds a relative path); the reason names the value.
  const LibraryCandidate* c = nullptr;
  for (const auto& cand : o.candidates)
    if (cand.source == "ASCEND_HOME_PATH") c = &cand;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->outcome, "skipped");
  EXPECT_EQ(c->path, "");
  EXPECT_TRUE(contains(c->reason, "'cann' is not an absolute path")) << c->reason;
}

TEST_F(MsptiLibraryTest, FailedSearchIsRetriedWhenTheEnvironmentChanges) {
  const std::string lib = copy(MSPTI_SIM_PATH, "cann/lib64/libmspti.so");
  copy(FAKE_LIBRARY_PATH, "cann/lib64/libprofapi.so");
  const std::string home = (dir_ / "cann").string();
  const Outcome o = runInChild([home](MsptiLibrary& lib) {
    std::string extra;
    if (lib.ensureLoaded({})) extra += "loaded without a CANN environment;";
    if (lib.ensureLoaded({})) extra += "second attempt loaded;";
    setenv("ASCEND_HOME_PATH", home.c_str(), 1);
    if (!lib.ensureLoaded({})) extra += "not retried after ASCEND_HOME_PATH changed;";
    return extra;
  });
  EXPECT_EQ(o.extra, "");
  EXPECT_TRUE(o.loaded);
  EXPECT_EQ(o.path, lib);
}

}  // namespace
}  // namespace torch_mspti::test
