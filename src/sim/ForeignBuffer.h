// Fault injection msptiSimCompleteForeignBuffer: another tool's buffer completed into the
// plugin's callback. MSPTI keeps one callback pair per process (mspti.md 2.3): a tool that
// requested a buffer before someone else re-registered the callbacks gets that buffer completed
// into the new owner's complete callback. The buffer belongs to the simulator: it holds `kernels`
// valid KERNEL records (fresh correlation ids that become no thread's current id, name
// "ForeignKernel", type KERNEL_AICORE, times just before now, physical device of logical 0,
// stream 1) and a canary after its `size` bytes. After the callback returns the simulator checks
// the canary (a callback that wrote past the valid records, or freed the buffer, is caught: a
// changed canary aborts with a message, a free shows as a use-after-free/double free under ASan)
// and frees the buffer itself.
#pragma once

#include <cstdint>

#include "ActivityBuffers.h"
#include "CorrelationIds.h"
#include "Environment.h"
#include "NameTable.h"
#include "SimCounters.h"

namespace torch_mspti::sim {

// `fixedId` != 0 (option foreign_correlation_id): every record carries that id instead of a fresh
// one, and each kernel is preceded by its launch (an EXTERNAL_CORRELATION record, CUSTOM0 external
// id 1, and a RUNTIME_API "LaunchKernelV2" record): a foreign or misread buffer with a junk id.
// 0 when delivered, -1 when no callbacks were ever registered (nothing is allocated then).
int completeForeignBuffer(ActivityBuffers& buffers, CorrelationIds& ids, NameTable& names,
                          const Environment& environment, SimCounters& counters, uint32_t kernels, bool onNewThread,
                          uint64_t fixedId = 0);

}  // namespace torch_mspti::sim
