// Which kernel an op execution of the simulated NPU launches. Common ops get the names of the
// kernels CANN runs for them (MatMulV2, Add, ReduceSum, ...) and the MSPTI kernel type of the unit
// that runs them; every other op gets a name derived from its aten name in CamelCase
// (aten::native_dropout_backward -> NativeDropoutBackward) on the vector unit. README.md lists them.
#include "NpuSimTensor.h"

#include <cctype>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace torch_mspti::sim {
namespace {

constexpr const char* kCube = "KERNEL_AICORE";   // matrix (cube) unit
constexpr const char* kVector = "KERNEL_AIVEC";  // vector unit
constexpr const char* kCpu = "KERNEL_AICPU";     // device-side AI CPU

struct Entry {
  const char* name;
  const char* type;
};

// Keyed by the aten base name without namespace and without the in-place underscore.
const std::unordered_map<std::string, Entry>& table() {
  static const auto* t = new std::unordered_map<std::string, Entry>{
      {"mm", {"MatMulV2", kCube}},
      {"matmul", {"MatMulV2", kCube}},
      {"addmm", {"MatMulV2", kCube}},
      {"linear", {"MatMulV2", kCube}},
      {"addmv", {"MatMulV2", kCube}},
      {"mv", {"MatMulV2", kCube}},
      {"dot", {"MatMulV2", kCube}},
      {"addbmm", {"MatMulV2", kCube}},
      {"bmm", {"BatchMatMulV2", kCube}},
      {"baddbmm", {"BatchMatMulV2", kCube}},
      {"convolution", {"Conv2D", kCube}},
      {"_convolution", {"Conv2D", kCube}},
      {"convolution_backward", {"Conv2DBackpropInput", kCube}},
      {"add", {"Add", kVector}},
      {"sub", {"Sub", kVector}},
      {"rsub", {"Sub", kVector}},
      {"mul", {"Mul", kVector}},
      {"div", {"RealDiv", kVector}},
      {"neg", {"Neg", kVector}},
      {"abs", {"Abs", kVector}},
      {"exp", {"Exp", kVector}},
      {"log", {"Log", kVector}},
      {"sqrt", {"Sqrt", kVector}},
      {"rsqrt", {"Rsqrt", kVector}},
      {"pow", {"Pow", kVector}},
      {"reciprocal", {"Reciprocal", kVector}},
      {"maximum", {"Maximum", kVector}},
      {"minimum", {"Minimum", kVector}},
      {"addcmul", {"Addcmul", kVector}},
      {"addcdiv", {"Addcdiv", kVector}},
      {"lerp", {"Lerp", kVector}},
      {"sum", {"ReduceSum", kVector}},
      {"mean", {"ReduceMean", kVector}},
      {"amax", {"ReduceMax", kVector}},
      {"max", {"ReduceMax", kVector}},
      {"amin", {"ReduceMin", kVector}},
      {"min", {"ReduceMin", kVector}},
      {"prod", {"ReduceProd", kVector}},
      {"argmax", {"ArgMaxV2", kVector}},
      {"argmin", {"ArgMin", kVector}},
      {"linalg_vector_norm", {"LpNormV2", kVector}},
      {"norm", {"LpNormV2", kVector}},
      {"relu", {"Relu", kVector}},
      {"threshold_backward", {"ReluGrad", kVector}},
      {"gelu", {"Gelu", kVector}},
      {"gelu_backward", {"GeluGrad", kVector}},
      {"silu", {"Swish", kVector}},
      {"sigmoid", {"Sigmoid", kVector}},
      {"sigmoid_backward", {"SigmoidGrad", kVector}},
      {"tanh", {"Tanh", kVector}},
      {"tanh_backward", {"TanhGrad", kVector}},
      {"_softmax", {"SoftmaxV2", kVector}},
      {"_softmax_backward_data", {"SoftmaxGrad", kVector}},
      {"_log_softmax", {"LogSoftmaxV2", kVector}},
      {"_log_softmax_backward_data", {"LogSoftmaxGrad", kVector}},
      {"native_layer_norm", {"LayerNormV3", kVector}},
      {"native_layer_norm_backward", {"LayerNormGrad", kVector}},
      {"native_dropout", {"DropOutDoMask", kVector}},
      {"native_dropout_backward", {"DropOutDoMask", kVector}},
      {"bernoulli", {"DropOutGenMaskV3", kVector}},
      {"nll_loss_forward", {"NLLLoss", kVector}},
      {"nll_loss_backward", {"NLLLossGrad", kVector}},
      {"mse_loss", {"MseLoss", kVector}},
      {"mse_loss_backward", {"MseLossGrad", kVector}},
      {"fill", {"Fill", kVector}},
      {"zero", {"ZerosLike", kVector}},
      {"normal", {"StatelessRandomNormalV2", kCpu}},
      {"uniform", {"StatelessRandomUniformV2", kCpu}},
      {"random", {"StatelessRandomUniformInt", kCpu}},
      {"randperm", {"RandpermV2", kCpu}},
      {"cat", {"ConcatD", kVector}},
      {"stack", {"Pack", kVector}},
      {"index_select", {"GatherV2", kVector}},
      {"embedding", {"GatherV2", kVector}},
      {"embedding_dense_backward", {"EmbeddingDenseGrad", kVector}},
      {"gather", {"GatherElements", kVector}},
      {"scatter", {"ScatterElements", kVector}},
      {"index", {"Index", kCpu}},
      {"index_put", {"IndexPutV2", kCpu}},
      {"masked_fill", {"MaskedFill", kVector}},
      {"where", {"SelectV2", kVector}},
      {"clamp", {"ClipByValue", kVector}},
      {"clamp_min", {"Maximum", kVector}},
      {"clamp_max", {"Minimum", kVector}},
      {"eq", {"Equal", kVector}},
      {"ne", {"NotEqual", kVector}},
      {"lt", {"Less", kVector}},
      {"le", {"LessEqual", kVector}},
      {"gt", {"Greater", kVector}},
      {"ge", {"GreaterEqual", kVector}},
      {"logical_not", {"LogicalNot", kVector}},
      {"sort", {"Sort", kVector}},
      {"topk", {"TopKV2", kVector}},
      {"cumsum", {"Cumsum", kVector}},
      {"arange", {"Range", kCpu}},
      {"nonzero", {"NonZero", kCpu}},
      {"_local_scalar_dense", {"MemcpyAsync", kCpu}},
      {"triu", {"Triu", kVector}},
      {"tril", {"Tril", kVector}},
      {"flip", {"ReverseV2", kVector}},
      {"repeat", {"Tile", kVector}},
  };
  return *t;
}

std::string camel(const std::string& base) {
  std::string out;
  bool upper = true;
  for (char c : base) {
    if (c == '_' || c == '.') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out.empty() ? std::string("Kernel") : out;
}

}  // namespace

const char* intern(const std::string& s) {
  static std::mutex mu;
  static auto* pool = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> g(mu);
  return pool->insert(s).first->c_str();
}

KernelInfo kernel_for_op(const std::string& op_name) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, KernelInfo>();
  {
    std::lock_guard<std::mutex> g(mu);
    if (auto it = cache->find(op_name); it != cache->end()) return it->second;
  }
  std::string base = op_name;
  if (auto p = base.find("::"); p != std::string::npos) base = base.substr(p + 2);
  if (base.size() > 1 && base.back() == '_' && base[base.size() - 2] != '_') base.pop_back();
  KernelInfo info{nullptr, kVector, true};
  if (auto it = table().find(base); it != table().end()) {
    info.name = it->second.name;
    info.type = it->second.type;
  } else {
    info.name = intern(camel(base));
  }
  std::lock_guard<std::mutex> g(mu);
  cache->emplace(op_name, info);
  return info;
}

}  // namespace torch_mspti::sim
