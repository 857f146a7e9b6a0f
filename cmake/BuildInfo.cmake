# Writes torch_mspti/_build_info.py (from src/torch_mspti/_build_info.py.in) with the torch
# version the extension is compiled against, and installs it next to _C. The package __init__
# reads it *before* importing _C, so a torch of another minor gives a clear ImportError
# (torch_mspti._torch_version.check_torch_version) instead of an undefined-symbol error.
#
# Needs TORCH_VERSION_FULL and TORCH_CXX11_ABI: include after cmake/FindTorchForPlugin.cmake.
if(NOT DEFINED TORCH_VERSION_FULL OR NOT DEFINED TORCH_CXX11_ABI)
  message(FATAL_ERROR "torch-mspti: include cmake/FindTorchForPlugin.cmake before cmake/BuildInfo.cmake")
endif()

set(TORCH_MSPTI_BUILD_INFO "${CMAKE_BINARY_DIR}/python/torch_mspti/_build_info.py")
configure_file("${PROJECT_SOURCE_DIR}/src/torch_mspti/_build_info.py.in" "${TORCH_MSPTI_BUILD_INFO}" @ONLY)

if(TORCH_MSPTI_PYTHON)
  install(FILES "${TORCH_MSPTI_BUILD_INFO}" DESTINATION torch_mspti)
endif()
