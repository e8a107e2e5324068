// Embedding bags (_embedding_bag, _embedding_bag_forward_only, and the public embedding_bag that
// a .pt2 saved without decompositions holds) with bags given by run-time offsets: bag sizes may be
// 1, uniform, or vary per bag. Modes sum, mean and max; optional per_sample_weights (sum only)
// and padding_idx; include_last_offset.
//
// Every bag is a ragged reduction: out[b, d] = combine over r < end(b) - start(b) of
// weight[indices[start(b) + r], d]. Offsets are validated and indices bounds-checked at run time;
// failures name embedding_bag and the input (offsets or indices).
#include <cmath>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

enum class BagMode { Sum = 0, Mean = 1, Max = 2 };

struct BagInputs {
  NodeId weight, indices, offsets;
  std::optional<NodeId> per_sample_weights;
};

// Slots of the reduce node's inputs.
constexpr int kWeightSlot = 0, kIndicesSlot = 1, kOffsetsSlot = 2, kSampleWeightSlot = 3;

struct BagBounds {
  Expr start;   // the bag's first position in indices
  Expr extent;  // its number of indices
};

// The bounds of the bag at output row i0, with eager's validation of the offsets: offsets[0] is 0,
// no offset exceeds the number of indices, offsets never decrease. Eager CPU raises for these
// (except mode='max', which then assigns indices to bags by their sorted offsets); eager CUDA treats
// offsets[0] as 0 and fails with a device-side assert or an illegal address for the others. With
// include_last_offset the last offset must be the number of indices: the CPU ends the last bag
// at offsets[-1], CUDA at the end of indices, so any other value would make one of them differ.
// The checks are value checks: range analysis must not use them to simplify the extent away
// (empty indices made it a constant 0, which dropped every check).
BagBounds checked_bag_bounds(DType offsets_dtype, const Expr& num_indices, const Expr& num_offsets,
                             bool include_last_offset) {
  const Expr bag = ir::loop_var(0);
  const Expr past_end = ir::add(num_indices, ir::int_const(1));
  const Expr raw_start = ir::cast(ir::load(kOffsetsSlot, offsets_dtype, {bag}), DType::I64);
  const Expr first = ir::eq(bag, ir::int_const(0));
  const Expr first_start = ir::check_value(
      raw_start, ir::int_const(1),
      "{op}: offsets[0] has to be 0 (the first bag starts at the first index), but got {value} (offsets, {target}, "
      "node {node})",
      first);
  const Expr other_start = ir::check_value(
      raw_start, past_end,
      "{op}: offsets can not be greater than the length of indices {limit} or negative, but got an offset of {value} "
      "(offsets, {target}, node {node})",
      ir::unary(ir::ExprOp::Not, first));
  const Expr start = ir::where(first, first_start, other_start);

  const Expr next = ir::add(bag, ir::int_const(1));
  const Expr next_exists = include_last_offset ? ir::bool_const(true) : ir::lt(next, num_offsets);
  const Expr next_offset = ir::cast(ir::load(kOffsetsSlot, offsets_dtype, {next}, next_exists), DType::I64);
  Expr end = ir::check_value(
      ir::where(next_exists, next_offset, num_indices), past_end,
      "{op}: offsets can not be greater than the length of indices {limit} or negative, but got an offset of {value} "
      "(offsets, {target}, node {node})");
  if (include_last_offset) {
    const Expr last_bag = ir::eq(next, ir::sub(num_offsets, ir::int_const(1)));
    const Expr excess = ir::check_value(
        ir::sub(end, num_indices), ir::int_const(1),
        "{op}: with include_last_offset, offsets[-1] has to be the length of indices, but offsets[-1] - len(indices) "
        "is {value} (offsets, {target}, node {node})",
        last_bag);
    end = ir::where(last_bag, ir::add(excess, num_indices), end);  // a masked check reads 0 where off
  }
  // start <= end, i.e. start in [0, end + 1).
  const Expr ordered_start = ir::check_value(
      start, ir::add(end, ir::int_const(1)),
      "{op}: offsets have to be non-decreasing, but an offset of {value} is followed by {limit} (offsets, {target}, "
      "node {node})");
  return {ordered_start, ir::max(ir::sub(end, ordered_start), ir::int_const(0))};
}

// The row that padding_idx excludes, if any. _embedding_bag takes -1 for "no padding"; the public
// embedding_bag.padding_idx takes None, or an index in [-rows, rows) that counts from the end when
// negative (ATen's embedding_bag wraps it). Rows may be symbolic (a dynamic weight).
std::optional<Expr> bag_padding_row(Context& ctx, const pt2::Node& node, const Expr& rows) {
  const bool public_op = node.target.find("._embedding_bag") == std::string::npos;
  const int64_t padding_idx = ctx.int_arg(node, "padding_idx", -1);
  const pt2::Argument* arg = ctx.find_arg(node, "padding_idx");
  if (!public_op || !arg || arg->is_none()) {
    return padding_idx >= 0 ? std::optional<Expr>(ir::int_const(padding_idx)) : std::nullopt;
  }
  if (const auto known = ir::as_int_const(rows)) {
    LUMINAL_CHECK(padding_idx >= -*known && padding_idx < *known, "padding_idx must be within the number of embeddings, -",
                  *known, " through ", *known - 1, ", but got ", padding_idx);
  }
  // With symbolic rows an out-of-range padding_idx matches no row (F.embedding_bag rejects it before).
  return padding_idx < 0 ? ir::add(rows, ir::int_const(padding_idx)) : ir::int_const(padding_idx);
}

void translate_embedding_bag(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  BagInputs in{ctx.tensor(node, "weight"), ctx.tensor(node, "indices"), ctx.tensor(node, "offsets"),
               ctx.optional_tensor(node, "per_sample_weights")};
  const auto mode = static_cast<BagMode>(ctx.int_arg(node, "mode", 0));
  const bool include_last_offset = ctx.bool_arg(node, "include_last_offset", false);

  LUMINAL_CHECK(mode == BagMode::Sum || mode == BagMode::Mean || mode == BagMode::Max, "unknown embedding_bag mode ",
                static_cast<int>(mode));
  LUMINAL_CHECK(b.rank(in.weight) == 2, "weight must be rank 2, got ", ir::node_signature(b.node(in.weight)));
  LUMINAL_CHECK(b.rank(in.indices) == 1 && b.rank(in.offsets) == 1,
                "indices and offsets must be rank 1, got ", ir::node_signature(b.node(in.indices)), " and ",
                ir::node_signature(b.node(in.offsets)));
  const DType index_dtype = b.dtype(in.indices);
  LUMINAL_CHECK(index_dtype == DType::I64 || index_dtype == DType::I32, "indices must be int64 or int32, got ",
                dtype_name(index_dtype));
  LUMINAL_CHECK(b.dtype(in.offsets) == DType::I64 || b.dtype(in.offsets) == DType::I32,
                "offsets must be int64 or int32, got ", dtype_name(b.dtype(in.offsets)));
  LUMINAL_CHECK(!in.per_sample_weights || mode == BagMode::Sum,
                "per_sample_weights are only supported with mode='sum' (as in torch)");
  if (in.per_sample_weights) {
    LUMINAL_CHECK(b.rank(*in.per_sample_weights) == 1 && b.dtype(*in.per_sample_weights) == b.dtype(in.weight),
                  "per_sample_weights must be rank 1 with the weight's dtype, got ",
                  ir::node_signature(b.node(*in.per_sample_weights)));
    b.assert_equal(b.shape(*in.per_sample_weights)[0], b.shape(in.indices)[0], "per_sample_weights length");
  }

  const DType out_dtype = ctx.out_dtype(node, 0);
  const DType accumulate = (out_dtype == DType::F16 || out_dtype == DType::BF16) ? DType::F32 : out_dtype;
  const Expr num_indices = b.shape(in.indices)[0];
  const Expr num_rows = b.shape(in.weight)[0];
  const std::optional<Expr> padding_row = bag_padding_row(ctx, node, num_rows);
  const Expr num_offsets = b.shape(in.offsets)[0];
  const Expr num_bags = include_last_offset ? ir::sub(num_offsets, ir::int_const(1)) : num_offsets;
  const Shape out_shape{num_bags, b.shape(in.weight)[1]};

  // Bag bounds of the bag at output row i0, validated as eager validates offsets (see
  // checked_bag_bounds).
  const BagBounds bounds = checked_bag_bounds(b.dtype(in.offsets), num_indices, num_offsets, include_last_offset);
  const Expr start = bounds.start;
  const Expr extent = bounds.extent;

  // One element of the bag: its index (checked against the table) and value.
  const Expr position = ir::check_index(ir::add(start, ir::reduce_var(0)), num_indices);
  const Expr row = Builder::checked_index(ir::load(kIndicesSlot, index_dtype, {position}), num_rows, false, nullptr,
                                         "indices");
  Expr value = ir::cast(ir::load(kWeightSlot, b.dtype(in.weight), {row, ir::loop_var(1)}), accumulate);
  if (in.per_sample_weights) {
    value = ir::mul(value, ir::cast(ir::load(kSampleWeightSlot, b.dtype(in.weight), {position}), accumulate));
  }
  const Expr is_padding = padding_row ? ir::eq(row, *padding_row) : ir::bool_const(false);

  std::vector<NodeId> inputs{in.weight, in.indices, in.offsets};
  if (in.per_sample_weights) inputs.push_back(*in.per_sample_weights);

  const Expr zero = ir::scalar_const(0, accumulate);
  const ir::ReduceOp combine = mode == BagMode::Max ? ir::ReduceOp::Max : ir::ReduceOp::Sum;
  const Expr neutral = mode == BagMode::Max ? ir::scalar_const(-INFINITY, accumulate) : zero;
  const NodeId reduced =
      b.reduce(accumulate, out_shape, inputs, ir::where(is_padding, neutral, value), combine, {extent});

  if (mode == BagMode::Sum && !padding_row) {
    ctx.set_output(node, 0, b.cast(reduced, out_dtype));
    return;
  }
  // Mean divides by the number of non-padding entries; empty bags (and max of empty bags) are 0.
  const NodeId count = b.reduce(accumulate, {num_bags}, {in.weight, in.indices, in.offsets},
                                ir::where(is_padding, zero, ir::scalar_const(1, accumulate)), ir::ReduceOp::Sum,
                                {extent});
  const NodeId out = b.pointwise(out_dtype, out_shape, {reduced, count}, [&] {
    const Expr total = ir::load(0, accumulate, {ir::loop_var(0), ir::loop_var(1)});
    const Expr n = ir::load(1, accumulate, {ir::loop_var(0)});
    const Expr empty = ir::eq(n, zero);
    const Expr result = mode == BagMode::Mean ? ir::binary(ir::ExprOp::Div, total, ir::where(empty, ir::scalar_const(1, accumulate), n))
                                              : total;
    return ir::cast(ir::where(empty, zero, result), out_dtype);
  }());
  ctx.set_output(node, 0, out);
}

}  // namespace

void register_embedding_ops(Registry& registry) {
  registry.add("torch.ops.aten._embedding_bag.default", translate_embedding_bag);
  registry.add("torch.ops.aten._embedding_bag_forward_only.default", translate_embedding_bag);
  // The public op, as a .pt2 saved without run_decompositions holds it.
  registry.add("torch.ops.aten.embedding_bag.default", translate_embedding_bag);
  registry.add("torch.ops.aten.embedding_bag.padding_idx", translate_embedding_bag);
}

}  // namespace luminal::frontend
