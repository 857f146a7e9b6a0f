// Shared helpers of the C++ benchmarks: clocks, argument parsing, a tiny JSON emitter, the
// simulator's control functions, and the process probes of BenchProbe.cpp (operator new byte
// tracking, off unless a benchmark turns it on around the code it measures; per-thread counts of
// heap and lock calls, always on).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "PluginContext.h"
#include "mspti_sim_control.h"

namespace bench {

inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// --key=value arguments.
class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) throw std::runtime_error("bad argument " + a);
      auto eq = a.find('=');
      kv_[a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
          eq == std::string::npos ? "1" : a.substr(eq + 1);
    }
  }
  int64_t i(const std::string& k, int64_t def) const {
    auto it = kv_.find(k);
    return it == kv_.end() ? def : std::stoll(it->second);
  }
  std::vector<int64_t> list(const std::string& k, std::vector<int64_t> def) const {
    auto it = kv_.find(k);
    if (it == kv_.end()) return def;
    std::vector<int64_t> out;
    std::stringstream ss(it->second);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
    return out;
  }

 private:
  std::map<std::string, std::string> kv_;
};

// Minimal JSON: objects of numbers, strings, arrays of numbers and nested objects.
class Json {
 public:
  Json& num(const std::string& k, double v) {
    sep();
    os_ << '"' << k << "\":" << fmt(v);
    return *this;
  }
  Json& str(const std::string& k, const std::string& v) {
    sep();
    os_ << '"' << k << "\":\"" << v << '"';
    return *this;
  }
  Json& arr(const std::string& k, const std::vector<double>& v) {
    sep();
    os_ << '"' << k << "\":[";
    for (size_t i = 0; i < v.size(); ++i) os_ << (i ? "," : "") << fmt(v[i]);
    os_ << ']';
    return *this;
  }
  Json& obj(const std::string& k, const Json& j) {
    sep();
    os_ << '"' << k << "\":" << j.str();
    return *this;
  }
  std::string str() const { return "{" + os_.str() + "}"; }

 private:
  static std::string fmt(double v) {
    char b[64];
    std::snprintf(b, sizeof(b), "%.17g", v);
    return b;
  }
  void sep() {
    if (!first_) os_ << ',';
    first_ = false;
  }
  std::ostringstream os_;
  bool first_ = true;
};

// The simulator's msptiSim* functions (src/sim/include/mspti_sim_control.h).
using Sim = mspti_sim::Control;

// Loads the simulator through the process context's MsptiLibrary (library_path =
// MSPTI_SIM_PATH) and resolves its control API from that copy (BenchSim.cpp). Each binary that
// compiles BenchSim.cpp (the executable, libbench_pushpop.so) has its own core and context.
const Sim& loadSim();
torch_mspti::PluginContext& context();

// Allocation tracker (BenchProbe.cpp, the executable only): bytes currently allocated through
// operator new while tracking, and the peak.
void trackAllocations(bool on);
int64_t trackedBytes();
int64_t trackedPeak();
void resetTrackedPeak();

// Calls made by the calling thread since it started (BenchProbe.cpp replaces these functions for
// the whole process, libraries included): heap = malloc, calloc, realloc, memalign,
// posix_memalign, aligned_alloc, valloc (operator new included: it calls malloc); locks =
// pthread_mutex_lock/trylock and pthread_rwlock_rdlock/wrlock (std::mutex and std::shared_mutex
// included). Handed to libbench_pushpop.so as function pointers, so it reads the executable's
// counters.
struct ThreadCalls {
  uint64_t heap = 0;
  uint64_t locks = 0;
};
using ThreadCallsFn = ThreadCalls (*)();
ThreadCalls threadCalls();

}  // namespace bench
