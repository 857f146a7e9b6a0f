// The MSPTI generation this build of the simulator stands for (mspti.md 8).
//
// One set of sources is compiled once per generation with TORCH_MSPTI_SIM_GENERATION set to
//   80  CANN 8.0.RC3   kinds 1..3 (MARKER, KERNEL, API); no external correlation, FlushPeriod or
//                      IsEnabled                                    -> libmspti_sim_8_0_rc3.so
//   81  CANN 8.1.RC1   + kinds 4..8, Push/PopExternalCorrelationId, FlushPeriod -> libmspti_sim_8_1.so
//   82  CANN 8.2.RC1   + COMMUNICATION (9)                          -> libmspti_sim_8_2.so
//   260 MindStudio 26.0 + kinds 10..12, MSPTI_ERROR_WITHOUT_LD_PRELOAD for HCCL/MEMORY/MEMSET/MEMCPY
//                      (no IsEnabled, Disable pulls nothing)        -> libmspti_sim_26_0.so
//   261 26.1 branch    + msptiActivityIsEnabled, Disable pulls device data (halProfDataFlush)
//                                                                   -> libmspti_sim.so (default)
// The exported symbol set follows the generation too: the entry points a generation lacks are
// not compiled (MsptiExports.cpp) and not listed in its linker version script (CMakeLists.txt).
#pragma once

#ifndef TORCH_MSPTI_SIM_GENERATION
#define TORCH_MSPTI_SIM_GENERATION 261
#endif

#define TORCH_MSPTI_SIM_HAS_EXTERNAL_CORRELATION (TORCH_MSPTI_SIM_GENERATION >= 81)
#define TORCH_MSPTI_SIM_HAS_FLUSH_PERIOD (TORCH_MSPTI_SIM_GENERATION >= 81)
#define TORCH_MSPTI_SIM_HAS_IS_ENABLED (TORCH_MSPTI_SIM_GENERATION >= 261)
// msptiActivityEnable/DisableMarkerDomain: documented from CANN 8.3.RC1, so in 26.x (mspti.md 8).
#define TORCH_MSPTI_SIM_HAS_MARKER_DOMAINS (TORCH_MSPTI_SIM_GENERATION >= 260)

namespace torch_mspti::sim {

inline constexpr int kGeneration = TORCH_MSPTI_SIM_GENERATION;
static_assert(kGeneration == 80 || kGeneration == 81 || kGeneration == 82 || kGeneration == 260 || kGeneration == 261,
              "TORCH_MSPTI_SIM_GENERATION must be 80, 81, 82, 260 or 261");

// MSPTI_ERROR_WITHOUT_LD_PRELOAD (6) exists only from 26.0 (mspti.md 2.1).
inline constexpr bool kLdPreloadRule = kGeneration >= 260;
// (The kinds a generation knows, which Enable/Disable accept, come from the kind table:
// src/common/ActivityKinds.h gives each kind's first generation.)
// Disable's driver flush (halProfDataFlush) came with the 26.1 branch (mspti.md 2.3, 8).
inline constexpr bool kDisablePullsByDefault = kGeneration >= 261;

// Before 26.0 a device became known only through the aclrtSetDevice that a preloaded libmspti
// interposes (device discovery through libprofapi came with 26.0; mspti.md 5.5): without the
// preload such a library never writes a KERNEL or COMMUNICATION record.
inline constexpr bool kKernelsNeedPreloadByDefault = kGeneration < 260;

// "8.0.RC3", "8.1", "8.2", "26.0", "26.1".
inline constexpr const char* generationName() {
  return kGeneration == 80    ? "8.0.RC3"
         : kGeneration == 81  ? "8.1"
         : kGeneration == 82  ? "8.2"
         : kGeneration == 260 ? "26.0"
                              : "26.1";
}

}  // namespace torch_mspti::sim
