// Measures the CANN SDK's MSPTI headers. Compiled with only the SDK's header directory
// (tools/mspti/include or include/mspti) on the include path, never ours; nothing from CANN is
// linked.
#define TORCH_MSPTI_LAYOUT_TABLE kTorchMsptiSdkLayout
#include "layout_probe_begin.h"

namespace torch_mspti_probed {
#include <mspti.h>
// The umbrella header includes these in every known release; include them explicitly in case
// one does not (each has its own include guard).
#if __has_include(<mspti_result.h>)
#include <mspti_result.h>
#endif
#if __has_include(<mspti_callback.h>)
#include <mspti_callback.h>
#endif
#if __has_include(<mspti_activity.h>)
#include <mspti_activity.h>
#endif
}  // namespace torch_mspti_probed

#include "layout_probe_end.h"
