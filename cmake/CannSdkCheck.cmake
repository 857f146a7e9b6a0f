# CANN-aware build: when a CANN SDK with MSPTI headers is present at configure time, check that
# our declarations (third_party/mspti/include/mspti) agree with the SDK's on every size, offset
# and enum value the plugin relies on (list: third_party/mspti/sdk_check/layout_list.h). A
# mismatch fails the build and names each differing fact. Without an SDK the check is skipped,
# with a message. Nothing from CANN is ever linked: only the SDK's headers are compiled, into
# one object of the checker executable.
#
# SDK root: -DTORCH_MSPTI_CANN_HOME=<root>, else the ASCEND_HOME_PATH environment variable (set by
# CANN's set_env.sh). Headers: <root>/tools/mspti/include or <root>/include/mspti (mspti.md 1).
# Target: mspti_sdk_check (part of ALL), runs the checker `mspti_sdk_checker` once per change.
# Include after add_subdirectory(third_party/mspti).
option(TORCH_MSPTI_SDK_CHECK "Check third_party/mspti against the CANN SDK's MSPTI headers when an SDK is found" ON)
set(TORCH_MSPTI_CANN_HOME "" CACHE PATH "CANN SDK root for the MSPTI header check (default: \$ENV{ASCEND_HOME_PATH})")

set(_cann_root "")
set(_cann_from "")
if(TORCH_MSPTI_CANN_HOME)
  set(_cann_root "${TORCH_MSPTI_CANN_HOME}")
  set(_cann_from "TORCH_MSPTI_CANN_HOME")
elseif(DEFINED ENV{ASCEND_HOME_PATH} AND NOT "$ENV{ASCEND_HOME_PATH}" STREQUAL "")
  set(_cann_root "$ENV{ASCEND_HOME_PATH}")
  set(_cann_from "ASCEND_HOME_PATH")
endif()

set(TORCH_MSPTI_SDK_INCLUDE_DIR "")
if(_cann_root)
  foreach(_dir "${_cann_root}/tools/mspti/include" "${_cann_root}/include/mspti")
    if(EXISTS "${_dir}/mspti.h" AND EXISTS "${_dir}/mspti_activity.h")
      set(TORCH_MSPTI_SDK_INCLUDE_DIR "${_dir}")
      break()
    endif()
  endforeach()
endif()

if(NOT TORCH_MSPTI_SDK_CHECK)
  message(STATUS "torch-mspti: MSPTI SDK header check disabled (TORCH_MSPTI_SDK_CHECK=OFF)")
elseif(NOT _cann_root)
  message(STATUS "torch-mspti: no CANN SDK (ASCEND_HOME_PATH unset, TORCH_MSPTI_CANN_HOME empty): "
                 "skipped the check of third_party/mspti against the SDK's MSPTI headers")
elseif(NOT TORCH_MSPTI_SDK_INCLUDE_DIR)
  message(STATUS "torch-mspti: ${_cann_from}=${_cann_root} has no MSPTI headers (tools/mspti/include or "
                 "include/mspti): skipped the check of third_party/mspti against the SDK")
else()
  message(STATUS "torch-mspti: checking third_party/mspti against the CANN SDK headers in "
                 "${TORCH_MSPTI_SDK_INCLUDE_DIR} (from ${_cann_from}; target mspti_sdk_check)")
  set(_check_src "${PROJECT_SOURCE_DIR}/third_party/mspti/sdk_check")

  # Two objects that each see one set of declarations (both declare the same C names).
  add_library(mspti_layout_ours OBJECT "${_check_src}/our_layout.cpp")
  target_include_directories(mspti_layout_ours PRIVATE "${PROJECT_SOURCE_DIR}/third_party/mspti/include")
  add_library(mspti_layout_sdk OBJECT "${_check_src}/sdk_layout.cpp")
  target_include_directories(mspti_layout_sdk PRIVATE "${TORCH_MSPTI_SDK_INCLUDE_DIR}")
  foreach(_t mspti_layout_ours mspti_layout_sdk)
    target_include_directories(${_t} PRIVATE "${_check_src}")
    # MSPTI's own header triggers -Wpacked-not-aligned (msptiActivityMarker::objectId, mspti.md 3.1).
    target_compile_options(${_t} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-packed-not-aligned>)
  endforeach()

  add_executable(mspti_sdk_checker "${_check_src}/sdk_check.cpp")
  target_include_directories(mspti_sdk_checker PRIVATE "${_check_src}")
  target_link_libraries(mspti_sdk_checker PRIVATE mspti_layout_ours mspti_layout_sdk)

  set(_stamp "${CMAKE_CURRENT_BINARY_DIR}/mspti_sdk_check.stamp")
  if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    message(STATUS "torch-mspti: cross-compiling without CMAKE_CROSSCOMPILING_EMULATOR: "
                   "the SDK check is compiled but not run")
    add_custom_target(mspti_sdk_check ALL DEPENDS mspti_sdk_checker)
  else()
    # A custom command's COMMAND naming an executable target runs it under
    # CMAKE_CROSSCOMPILING_EMULATOR when cross-compiling.
    add_custom_command(
      OUTPUT "${_stamp}"
      COMMAND mspti_sdk_checker "${TORCH_MSPTI_SDK_INCLUDE_DIR}"
      COMMAND "${CMAKE_COMMAND}" -E touch "${_stamp}"
      DEPENDS mspti_sdk_checker
      COMMENT "Checking third_party/mspti against the CANN SDK's MSPTI headers"
      VERBATIM)
    add_custom_target(mspti_sdk_check ALL DEPENDS "${_stamp}")
  endif()
endif()
