// mspti_sdk_checker: compares the layout facts of our MSPTI declarations (our_layout.cpp) with
// those of a CANN SDK's headers (sdk_layout.cpp), both compiled into this executable. Run at
// build time by cmake/CannSdkCheck.cmake; a non-zero exit fails the build.
//
// Usage: mspti_sdk_checker <sdk header dir>   (the directory is only echoed in messages)
// Output on a mismatch, one line per fact:   msptiActivityKernel.correlationId: ours 28, SDK 30
#include <cstdio>
#include <cstring>

#include "layout_list.h"

extern "C" const TorchMsptiLayoutTable kTorchMsptiOurLayout;
extern "C" const TorchMsptiLayoutTable kTorchMsptiSdkLayout;

namespace {

void formatValue(long long value, char* out, size_t size) {
  if (value == TORCH_MSPTI_LAYOUT_ABSENT) {
    std::snprintf(out, size, "absent");
  } else {
    std::snprintf(out, size, "%lld", value);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* sdkDir = argc > 1 ? argv[1] : "(unknown)";
  const TorchMsptiLayoutTable& ours = kTorchMsptiOurLayout;
  const TorchMsptiLayoutTable& sdk = kTorchMsptiSdkLayout;
  if (ours.count != sdk.count) {
    std::fprintf(stderr, "torch-mspti SDK check: internal error, %lu facts for ours but %lu for the SDK\n", ours.count,
                 sdk.count);
    return 2;
  }

  int mismatches = 0;
  int optionalMissing = 0;
  for (unsigned long i = 0; i < ours.count; ++i) {
    const TorchMsptiLayoutEntry& a = ours.entries[i];
    const TorchMsptiLayoutEntry& b = sdk.entries[i];
    if (std::strcmp(a.name, b.name) != 0) {
      std::fprintf(stderr, "torch-mspti SDK check: internal error, fact %lu is %s vs %s\n", i, a.name, b.name);
      return 2;
    }
    if (a.value == b.value) {
      continue;
    }
    // An older SDK may lack what the plugin treats as optional: report, do not fail.
    if (b.value == TORCH_MSPTI_LAYOUT_ABSENT && a.optional) {
      if (optionalMissing++ == 0) {
        std::printf("torch-mspti SDK check: optional declarations this (older) SDK lacks:\n");
      }
      std::printf("  %s\n", a.name);
      continue;
    }
    if (mismatches++ == 0) {
      std::fprintf(stderr,
                   "torch-mspti SDK check FAILED: our MSPTI declarations (third_party/mspti/include/mspti) "
                   "do not match the CANN SDK headers in %s:\n",
                   sdkDir);
    }
    char oursText[32];
    char sdkText[32];
    formatValue(a.value, oursText, sizeof(oursText));
    formatValue(b.value, sdkText, sizeof(sdkText));
    std::fprintf(stderr, "  %s: ours %s, SDK %s\n", a.name, oursText, sdkText);
  }

  if (mismatches != 0) {
    std::fprintf(stderr,
                 "torch-mspti SDK check: %d mismatch(es). Fix the declarations in third_party/mspti to follow "
                 "the SDK (see docs/mspti.md section 3), or configure with -DTORCH_MSPTI_SDK_CHECK=OFF "
                 "to build without the check.\n",
                 mismatches);
    return 1;
  }
  std::printf("torch-mspti SDK check: our MSPTI declarations match the CANN SDK headers in %s (%lu facts)\n", sdkDir,
              ours.count);
  return 0;
}
