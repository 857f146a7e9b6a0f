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
      {"triu", {"Triu", kVector}},
      {"tril", {"Tril", kVector}},
      {"flip", {"ReverseV2", kVector}},
      {"repeat", {"Tile", kVector}},
      {"sgn", {"Sign", kVector}},
      {"all", {"ReduceAll", kVector}},
      {"any", {"ReduceAny", kVector}},
      // Pooling (adaptive max pooling runs as a max pool with argmax, as torch_npu does).
      {"max_pool2d_with_indices", {"MaxPoolWithArgmaxV1", kVector}},
      {"max_pool2d_with_indices_backward", {"MaxPoolGradWithArgmaxV1", kVector}},
      {"adaptive_max_pool2d", {"MaxPoolWithArgmaxV1", kVector}},
      {"adaptive_max_pool2d_backward", {"MaxPoolGradWithArgmaxV1", kVector}},
      {"max_pool3d_with_indices", {"MaxPool3D", kVector}},
      {"max_pool3d_with_indices_backward", {"MaxPool3DGrad", kVector}},
      {"avg_pool2d", {"AvgPoolV2", kVector}},
      {"avg_pool2d_backward", {"AvgPoolV2Grad", kVector}},
      {"avg_pool3d", {"AvgPool3D", kVector}},
      {"avg_pool3d_backward", {"AvgPool3DGrad", kVector}},
      {"_adaptive_avg_pool2d", {"AdaptiveAvgPool2d", kVector}},
      {"_adaptive_avg_pool2d_backward", {"AdaptiveAvgPool2dGrad", kVector}},
      {"_adaptive_avg_pool3d", {"AdaptiveAvgPool3d", kVector}},
      {"_adaptive_avg_pool3d_backward", {"AdaptiveAvgPool3dGrad", kVector}},
      // Normalisation (batch norm: batch_norm_kernels below).
      {"native_group_norm", {"GroupNorm", kVector}},
      {"native_group_norm_backward", {"GroupNormGrad", kVector}},
      // Losses and embeddings.
      {"smooth_l1_loss", {"SmoothL1LossV2", kVector}},
      {"smooth_l1_loss_backward", {"SmoothL1LossGradV2", kVector}},
      {"binary_cross_entropy", {"BinaryCrossEntropy", kVector}},
      {"binary_cross_entropy_backward", {"BinaryCrossEntropyGrad", kVector}},
      {"binary_cross_entropy_with_logits", {"SigmoidCrossEntropyWithLogitsV2", kVector}},
      {"log_sigmoid_forward", {"LogSigmoid", kVector}},
      {"log_sigmoid_backward", {"LogSigmoidGrad", kVector}},
      {"_ctc_loss", {"CTCLossV2", kVector}},
      {"_ctc_loss_backward", {"CTCLossV2Grad", kVector}},
      {"_embedding_bag", {"EmbeddingBag", kVector}},
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

// Convolutions as torch_npu runs them (op-plugin aclops Conv2d/Conv3d/ConvTranspose2d and their
// backward): 1-d convolutions as 2-d ones; the input gradient of a transposed convolution is a
// plain convolution; the bias gradient is a ReduceSum.
KernelInfo conv_kernel(int64_t spatial_dims, bool transposed, ConvPart part) {
  const bool d3 = spatial_dims == 3;
  switch (part) {
    case ConvPart::kForward:
      if (transposed) return {d3 ? "Conv3DTranspose" : "Conv2DTranspose", kCube, true};
      return {d3 ? "Conv3D" : "Conv2D", kCube, true};
    case ConvPart::kInputGrad:
      if (transposed) return {d3 ? "Conv3D" : "Conv2D", kCube, true};
      return {d3 ? "Conv3DBackpropInput" : "Conv2DBackpropInput", kCube, true};
    case ConvPart::kWeightGrad: return {d3 ? "Conv3DBackpropFilter" : "Conv2DBackpropFilter", kCube, true};
    case ConvPart::kBiasGrad: break;
  }
  return {"ReduceSum", kVector, true};
}

// Batch norm as torch_npu runs it (op-plugin aclops BatchNorm/BatchNormBackward): training reduces
// then updates (BN3D* kernels for 5-d input), inference is one BNInfer; the backward computes the
// weight and bias gradients first, then the input gradient.
std::vector<KernelInfo> batch_norm_kernels(bool backward, bool training, int64_t input_dim, bool input_grad) {
  const bool d3 = training && input_dim == 5;
  if (!backward) {
    if (!training) return {{"BNInfer", kVector, true}};
    return {{d3 ? "BN3DTrainingReduce" : "BNTrainingReduce", kVector, true},
            {d3 ? "BN3DTrainingUpdate" : "BNTrainingUpdate", kVector, true}};
  }
  std::vector<KernelInfo> out{{d3 ? "BN3DTrainingUpdateGrad" : "BNTrainingUpdateGrad", kVector, true}};
  if (input_grad) {
    if (training) {
      out.push_back({d3 ? "BN3DTrainingReduceGrad" : "BNTrainingReduceGrad", kVector, true});
    } else {
      out.push_back({"BNInferGrad", kVector, true});
    }
  }
  return out;
}

// Fused attention runs on the cube and vector units together (mixed kernel).
KernelInfo attention_kernel(bool backward) {
  return {backward ? "FlashAttentionScoreGrad" : "FlashAttentionScore", "KERNEL_MIX_AIC", true};
}

// Recurrent layers as torch_npu runs them (op-plugin aclops Lstm/Gru/LstmCell): one kernel per
// layer and direction.
KernelInfo recurrent_kernel(const std::string& op_name, bool backward) {
  if (op_name == "aten::lstm") return {backward ? "DynamicRNNGrad" : "DynamicRNN", kCube, true};
  if (op_name == "aten::lstm_cell") return {backward ? "DynamicRNNV2Grad" : "DynamicRNNV2", kCube, true};
  if (op_name == "aten::gru" || op_name == "aten::gru_cell") {
    return {backward ? "DynamicGRUV2Grad" : "DynamicGRUV2", kCube, true};
  }
  const KernelInfo k = kernel_for_op(op_name);
  return backward ? KernelInfo{intern(std::string(k.name) + "Grad"), k.type, true} : k;
}

}  // namespace torch_mspti::sim
