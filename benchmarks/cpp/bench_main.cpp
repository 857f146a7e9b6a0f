// torch_mspti_bench <pushpop|drain|process|walk> [--key=value ...]
// Each subcommand prints one JSON object (raw samples per arm; benchmarks/run.py computes
// medians and spreads) on stdout and exits non-zero when a completeness check fails. pushpop
// runs in libbench_pushpop.so (its own copy of the core, built like the _C module).
#include <iostream>

#include "BenchCommon.h"

extern "C" int torch_mspti_bench_pushpop(int argc, char** argv, bench::ThreadCallsFn calls);
int runDrain(const bench::Args& args);
int runProcess(const bench::Args& args);
int runWalk(const bench::Args& args);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: torch_mspti_bench <pushpop|drain|process|walk> [--key=value ...]\n";
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    if (cmd == "pushpop") return torch_mspti_bench_pushpop(argc - 2, argv + 2, &bench::threadCalls);
    bench::Args args(argc, argv, 2);
    if (cmd == "drain") return runDrain(args);
    if (cmd == "process") return runProcess(args);
    if (cmd == "walk") return runWalk(args);
    std::cerr << "unknown benchmark " << cmd << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "torch_mspti_bench: " << e.what() << "\n";
    return 1;
  }
}
