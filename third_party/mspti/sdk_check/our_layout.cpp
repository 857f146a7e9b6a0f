// Measures torch-mspti's own MSPTI declarations (third_party/mspti/include). Their static_asserts
// run here too, so a declaration that contradicts mspti.md 3.4 fails before any comparison.
#define TORCH_MSPTI_LAYOUT_TABLE kTorchMsptiOurLayout
#include "layout_probe_begin.h"

namespace torch_mspti_probed {
#include "mspti/mspti.h"
}  // namespace torch_mspti_probed

#include "layout_probe_end.h"
