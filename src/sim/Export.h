// Marks the C entry points that libmspti_sim.so exports. Everything else is hidden
// (-fvisibility=hidden plus a per-generation linker version script, see CMakeLists.txt), like the real library, which
// exports only its mspti* API (mspti.md 2).
#pragma once

#define TORCH_MSPTI_SIM_EXPORT extern "C" __attribute__((visibility("default")))
