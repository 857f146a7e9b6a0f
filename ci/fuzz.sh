#!/usr/bin/env bash
# Fuzzes the MSPTI record walker (MsptiRecordWalker::walk) with libFuzzer + ASan + UBSan.
#
#   bash ci/fuzz.sh                      # CI: 60 s
#   FUZZ_SECONDS=600 bash ci/fuzz.sh     # longer, on demand
#
# The target (tests/fuzz/walker_fuzzer.cpp) compiles only src/core/MsptiRecordWalker.cpp,
# src/core/KindHandlers.cpp (each kind's read function), src/core/NameTable.cpp and
# src/core/Utf8.cpp, which need the MSPTI declarations, the kind tables and the standard library,
# not torch; its oracle's layout numbers come from
# tests/cpp/core/DocumentedLayout.h.
# libFuzzer needs clang: Debian's clang plus its compiler-rt (libclang-rt-<ver>-dev, which holds
# libclang_rt.fuzzer/asan/ubsan) are installed when missing. The checked-in seeds
# (tests/fuzz/corpus, regenerate with tests/fuzz/make_corpus.py) are read only; what the fuzzer
# finds goes to build/fuzz/corpus, crash inputs to build/fuzz/artifacts/. Any finding fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
OUT=build/fuzz
t0=$(date +%s)

if ! command -v clang++ >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends clang
fi
CLANG_MAJOR=$(clang++ -dumpversion | cut -d. -f1)
# The fuzzer runtime lives in compiler-rt, a separate package on Debian 12.
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer,address,undefined - -o /dev/null 2>/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends "libclang-rt-${CLANG_MAJOR}-dev"
fi
echo "fuzz: $(clang++ --version | head -n 1)"

mkdir -p "$OUT/corpus" "$OUT/artifacts"
clang++ -std=c++20 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I src/core -I src/common -I third_party/mspti/include -I tests/cpp/core \
  src/core/MsptiRecordWalker.cpp src/core/KindHandlers.cpp src/core/NameTable.cpp src/core/Utf8.cpp \
  tests/fuzz/walker_fuzzer.cpp \
  -o "$OUT/walker_fuzzer"
t1=$(date +%s)
echo "fuzz: built $OUT/walker_fuzzer in $((t1 - t0)) s"

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# The valid_* seeds must walk completely (a corpus out of step with the record layout).
TORCH_MSPTI_FUZZ_EXPECT_VALID=1 "$OUT/walker_fuzzer" tests/fuzz/corpus/valid_*.bin
# Every seed once, then fuzz.
"$OUT/walker_fuzzer" -runs=0 tests/fuzz/corpus
"$OUT/walker_fuzzer" "$OUT/corpus" tests/fuzz/corpus \
  -max_total_time="$FUZZ_SECONDS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$OUT/artifacts/" -print_final_stats=1
t2=$(date +%s)
echo "fuzz: ${FUZZ_SECONDS} s requested, fuzzing took $((t2 - t1)) s, total $((t2 - t0)) s; corpus now $(ls "$OUT/corpus" | wc -l) inputs; no findings"
