# Locate the torch the build interpreter imports, and describe only what the plugin uses from it:
# libtorch_cpu + libc10, the ATen/torch headers and the kineto and fmt headers shipped in the wheel.
# find_package(Torch) is avoided on purpose: on CUDA wheels its TorchConfig.cmake requires the CUDA
# toolkit (nvcc and CUDA's CMake modules), which a CPU-only build host does not have. Works for the pip layout (torch/lib, torch/include) and the
# conda-forge split layout ($PREFIX/lib, $PREFIX/include).
#
# Produces: INTERFACE target torch_cpu_min; TORCH_VERSION_FULL, TORCH_VERSION_MAJOR_MINOR.
if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)
endif()

# TORCH_DEVICE_BACKEND_AUTOLOAD=0: an installed torch-mspti (or torch_npu) must not be
# autoloaded inside the build's own probe.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 "${Python_EXECUTABLE}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch.compiled_with_cxx11_abi())); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_probe
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "torch-mspti: `import torch` failed in ${Python_EXECUTABLE}. "
                      "Install a supported torch first (2.7 ... 2.15; see the README's support table), e.g. pip install torch==2.13.0")
endif()
string(REPLACE "\n" ";" _torch_probe "${_torch_probe}")
list(GET _torch_probe 0 TORCH_ROOT)
list(GET _torch_probe 1 TORCH_CXX11_ABI)
list(GET _torch_probe 2 TORCH_VERSION_FULL)
string(REGEX MATCH "^[0-9]+\\.[0-9]+" TORCH_VERSION_MAJOR_MINOR "${TORCH_VERSION_FULL}")
message(STATUS "torch-mspti: torch ${TORCH_VERSION_FULL} at ${TORCH_ROOT} (cxx11 abi ${TORCH_CXX11_ABI})")

find_library(TORCH_CPU_LIB torch_cpu HINTS "${TORCH_ROOT}/lib" REQUIRED)
find_library(C10_LIB c10 HINTS "${TORCH_ROOT}/lib" REQUIRED)
find_path(TORCH_INC torch/csrc/autograd/profiler_kineto.h HINTS "${TORCH_ROOT}/include" REQUIRED)
find_path(KINETO_INC IActivityProfiler.h HINTS "${TORCH_ROOT}/include/kineto" "${TORCH_INC}/kineto" REQUIRED)
# fmt: kineto's GenericTraceActivity.h uses it inline. The torch 2.13 and 2.14 wheels ship its
# headers (torch/include/fmt); the torch 2.7.1 wheel does not, so fmt then comes from the system
# (Debian's libfmt-dev, conda's fmt) or TORCH_MSPTI_FMT_INCLUDE_DIR. Any fmt >= 9 serves: it is compiled
# header-only into our objects.
set(TORCH_MSPTI_FMT_INCLUDE_DIR "" CACHE PATH "Directory holding fmt/format.h when torch ships none (torch 2.7)")
find_path(FMT_INC fmt/format.h HINTS "${TORCH_MSPTI_FMT_INCLUDE_DIR}" "${TORCH_ROOT}/include" "${TORCH_INC}")
if(NOT FMT_INC)
  message(FATAL_ERROR
    "torch-mspti: torch ${TORCH_VERSION_FULL} ships no fmt headers (fmt/format.h), which its kineto headers "
    "need. Install fmt >= 9 and build again: apt install libfmt-dev (Debian/Ubuntu), dnf install fmt-devel, "
    "conda install fmt; or point the build at a copy: "
    "pip install --no-build-isolation -C cmake.define.TORCH_MSPTI_FMT_INCLUDE_DIR=/path/to/fmt/include .")
endif()

add_library(torch_cpu_min INTERFACE)
target_link_libraries(torch_cpu_min INTERFACE "${TORCH_CPU_LIB}" "${C10_LIB}")
target_include_directories(torch_cpu_min SYSTEM INTERFACE "${TORCH_INC}" "${TORCH_INC}/torch/csrc/api/include"
                                                          "${KINETO_INC}" "${FMT_INC}")
# fmt is not exported by libtorch: compile it header-only into our objects.
target_compile_definitions(torch_cpu_min INTERFACE USE_KINETO FMT_HEADER_ONLY=1 _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})

# What differs between the supported torch minors: one probe, one generated header.
include("${CMAKE_CURRENT_LIST_DIR}/TorchFeatures.cmake")
target_link_libraries(torch_cpu_min INTERFACE torch_mspti_torch_features)
