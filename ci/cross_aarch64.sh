#!/usr/bin/env bash
# Cross-builds the MSPTI simulator (libmspti_sim.so) and the portable ABI smoke test
# (tests/cpp/portable) for Linux aarch64 with Debian's cross compiler, and runs the test under
# qemu-user through ctest (CMAKE_CROSSCOMPILING_EMULATOR, set by the toolchain file).
# The C++ core and the GoogleTest suites need torch / gtest for aarch64 and are not cross-built.
#
# Also runs the CANN-SDK header check for aarch64 (under qemu), against a stand-in SDK made
# of a copy of our own headers: it proves the check's two layout tables agree on that target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD=build/aarch64
JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # qemu-user provides /usr/bin/qemu-aarch64 (qemu-user-static would give qemu-aarch64-static).
  $SUDO apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu qemu-user
fi
aarch64-linux-gnu-g++ --version | head -n 1
qemu-aarch64 --version | head -n 1

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

fake_sdk="$PWD/$BUILD/fake-cann"
rm -rf "$fake_sdk"
mkdir -p "$fake_sdk/tools/mspti/include"
cp third_party/mspti/include/mspti/*.h "$fake_sdk/tools/mspti/include/"

cmake -S . -B "$BUILD" "${generator[@]}" \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTORCH_MSPTI_SIM_ONLY=ON \
  -DTORCH_MSPTI_CANN_HOME="$fake_sdk"
cmake --build "$BUILD" --parallel "$JOBS"

for bin in "$BUILD/src/sim/libmspti_sim.so" "$BUILD/tests/cpp/portable/mspti_abi_smoke"; do
  machine=$(readelf -h "$bin" | awk -F: '/Machine/ {gsub(/^ +/, "", $2); print $2}')
  echo "$bin: $machine"
  if [ "$machine" != "AArch64" ]; then
    echo "ERROR: $bin was not built for aarch64" >&2
    exit 1
  fi
done
glibc=$(aarch64-linux-gnu-objdump -T "$BUILD/src/sim/libmspti_sim.so" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -Vu | tail -n 1)
glibcxx=$(aarch64-linux-gnu-objdump -T "$BUILD/src/sim/libmspti_sim.so" | grep -o 'GLIBCXX_[0-9][0-9.]*' | sort -Vu | tail -n 1)
echo "aarch64 libmspti_sim.so needs ${glibc} and ${glibcxx} (built against Debian's cross libc/libstdc++)"
ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -V
