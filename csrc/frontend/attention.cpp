// torch's fused attention kernels (what scaled_dot_product_attention dispatches to): the efficient,
// flash, CPU flash and cuDNN kernels, each one ir::NodeKind::Attention node. Only the attention
// output (index 0) is computed; the other outputs (log-sum-exp, RNG state, sequence offsets, the
// debug mask) serve training, and a graph that reads one of them is refused.
#include <cmath>
#include <optional>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

bool mentions(const pt2::Argument& arg, const std::string& name) {
  switch (arg.kind()) {
    case pt2::Argument::Kind::Tensor: return arg.as_tensor().name == name;
    case pt2::Argument::Kind::Tensors:
      for (const pt2::TensorArgument& t : arg.as_tensors()) {
        if (t.name == name) return true;
      }
      return false;
    case pt2::Argument::Kind::OptionalTensor: {
      const auto& t = arg.as_optional_tensor().tensor;
      return t && t->name == name;
    }
    case pt2::Argument::Kind::OptionalTensors:
      for (const pt2::OptionalTensorArgument& t : arg.as_optional_tensors()) {
        if (t.tensor && t.tensor->name == name) return true;
      }
      return false;
    case pt2::Argument::Kind::NestedTensors:
      for (const auto& list : arg.as_nested_tensors()) {
        for (const pt2::TensorArgument& t : list) {
          if (t.name == name) return true;
        }
      }
      return false;
    default: return false;
  }
}

// Whether any node or graph output reads the tensor `name`.
bool is_read(const pt2::Graph& graph, const std::string& name) {
  for (const pt2::Node& node : graph.nodes) {
    for (const pt2::NamedArgument& input : node.inputs) {
      if (mentions(input.arg, name)) return true;
    }
  }
  for (const pt2::Argument& output : graph.outputs) {
    if (mentions(output, name)) return true;
  }
  return false;
}

// The training-only outputs (every tensor output after the first) must be unused.
void refuse_used_side_outputs(const Context& ctx, const pt2::Node& node) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    const pt2::Argument& output = node.outputs[i];
    if (!output.is_tensor()) continue;  // SymInt outputs (max_q, max_k) are export metadata
    LUMINAL_CHECK(!is_read(ctx.pt2_graph(), output.as_tensor().name), "output ", i, " (",
                  output.as_tensor().name,
                  ") of the attention kernel is read; luminal computes only the attention output (index 0), the "
                  "others (log-sum-exp, RNG state) serve training");
  }
}

// `x` with its dimension `d` spelled `target` (equal at run time, checked): the verifier compares
// shape expressions structurally.
NodeId aligned(Builder& b, NodeId x, const std::vector<std::pair<size_t, Expr>>& dims, const char* what) {
  Shape shape = b.shape(x);
  bool changed = false;
  for (const auto& [d, target] : dims) {
    if (ir::expr_equal(shape[d], target)) continue;
    b.assert_equal(shape[d], target, what);
    shape[d] = target;
    changed = true;
  }
  if (!changed) return x;
  return b.pointwise(b.dtype(x), shape, {x}, ir::load(0, b.dtype(x), Builder::loop_vars(shape.size())));
}

// The mask as rank 4 with every dimension 1 or spelled as the scores' (right-aligned broadcast).
NodeId attention_mask(Builder& b, NodeId mask, const Shape& scores) {
  const size_t rank = b.rank(mask);
  LUMINAL_CHECK(rank <= 4, "attention mask ", ir::node_signature(b.node(mask)), " has more than 4 dimensions");
  const DType dtype = b.dtype(mask);
  LUMINAL_CHECK(dtype == DType::Bool || is_floating(dtype), "attention mask ", ir::node_signature(b.node(mask)),
                " must be bool or floating");
  NodeId m = mask;
  for (size_t d = rank; d < 4; ++d) m = b.unsqueeze(m, 0);
  std::vector<std::pair<size_t, Expr>> dims;
  const Shape shape = b.shape(m);
  for (size_t d = 0; d < 4; ++d) {
    const auto n = ir::as_int_const(shape[d]);
    if (!(n && *n == 1)) dims.emplace_back(d, scores[d]);
  }
  return aligned(b, m, dims, "attention mask broadcast to the scores");
}

// The example value the export recorded for dimension `d` of the node's tensor `operand`.
std::optional<int64_t> example_size(const Context& ctx, const pt2::Node& node, std::string_view operand, size_t d) {
  const pt2::TensorMeta& meta = ctx.tensor_meta(ctx.find_arg(node, operand)->as_tensor().name);
  return d < meta.sizes.size() ? example_value(meta.sizes[d]) : std::nullopt;
}

// The query with the dimensions the kernels need static spelled as numbers, where a dynamic
// export left them symbolic (recurrent Gemma's and Jamba's query after partial rotary has head size
// floordiv(64, floordiv(2 n, 7)) and floordiv(2 n, 7) heads, for keys of 4 heads of 16): the head
// size as the key's, when that is static, and the heads as the export's example value, when that
// is a multiple of the key's static heads. The graph checks both at every call; a call where one
// differs runs in eager.
NodeId with_static_query_dims(const Context& ctx, const pt2::Node& node, Builder& b, NodeId q, const Shape& ks) {
  const Shape qs = b.shape(q);
  std::vector<std::pair<size_t, Expr>> dims;
  if (!ir::as_int_const(qs[3]) && ir::as_int_const(ks[3])) dims.emplace_back(3, ks[3]);
  const auto kv_heads = ir::as_int_const(ks[1]);
  if (!ir::as_int_const(qs[1]) && kv_heads && *kv_heads > 0) {
    const auto heads = example_size(ctx, node, "query", 1);
    if (heads && *heads > 0 && *heads % *kv_heads == 0) dims.emplace_back(1, ir::int_const(*heads));
  }
  return aligned(b, q, dims, "attention query heads and head size");
}

struct AttentionArgs {
  const char* mask_name = nullptr;  // the schema's name of the optional mask (nullptr: none)
};

void translate_attention(Context& ctx, const pt2::Node& node, const AttentionArgs& args) {
  Builder& b = ctx.builder();
  refuse_used_side_outputs(ctx, node);
  const double dropout = ctx.float_arg(node, "dropout_p", 0.0);
  LUMINAL_CHECK(dropout == 0.0, "dropout_p ", dropout, " is not 0: luminal runs attention for inference only");
  NodeId q = ctx.tensor(node, "query");
  NodeId k = ctx.tensor(node, "key");
  NodeId v = ctx.tensor(node, "value");
  const auto signatures = [&] {
    return str_cat("q ", ir::node_signature(b.node(q)), ", k ", ir::node_signature(b.node(k)), ", v ",
                   ir::node_signature(b.node(v)));
  };
  LUMINAL_CHECK(b.rank(q) == 4 && b.rank(k) == 4 && b.rank(v) == 4, "attention needs rank-4 operands, got ",
                signatures());
  const DType dtype = b.dtype(q);
  LUMINAL_CHECK(is_floating(dtype) && b.dtype(k) == dtype && b.dtype(v) == dtype,
                "attention operands must share one floating dtype, got ", signatures());
  q = with_static_query_dims(ctx, node, b, q, b.shape(k));
  const Shape qs = b.shape(q);
  const Shape ks = b.shape(k);
  if (!ir::expr_equal(qs[1], ks[1])) {
    const auto heads = ir::as_int_const(qs[1]);
    const auto kv_heads = ir::as_int_const(ks[1]);
    LUMINAL_CHECK(heads && kv_heads && *kv_heads > 0 && *heads % *kv_heads == 0,
                  "query heads must be a static multiple of the key/value heads, got ", signatures());
  }
  k = aligned(b, k, {{0, qs[0]}, {3, qs[3]}}, "attention key batch and head size");
  v = aligned(b, v, {{0, qs[0]}, {1, b.shape(k)[1]}, {2, b.shape(k)[2]}}, "attention value shape");

  double scale = 0.0;
  const pt2::Argument* scale_arg = ctx.find_arg(node, "scale");
  if (scale_arg && !scale_arg->is_none()) {
    scale = ctx.float_arg(node, "scale");
  } else {
    const auto head_size = ir::as_int_const(qs[3]);
    LUMINAL_CHECK(head_size && *head_size > 0, "the default scale needs a static head size, got ", signatures());
    scale = 1.0 / std::sqrt(static_cast<double>(*head_size));
  }
  LUMINAL_CHECK(std::isfinite(scale), "attention scale ", scale, " is not finite");

  std::optional<NodeId> mask;
  if (args.mask_name) {
    if (const auto given = ctx.optional_tensor(node, args.mask_name)) {
      mask = attention_mask(b, *given, {qs[0], qs[1], qs[2], b.shape(k)[2]});
    }
  }
  ctx.set_output(node, 0, b.attention(q, k, v, mask, scale, ctx.bool_arg(node, "is_causal", false)));
}

}  // namespace

void register_attention_ops(Registry& registry) {
  registry.add("torch.ops.aten._scaled_dot_product_efficient_attention.default",
               [](Context& ctx, const pt2::Node& node) { translate_attention(ctx, node, {"attn_bias"}); });
  registry.add("torch.ops.aten._scaled_dot_product_flash_attention.default",
               [](Context& ctx, const pt2::Node& node) { translate_attention(ctx, node, {}); });
  registry.add("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
               [](Context& ctx, const pt2::Node& node) { translate_attention(ctx, node, {"attn_mask"}); });
  registry.add("torch.ops.aten._scaled_dot_product_cudnn_attention.default",
               [](Context& ctx, const pt2::Node& node) { translate_attention(ctx, node, {"attn_bias"}); });
}

}  // namespace luminal::frontend
