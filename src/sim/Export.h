// Marks the C entry points that libmspti_sim.so exports. Everything else is hidden
// (-fvisibility=hidden plus the exports.map version script), like the real library, which
// exports only its mspti* API (mspti.md 2).
#pragma once

#define TORCH_MSPTI_SIM_EXPORT extern "C" __attribute__((visibility("default")))
