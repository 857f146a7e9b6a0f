// npu_sim::reduce_op_value: the RedOpType of a c10d ReduceOp as the dispatcher hands it to the
// simulated hccl backend's c10d kernels (torch_mspti/sim/hccl_ops.py). The kernels receive it as a
// TorchScript object of class c10d.ReduceOp; torch 2.13 gives that class an op() method, torch 2.7
// gives it none, so its value is read here, in C++, on every torch (docs/kineto.md 7).
#include <torch/library.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_mspti::sim {
namespace {

int64_t reduce_op_value(const c10::intrusive_ptr<c10d::ReduceOp>& op) { return static_cast<int64_t>(op->op_); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(npu_sim, m) {
  m.def("reduce_op_value(__torch__.torch.classes.c10d.ReduceOp op) -> int", &reduce_op_value);
}

}  // namespace torch_mspti::sim
