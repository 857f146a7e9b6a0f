# Cross toolchain: Linux aarch64 with Debian's cross compiler (apt-get install g++-aarch64-linux-gnu)
# and its target libraries under /usr/aarch64-linux-gnu. Executables (ctest, custom commands that
# run built tools) go through qemu-user: apt-get install qemu-user.
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DTORCH_MSPTI_SIM_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(TORCH_MSPTI_CROSS_TRIPLE aarch64-linux-gnu)
set(TORCH_MSPTI_CROSS_SYSROOT /usr/${TORCH_MSPTI_CROSS_TRIPLE})

set(CMAKE_C_COMPILER ${TORCH_MSPTI_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${TORCH_MSPTI_CROSS_TRIPLE}-g++)

# Libraries and headers come from the target tree only; programs (cmake, ninja) from the host.
set(CMAKE_FIND_ROOT_PATH ${TORCH_MSPTI_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(TORCH_MSPTI_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(TORCH_MSPTI_QEMU_AARCH64)
  # -L: where qemu finds the target's dynamic loader and shared libraries.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${TORCH_MSPTI_QEMU_AARCH64};-L;${TORCH_MSPTI_CROSS_SYSROOT}")
endif()
