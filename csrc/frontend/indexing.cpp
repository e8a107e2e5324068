// Advanced indexing: index.Tensor in every None/tensor arrangement, index_select, embedding.
//
// Every gathered index is wrapped (where torch allows negative indices) and bounds-checked at run
// time: an out-of-range index raises instead of reading outside the tensor.
#include <algorithm>

#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

namespace {

// x[indices] with indices = [None | tensor, ...] (numpy advanced indexing, as torch implements it):
// tensor indices broadcast together to a shape I; if they are adjacent, I replaces the indexed
// dimensions in place, otherwise I goes first, followed by the non-indexed dimensions in order.
void translate_index(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<std::optional<NodeId>> indices = ctx.optional_tensors(node, "indices");
  const Shape& x_shape = b.shape(x);
  const size_t rank = x_shape.size();
  LUMINAL_CHECK(indices.size() <= rank, "too many indices (", indices.size(), ") for a tensor of rank ", rank);

  std::vector<size_t> indexed_dims;
  std::vector<NodeId> index_tensors;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) continue;
    const DType dt = b.dtype(*indices[d]);
    LUMINAL_CHECK(dt != DType::Bool && dt != DType::U8,
                  "boolean-mask indexing has a data-dependent output shape and is not supported (index ", d, ")");
    LUMINAL_CHECK(dt == DType::I64 || dt == DType::I32, "index ", d, " must be an integer tensor, got ",
                  dtype_name(dt));
    indexed_dims.push_back(d);
    index_tensors.push_back(*indices[d]);
  }
  if (index_tensors.empty()) {
    ctx.set_output(node, x);
    return;
  }
  std::vector<Shape> index_shapes;
  for (NodeId t : index_tensors) index_shapes.push_back(b.shape(t));
  const Shape broadcast = b.broadcast_shapes(index_shapes);
  const bool adjacent = indexed_dims.back() - indexed_dims.front() + 1 == indexed_dims.size();
  const size_t first_axis = adjacent ? indexed_dims.front() : 0;  // output axis where I starts

  // Output shape and, for every non-indexed dimension of x, its output axis.
  Shape out;
  std::vector<int> x_dim_axis(rank, -1);
  auto append_plain_dim = [&](size_t d) {
    x_dim_axis[d] = static_cast<int>(out.size());
    out.push_back(x_shape[d]);
  };
  auto is_indexed = [&](size_t d) {
    return std::find(indexed_dims.begin(), indexed_dims.end(), d) != indexed_dims.end();
  };
  if (adjacent) {
    for (size_t d = 0; d < first_axis; ++d) append_plain_dim(d);
    out.insert(out.end(), broadcast.begin(), broadcast.end());
    for (size_t d = indexed_dims.back() + 1; d < rank; ++d) append_plain_dim(d);
  } else {
    out.insert(out.end(), broadcast.begin(), broadcast.end());
    for (size_t d = 0; d < rank; ++d) {
      if (!is_indexed(d)) append_plain_dim(d);
    }
  }

  // Each index tensor is read at its broadcast position inside I.
  std::vector<NodeId> inputs{x};
  std::vector<Expr> x_index(rank);
  for (size_t k = 0; k < index_tensors.size(); ++k) {
    const NodeId t = index_tensors[k];
    const Shape& t_shape = b.shape(t);
    const size_t offset = first_axis + broadcast.size() - t_shape.size();
    std::vector<Expr> t_index;
    for (size_t j = 0; j < t_shape.size(); ++j) {
      const bool broadcasts = t_shape[j]->is_int_const(1) && !broadcast[broadcast.size() - t_shape.size() + j]->is_int_const(1);
      t_index.push_back(broadcasts ? ir::int_const(0) : ir::loop_var(static_cast<int>(offset + j)));
    }
    const int slot = static_cast<int>(inputs.size());
    inputs.push_back(t);
    const Expr raw = ir::load(slot, b.dtype(t), std::move(t_index));
    x_index[indexed_dims[k]] = Builder::checked_index(raw, x_shape[indexed_dims[k]], /*wrap_negative=*/true);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!x_index[d]) x_index[d] = ir::loop_var(x_dim_axis[d]);
  }
  ctx.set_output(node, b.pointwise(b.dtype(x), out, inputs, ir::load(0, b.dtype(x), std::move(x_index))));
}

void translate_index_select(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId index = ctx.tensor(node, "index");
  LUMINAL_CHECK(b.rank(index) <= 1, "index_select index must be rank 0 or 1");
  // index_select rejects negative indices.
  ctx.set_output(node, b.take(ctx.tensor(node, "self"), ctx.int_arg(node, "dim"), index, /*wrap_negative=*/false));
}

// embedding(weight, indices, padding_idx, ...): padding only affects gradients.
void translate_embedding(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId weight = ctx.tensor(node, "weight");
  LUMINAL_CHECK(b.rank(weight) == 2, "embedding weight must be rank 2, got ", ir::node_signature(b.node(weight)));
  ctx.set_output(node, b.take(weight, 0, ctx.tensor(node, "indices"), /*wrap_negative=*/false));
}

}  // namespace

void register_index_ops(Registry& registry) {
  registry.add("torch.ops.aten.index.Tensor", translate_index);
  registry.add("torch.ops.aten.index_select.default", translate_index_select);
  registry.add("torch.ops.aten.embedding.default", translate_embedding);
}

}  // namespace luminal::frontend
