// Views and layout: view/reshape, permute/transpose, expand, (un)squeeze, slice, select, cat,
// clone/copies and dtype conversion.
#include <cmath>
#include "common/error.h"
#include "frontend/translate.h"

namespace luminal::frontend {

void slice_along(Context& ctx, const pt2::Node& node, NodeId x, int64_t dim) {
  const Expr start = ctx.symint_arg(node, "start").value_or(ir::int_const(0));
  const Expr end = ctx.symint_arg(node, "end").value_or(ir::int_const(INT64_MAX));
  const int64_t step = ctx.int_arg(node, "step", 1);
  ctx.set_output(node, ctx.builder().slice(x, dim, start, end, step));
}

namespace {

// The export metadata already holds the resolved shape (with -1 and symbolic sizes worked out);
// reshape() checks that the element counts agree.
void translate_view(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().reshape(ctx.tensor(node, "self"), ctx.out_shape(node)));
}

void translate_permute(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().permute(ctx.tensor(node, "self"), ctx.ints_arg(node, "dims")));
}

void translate_transpose(Context& ctx, const pt2::Node& node) {
  const NodeId x = ctx.tensor(node, "self");
  Builder& b = ctx.builder();
  if (b.rank(x) < 2) {
    ctx.set_output(node, x);
    return;
  }
  ctx.set_output(node, b.transpose(x, ctx.int_arg(node, "dim0"), ctx.int_arg(node, "dim1")));
}

void translate_expand(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().expand(ctx.tensor(node, "self"), ctx.symints_arg(node, "size")));
}

void translate_unsqueeze(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().unsqueeze(ctx.tensor(node, "self"), ctx.int_arg(node, "dim")));
}

void translate_squeeze(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  std::vector<int64_t> dims;
  if (ctx.find_arg(node, "dim")) {
    dims = ctx.ints_arg(node, "dim");
  } else {
    for (size_t d = 0; d < b.rank(x); ++d) dims.push_back(static_cast<int64_t>(d));
  }
  ctx.set_output(node, b.squeeze(x, dims));
}

void translate_slice(Context& ctx, const pt2::Node& node) {
  slice_along(ctx, node, ctx.tensor(node, "self"), ctx.int_arg(node, "dim", 0));
}

void translate_select(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  ctx.set_output(node, b.select(ctx.tensor(node, "self"), ctx.int_arg(node, "dim"), ctx.symint_arg(node, "index").value()));
}

void translate_cat(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId out = b.concat(ctx.tensors(node, "tensors"), ctx.int_arg(node, "dim", 0));
  ctx.set_output(node, b.cast(out, ctx.out_dtype(node)));
}

// clone / alias / copies: values are immutable in the IR, so an identity is enough.
void translate_identity(Context& ctx, const pt2::Node& node) { ctx.set_output(node, ctx.tensor(node, "self")); }

void translate_to_copy(Context& ctx, const pt2::Node& node) {
  ctx.set_output(node, ctx.builder().cast(ctx.tensor(node, "self"), ctx.out_dtype(node)));
}

void translate_flatten(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const size_t rank = b.rank(x);
  if (rank == 0) {
    ctx.set_output(node, b.reshape(x, {ir::int_const(1)}));
    return;
  }
  const int64_t start = b.normalize_dim(ctx.int_arg(node, "start_dim", 0), rank);
  const int64_t end = b.normalize_dim(ctx.int_arg(node, "end_dim", -1), rank);
  Shape shape;
  Expr merged = ir::int_const(1);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t di = static_cast<int64_t>(d);
    if (di < start || di > end) {
      shape.push_back(b.shape(x)[d]);
    } else {
      merged = ir::mul(merged, b.shape(x)[d]);
      if (di == end) shape.push_back(merged);
    }
  }
  ctx.set_output(node, b.reshape(x, shape));
}

// Reads x at `index` (one expression per dim of x) for an output of `shape`.
NodeId gather_by_index(Builder& b, NodeId x, Shape shape, std::vector<Expr> index) {
  return b.pointwise(b.dtype(x), std::move(shape), {x}, ir::load(0, b.dtype(x), std::move(index)));
}

void translate_flip(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape shape = b.shape(x);
  std::vector<Expr> index = Builder::loop_vars(shape.size());
  for (int64_t dim : ctx.ints_arg(node, "dims")) {
    const int64_t d = b.normalize_dim(dim, shape.size());
    index[d] = ir::sub(ir::sub(shape[d], ir::int_const(1)), ir::loop_var(static_cast<int>(d)));
  }
  ctx.set_output(node, gather_by_index(b, x, shape, index));
}

// repeat(self, repeats): tiles x; repeats may add leading dimensions.
void translate_repeat(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<Expr> repeats = ctx.symints_arg(node, "repeats");
  const Shape in = b.shape(x);
  LUMINAL_CHECK(repeats.size() >= in.size(), "repeat needs at least ", in.size(), " repeats, got ", repeats.size());
  const size_t offset = repeats.size() - in.size();
  Shape out;
  std::vector<Expr> index;
  for (size_t j = 0; j < repeats.size(); ++j) {
    const Expr size = j < offset ? ir::int_const(1) : in[j - offset];
    out.push_back(ir::mul(size, repeats[j]));
    if (j >= offset) index.push_back(ir::mod(ir::loop_var(static_cast<int>(j)), size));
  }
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// Padding of the last dims; `pad` lists (before, after) pairs from the last dimension backwards.
struct PadSpec {
  std::vector<Expr> before, after;  // per padded dim, indexed from the last dimension
};

PadSpec pad_spec(Context& ctx, const pt2::Node& node, size_t rank, std::string_view name) {
  const std::vector<Expr> pad = ctx.symints_arg(node, name);
  LUMINAL_CHECK(pad.size() % 2 == 0 && pad.size() / 2 <= rank, "padding of ", pad.size(), " values for rank ", rank);
  PadSpec spec;
  for (size_t k = 0; k < pad.size(); k += 2) {
    spec.before.push_back(pad[k]);
    spec.after.push_back(pad[k + 1]);
  }
  return spec;
}

// constant_pad_nd (negative pads crop), reflection_pad*d and replication_pad*d.
enum class PadMode { Constant, Reflect, Replicate };

void translate_pad(Context& ctx, const pt2::Node& node, PadMode mode) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const PadSpec spec = pad_spec(ctx, node, in.size(), mode == PadMode::Constant ? "pad" : "padding");
  Shape out = in;
  std::vector<Expr> index = Builder::loop_vars(in.size());
  Expr inside = ir::bool_const(true);
  for (size_t k = 0; k < spec.before.size(); ++k) {
    const size_t d = in.size() - 1 - k;
    const Expr size = in[d];
    out[d] = ir::add(ir::add(size, spec.before[k]), spec.after[k]);
    const Expr position = ir::sub(ir::loop_var(static_cast<int>(d)), spec.before[k]);  // in x's coordinates
    switch (mode) {
      case PadMode::Constant:
        inside = ir::logical_and(inside, ir::logical_and(ir::binary(ir::ExprOp::Ge, position, ir::int_const(0)),
                                                         ir::binary(ir::ExprOp::Lt, position, size)));
        index[d] = position;
        break;
      case PadMode::Replicate: index[d] = ir::min(ir::max(position, ir::int_const(0)), ir::sub(size, ir::int_const(1))); break;
      case PadMode::Reflect: {
        // Reflection without repeating the edge: |p| folded back at size - 1.
        const Expr last = ir::sub(size, ir::int_const(1));
        const Expr magnitude = ir::max(position, ir::sub(ir::int_const(0), position));
        index[d] = ir::sub(last, ir::max(ir::sub(last, magnitude), ir::sub(magnitude, last)));
        break;
      }
    }
  }
  const DType dtype = b.dtype(x);
  if (mode != PadMode::Constant) {
    ctx.set_output(node, gather_by_index(b, x, out, index));
    return;
  }
  const double value = ctx.find_arg(node, "value") ? ctx.float_arg(node, "value", 0.0) : 0.0;
  const Expr loaded = ir::load(0, dtype, index, inside);
  ctx.set_output(node, b.pointwise(dtype, out, {x}, ir::where(inside, loaded, ir::scalar_const(value, dtype))));
}

// split_with_sizes(self, split_sizes, dim) -> Tensor[]
void translate_split_with_sizes(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const int64_t dim = ctx.int_arg(node, "dim", 0);
  Expr start = ir::int_const(0);
  const std::vector<Expr> sizes = ctx.symints_arg(node, "split_sizes");
  for (size_t k = 0; k < sizes.size(); ++k) {
    const Expr end = ir::add(start, sizes[k]);
    ctx.set_output(node, k, b.slice(x, dim, start, end, 1));
    start = end;
  }
}

// diagonal(self, offset, dim1, dim2): the diagonal becomes the last dimension.
void translate_diagonal(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const int64_t offset = ctx.int_arg(node, "offset", 0);
  const int64_t d1 = b.normalize_dim(ctx.int_arg(node, "dim1", 0), in.size());
  const int64_t d2 = b.normalize_dim(ctx.int_arg(node, "dim2", 1), in.size());
  LUMINAL_CHECK(d1 != d2, "diagonal dimensions cannot be identical");
  Shape out;
  std::vector<Expr> index(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (static_cast<int64_t>(d) == d1 || static_cast<int64_t>(d) == d2) continue;
    index[d] = ir::loop_var(static_cast<int>(out.size()));
    out.push_back(in[d]);
  }
  const Expr k = ir::loop_var(static_cast<int>(out.size()));
  const Expr rows = offset >= 0 ? in[d1] : ir::add(in[d1], ir::int_const(offset));
  const Expr cols = offset >= 0 ? ir::sub(in[d2], ir::int_const(offset)) : in[d2];
  out.push_back(ir::max(ir::min(rows, cols), ir::int_const(0)));
  index[d1] = offset >= 0 ? k : ir::sub(k, ir::int_const(offset));
  index[d2] = offset >= 0 ? ir::add(k, ir::int_const(offset)) : k;
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// unfold(self, dimension, size, step) (Tensor.unfold): windows of `size` elements every `step`
// along `dimension`, as a new last dimension: out[..., i, ..., j] = self[..., i * step + j, ...]
// (halo attention's key/value blocks, 1-D patches). The window count is the export's: its shape
// guards already require size <= the dimension.
void translate_unfold(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const int64_t size = ctx.int_arg(node, "size");
  const int64_t step = ctx.int_arg(node, "step");
  LUMINAL_CHECK(size >= 0 && step > 0, "unfold needs size >= 0 and step > 0, got size ", size, " and step ", step);
  const Shape out = ctx.out_shape(node);
  LUMINAL_CHECK(out.size() == (in.empty() ? 1 : in.size() + 1),
                "unfold of a rank-", in.size(), " tensor has a rank-", out.size(), " result");
  if (in.empty()) {  // a 0-d tensor unfolds to [size] (size 0 or 1) copies of its value
    ctx.set_output(node, gather_by_index(b, x, out, {}));
    return;
  }
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dimension"), in.size());
  std::vector<Expr> index = Builder::loop_vars(in.size());
  index[d] = ir::add(ir::mul(ir::loop_var(static_cast<int>(d)), ir::int_const(step)),
                     ir::loop_var(static_cast<int>(in.size())));
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// fill.Scalar(self, value): a tensor like self, full of value.
void translate_fill(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  ctx.set_output(node, b.full(b.shape(x), ctx.operand(node, "value"), ctx.out_dtype(node)));
}

// copy(self, src): src broadcast to self's shape, in self's dtype (functional copy_).
void translate_copy(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId self = ctx.tensor(node, "self");
  const NodeId src = ctx.tensor(node, "src");
  const Shape shape = b.shape(self);
  const DType out = ctx.out_dtype(node);
  ctx.set_output(node, b.pointwise(out, shape, {src}, ir::cast(b.broadcast_load(0, src, shape), out)));
}

// ---- breadth: triangles, rolls, rotations, stacking/splitting, diagonals, pixel shuffles ----

// tril / triu(self, diagonal): keeps the elements with col - row <= diagonal (tril) or >= (triu)
// of the last two dims; the rest become zero.
void translate_triangle(Context& ctx, const pt2::Node& node, bool lower) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(rank >= 2, lower ? "tril" : "triu", " needs a tensor of rank >= 2, got shape ",
                ir::shape_to_string(b.shape(x)));
  const Expr diagonal = ir::int_const(ctx.int_arg(node, "diagonal", 0));
  const Expr offset = ir::sub(ir::loop_var(static_cast<int>(rank - 1)), ir::loop_var(static_cast<int>(rank - 2)));
  const Expr keep = ir::binary(lower ? ir::ExprOp::Le : ir::ExprOp::Ge, offset, diagonal);
  const DType dtype = b.dtype(x);
  const Expr body = ir::where(keep, ir::load(0, dtype, Builder::loop_vars(rank)), ir::scalar_const(0, dtype));
  ctx.set_output(node, b.pointwise(dtype, b.shape(x), {x}, body));
}

// roll(self, shifts, dims): without dims, the flattened tensor rolls and keeps its shape. A dim
// listed twice rolls twice, as in torch.
void translate_roll(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<int64_t> shifts = ctx.ints_arg(node, "shifts");
  std::vector<int64_t> dims = ctx.ints_arg(node, "dims", std::vector<int64_t>{});
  const Shape shape = b.shape(x);
  NodeId source = x;
  if (dims.empty()) {
    LUMINAL_CHECK(shifts.size() == 1, "roll without dims takes one shift, got ", shifts.size());
    source = b.reshape(x, {ir::product(shape)});
    dims = {0};
  }
  LUMINAL_CHECK(shifts.size() == dims.size(), "roll with ", shifts.size(), " shifts and ", dims.size(), " dims");
  const Shape source_shape = b.shape(source);
  std::vector<Expr> index = Builder::loop_vars(source_shape.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = b.normalize_dim(dims[k], source_shape.size());
    if (source_shape[d]->is_int_const(0)) continue;  // nothing to read
    // Python modulo: the result lies in [0, size) for any shift sign.
    index[d] = ir::mod(ir::sub(index[d], ir::int_const(shifts[k])), source_shape[d]);
  }
  const NodeId rolled = gather_by_index(b, source, source_shape, index);
  ctx.set_output(node, b.reshape(rolled, shape));
}

// rot90(self, k, dims): k quarter turns from dims[0] towards dims[1].
void translate_rot90(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const std::vector<int64_t> dims = ctx.ints_arg(node, "dims", std::vector<int64_t>{0, 1});
  const size_t rank = b.rank(x);
  LUMINAL_CHECK(dims.size() == 2 && rank >= 2, "rot90 needs two dims of a tensor of rank >= 2, got ", dims.size(),
                " dims of shape ", ir::shape_to_string(b.shape(x)));
  const int64_t d0 = b.normalize_dim(dims[0], rank), d1 = b.normalize_dim(dims[1], rank);
  LUMINAL_CHECK(d0 != d1, "rot90 dims must differ, got ", dims[0], " and ", dims[1]);
  const int64_t k = ((ctx.int_arg(node, "k", 1) % 4) + 4) % 4;
  const Shape in = b.shape(x);
  Shape out = in;
  std::vector<Expr> index = Builder::loop_vars(rank);
  const Expr i0 = ir::loop_var(static_cast<int>(d0)), i1 = ir::loop_var(static_cast<int>(d1));
  const auto flipped = [](const Expr& size, const Expr& i) { return ir::sub(ir::sub(size, ir::int_const(1)), i); };
  if (k == 2) {  // flip both
    index[d0] = flipped(in[d0], i0);
    index[d1] = flipped(in[d1], i1);
  } else if (k == 1) {  // flip(dims[1]) then transpose
    std::swap(out[d0], out[d1]);
    index[d0] = i1;
    index[d1] = flipped(in[d1], i0);
  } else if (k == 3) {  // flip(dims[0]) then transpose
    std::swap(out[d0], out[d1]);
    index[d0] = flipped(in[d0], i1);
    index[d1] = i0;
  }
  ctx.set_output(node, k == 0 ? b.copy(x) : gather_by_index(b, x, out, index));
}

// The number of tensors in an op's Tensor[] result.
size_t list_output_count(const pt2::Node& node) {
  LUMINAL_CHECK(node.outputs.size() == 1 && node.outputs[0].kind() == pt2::Argument::Kind::Tensors,
                "expected one list of tensors as the result");
  return node.outputs[0].as_tensors().size();
}

// unbind(self, dim) -> one tensor per position along dim (a static size).
void translate_unbind(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  LUMINAL_CHECK(b.rank(x) > 0, "unbind of a 0-d tensor");
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim", 0), b.rank(x));
  const auto size = ir::as_int_const(b.shape(x)[d]);
  const size_t count = list_output_count(node);
  LUMINAL_CHECK(size && static_cast<size_t>(*size) == count, "unbind of dimension ", d, " of shape ",
                ir::shape_to_string(b.shape(x)), " into ", count, " tensors");
  for (size_t k = 0; k < count; ++k) ctx.set_output(node, k, b.select(x, d, ir::int_const(static_cast<int64_t>(k))));
}

// split.Tensor(self, split_size, dim): chunks of split_size, the last one possibly shorter.
void translate_split(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const int64_t dim = ctx.int_arg(node, "dim", 0);
  const Expr split_size = ctx.symint_arg(node, "split_size").value();
  const auto constant = ir::as_int_const(split_size);
  LUMINAL_CHECK(!constant || *constant > 0, "split of size ", ir::to_string(split_size));
  const size_t count = list_output_count(node);
  for (size_t k = 0; k < count; ++k) {
    const Expr start = ir::mul(ir::int_const(static_cast<int64_t>(k)), split_size);
    ctx.set_output(node, k, b.slice(x, dim, start, ir::add(start, split_size), 1));  // slice clamps the last end
  }
}

// stack(tensors, dim): each tensor gains a size-1 dim, then they are concatenated along it.
void translate_stack(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const std::vector<NodeId> xs = ctx.tensors(node, "tensors");
  LUMINAL_CHECK(!xs.empty(), "stack of no tensors");
  const int64_t d = b.normalize_dim(ctx.int_arg(node, "dim", 0), b.rank(xs[0]) + 1);
  std::vector<NodeId> parts;
  for (NodeId x : xs) {
    LUMINAL_CHECK(b.rank(x) == b.rank(xs[0]), "stack of tensors of ranks ", b.rank(xs[0]), " and ", b.rank(x));
    parts.push_back(b.unsqueeze(x, d));
  }
  ctx.set_output(node, b.cast(b.concat(parts, d), ctx.out_dtype(node)));
}

// diag_embed(self, offset, dim1, dim2): the last dim of self becomes the (offset) diagonal of
// the planes (dim1, dim2) of the result; everything else is zero.
void translate_diag_embed(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  LUMINAL_CHECK(!in.empty(), "diag_embed of a 0-d tensor");
  const size_t rank = in.size() + 1;
  const int64_t offset = ctx.int_arg(node, "offset", 0);
  const int64_t d1 = b.normalize_dim(ctx.int_arg(node, "dim1", -2), rank);
  const int64_t d2 = b.normalize_dim(ctx.int_arg(node, "dim2", -1), rank);
  LUMINAL_CHECK(d1 != d2, "diag_embed dimensions cannot be identical");
  const Expr side = ir::add(in.back(), ir::int_const(offset < 0 ? -offset : offset));
  Shape out;
  std::vector<Expr> index;  // into self
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) == d1 || static_cast<int64_t>(d) == d2) {
      out.push_back(side);
    } else {
      index.push_back(ir::loop_var(static_cast<int>(d)));
      out.push_back(in[index.size() - 1]);
    }
  }
  const Expr row = ir::loop_var(static_cast<int>(d1)), col = ir::loop_var(static_cast<int>(d2));
  index.push_back(offset >= 0 ? row : col);
  const Expr on_diagonal = ir::eq(ir::sub(col, row), ir::int_const(offset));
  const DType dtype = b.dtype(x);
  const Expr body = ir::where(on_diagonal, ir::load(0, dtype, index, on_diagonal), ir::scalar_const(0, dtype));
  ctx.set_output(node, b.pointwise(dtype, out, {x}, body));
}

// pixel_shuffle(self, r): [*, C*r*r, H, W] -> [*, C, H*r, W*r]; pixel_unshuffle is its inverse.
void translate_pixel_shuffle(Context& ctx, const pt2::Node& node, bool shuffle) {
  Builder& b = ctx.builder();
  const NodeId x = ctx.tensor(node, "self");
  const Shape in = b.shape(x);
  const size_t rank = in.size();
  LUMINAL_CHECK(rank >= 3, "pixel_(un)shuffle needs a tensor of rank >= 3, got shape ", ir::shape_to_string(in));
  const int64_t factor = ctx.int_arg(node, shuffle ? "upscale_factor" : "downscale_factor");
  LUMINAL_CHECK(factor > 0, "pixel_(un)shuffle factor must be positive, got ", factor);
  const Expr r = ir::int_const(factor), rr = ir::int_const(factor * factor);
  const size_t c = rank - 3, h = rank - 2, w = rank - 1;
  const Expr ic = ir::loop_var(static_cast<int>(c)), ih = ir::loop_var(static_cast<int>(h)),
             iw = ir::loop_var(static_cast<int>(w));
  Shape out = in;
  std::vector<Expr> index = Builder::loop_vars(rank);
  if (shuffle) {
    b.assert_equal(ir::mod(in[c], rr), ir::int_const(0), "pixel_shuffle channels divisible by upscale_factor^2");
    out[c] = ir::floordiv(in[c], rr);
    out[h] = ir::mul(in[h], r);
    out[w] = ir::mul(in[w], r);
    index[c] = ir::add(ir::mul(ic, rr), ir::add(ir::mul(ir::mod(ih, r), r), ir::mod(iw, r)));
    index[h] = ir::floordiv(ih, r);
    index[w] = ir::floordiv(iw, r);
  } else {
    b.assert_equal(ir::mod(in[h], r), ir::int_const(0), "pixel_unshuffle height divisible by downscale_factor");
    b.assert_equal(ir::mod(in[w], r), ir::int_const(0), "pixel_unshuffle width divisible by downscale_factor");
    out[c] = ir::mul(in[c], rr);
    out[h] = ir::floordiv(in[h], r);
    out[w] = ir::floordiv(in[w], r);
    index[c] = ir::floordiv(ic, rr);
    index[h] = ir::add(ir::mul(ih, r), ir::mod(ir::floordiv(ic, r), r));
    index[w] = ir::add(ir::mul(iw, r), ir::mod(ic, r));
  }
  ctx.set_output(node, gather_by_index(b, x, out, index));
}

// eye(n) / eye(n, m): ones on the main diagonal.
void translate_eye(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const Expr body = ir::where(ir::eq(ir::loop_var(0), ir::loop_var(1)), ir::scalar_const(1, dtype), ir::scalar_const(0, dtype));
  ctx.set_output(node, b.pointwise(dtype, ctx.out_shape(node), {}, body));
}

// The number arguments of linspace/logspace.
double number_arg(Context& ctx, const pt2::Node& node, std::string_view name) {
  return ctx.operand(node, name).number("linspace/logspace's start, end and base");
}

// A Python number as torch's Scalar.to<dtype>() gives it.
double scalar_to(double value, DType dtype) {
  if (is_floating(dtype)) return float_value_in(dtype, value);
  LUMINAL_CHECK(is_integral(dtype), "linspace/logspace of dtype ", dtype_name(dtype));
  return static_cast<double>(static_cast<int64_t>(value));  // truncation, as Scalar.to<int>()
}

// a - b and a / n as the kernels compute the step: in double for f64 and integer results, in float
// otherwise (half types too: their kernels compute in float, unrounded).
double step_sub(double a, double b, DType dtype) {
  if (dtype == DType::F64 || is_integral(dtype)) return a - b;
  return static_cast<float>(a) - static_cast<float>(b);
}
double step_div(double a, int64_t n, DType dtype) {
  if (dtype == DType::F64 || is_integral(dtype)) return a / static_cast<double>(n);
  return static_cast<float>(a) / static_cast<float>(n);
}

// The two-ended linear ramp of torch's CPU kernels: i < steps / 2 ? start + step * i : end - step *
// (steps - 1 - i), in `compute`.
Expr two_ended(double start, double end, double step, int64_t steps, DType compute) {
  const Expr i = ir::loop_var(0);
  const Expr c_step = ir::float_const(step, compute);
  const Expr from_start = ir::add(ir::float_const(start, compute), ir::mul(c_step, ir::cast(i, compute)));
  const Expr from_end =
      ir::sub(ir::float_const(end, compute), ir::mul(c_step, ir::cast(ir::sub(ir::int_const(steps - 1), i), compute)));
  return ir::where(ir::lt(i, ir::int_const(steps / 2)), from_start, from_end);
}

// linspace(start, end, steps): step = (end - start) / (steps - 1) in float (double for f64 and
// integer results). torch's compiled CPU kernel fuses start + step * i into one multiply-add:
// float types compute it in double and round once (bit-exact but for rare double roundings);
// f64 and integer results round the product first, so they can differ from eager's fused value
// by an ulp, which moves an integer result that is exact in real arithmetic by one (torch's own
// decomposition computes it the same way).
void translate_linspace(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const int64_t steps = ctx.int_arg(node, "steps");
  LUMINAL_CHECK(steps >= 0, "linspace with ", steps, " steps");
  const double start = scalar_to(number_arg(ctx, node, "start"), dtype);
  const double end = scalar_to(number_arg(ctx, node, "end"), dtype);
  Expr value;
  if (steps <= 1) {
    value = ir::scalar_const(start, dtype);
  } else {
    const double step = step_div(step_sub(end, start, dtype), steps - 1, dtype);
    // Integer results truncate start + step * i; eager's fused multiply-add can land one below a
    // whole number where this does not, so only steps that are whole numbers (exact) are taken.
    LUMINAL_CHECK(is_floating(dtype) || step == std::floor(step), "linspace to ", dtype_name(dtype),
                  " with a fractional step (", step, ") is not supported: eager's rounding cannot be reproduced "
                  "exactly");
    value = two_ended(start, end, step, steps, DType::F64);
  }
  ctx.set_output(node, b.pointwise(dtype, {ir::int_const(steps)}, {}, ir::cast(value, dtype)));
}

// logspace(start, end, steps, base): base ** exponent in double, the exponents two-ended with a
// double step between start and end rounded to the result dtype (integer results use a float
// base), as torch's CPU kernel computes them.
void translate_logspace(Context& ctx, const pt2::Node& node) {
  Builder& b = ctx.builder();
  const DType dtype = ctx.out_dtype(node);
  const int64_t steps = ctx.int_arg(node, "steps");
  LUMINAL_CHECK(steps >= 0, "logspace with ", steps, " steps");
  const double raw_start = number_arg(ctx, node, "start");
  double base = ctx.float_arg(node, "base", 10.0);
  Expr exponent;
  if (steps <= 1) {
    exponent = ir::float_const(raw_start, DType::F64);
  } else {
    if (!is_floating(dtype)) base = static_cast<float>(base);
    const double start = scalar_to(raw_start, dtype), end = scalar_to(number_arg(ctx, node, "end"), dtype);
    // end - start in the result dtype (c10::Half subtraction rounds), then a double step.
    const double step = scalar_to(step_sub(end, start, dtype), dtype) / static_cast<double>(steps - 1);
    exponent = two_ended(start, end, step, steps, DType::F64);
  }
  const Expr value = ir::binary(ir::ExprOp::Pow, ir::float_const(base, DType::F64), exponent);
  ctx.set_output(node, b.pointwise(dtype, {ir::int_const(steps)}, {}, ir::cast(value, dtype)));
}

}  // namespace

void register_shape_ops(Registry& registry) {
  for (const char* target : {"torch.ops.aten.view.default", "torch.ops.aten._unsafe_view.default",
                             "torch.ops.aten.reshape.default", "torch.ops.aten.view_copy.default"}) {
    registry.add(target, translate_view);
  }
  registry.add("torch.ops.aten.permute.default", translate_permute);
  registry.add("torch.ops.aten.permute_copy.default", translate_permute);
  registry.add("torch.ops.aten.transpose.int", translate_transpose);
  registry.add("torch.ops.aten.expand.default", translate_expand);
  registry.add("torch.ops.aten.expand_copy.default", translate_expand);
  registry.add("torch.ops.aten.unsqueeze.default", translate_unsqueeze);
  registry.add("torch.ops.aten.unsqueeze_copy.default", translate_unsqueeze);
  registry.add("torch.ops.aten.squeeze.dim", translate_squeeze);
  registry.add("torch.ops.aten.squeeze.dims", translate_squeeze);
  registry.add("torch.ops.aten.squeeze.default", translate_squeeze);
  registry.add("torch.ops.aten.slice.Tensor", translate_slice);
  registry.add("torch.ops.aten.slice_copy.Tensor", translate_slice);
  registry.add("torch.ops.aten.select.int", translate_select);
  registry.add("torch.ops.aten.select_copy.int", translate_select);
  registry.add("torch.ops.aten.cat.default", translate_cat);
  registry.add("torch.ops.aten.flatten.using_ints", translate_flatten);
  registry.add("torch.ops.aten.flip.default", translate_flip);
  registry.add("torch.ops.aten.repeat.default", translate_repeat);
  registry.add("torch.ops.aten.constant_pad_nd.default",
               [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Constant); });
  for (const char* target : {"torch.ops.aten.reflection_pad1d.default", "torch.ops.aten.reflection_pad2d.default",
                             "torch.ops.aten.reflection_pad3d.default"}) {
    registry.add(target, [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Reflect); });
  }
  for (const char* target : {"torch.ops.aten.replication_pad1d.default", "torch.ops.aten.replication_pad2d.default",
                             "torch.ops.aten.replication_pad3d.default"}) {
    registry.add(target, [](Context& ctx, const pt2::Node& node) { translate_pad(ctx, node, PadMode::Replicate); });
  }
  registry.add("torch.ops.aten.split_with_sizes.default", translate_split_with_sizes);
  registry.add("torch.ops.aten.split_with_sizes_copy.default", translate_split_with_sizes);
  registry.add("torch.ops.aten.diagonal.default", translate_diagonal);
  registry.add("torch.ops.aten.unfold.default", translate_unfold);
  registry.add("torch.ops.aten.diagonal_copy.default", translate_diagonal);
  registry.add("torch.ops.aten.fill.Scalar", translate_fill);
  registry.add("torch.ops.aten.copy.default", translate_copy);
  for (const char* target : {"torch.ops.aten.clone.default", "torch.ops.aten.alias.default",
                             "torch.ops.aten.detach.default", "torch.ops.aten.lift_fresh_copy.default",
                             "torch.ops.aten.contiguous.default"}) {
    registry.add(target, translate_identity);
  }
  registry.add("torch.ops.aten.alias_copy.default", translate_identity);
  registry.add("torch.ops.aten.squeeze_copy.dim", translate_squeeze);
  registry.add("torch.ops.aten.squeeze_copy.dims", translate_squeeze);
  registry.add("torch.ops.aten.squeeze_copy.default", translate_squeeze);
  registry.add("torch.ops.aten.tril.default", [](Context& ctx, const pt2::Node& node) { translate_triangle(ctx, node, true); });
  registry.add("torch.ops.aten.triu.default", [](Context& ctx, const pt2::Node& node) { translate_triangle(ctx, node, false); });
  registry.add("torch.ops.aten.roll.default", translate_roll);
  registry.add("torch.ops.aten.rot90.default", translate_rot90);
  registry.add("torch.ops.aten.unbind.int", translate_unbind);
  registry.add("torch.ops.aten.split.Tensor", translate_split);
  registry.add("torch.ops.aten.stack.default", translate_stack);
  registry.add("torch.ops.aten.diag_embed.default", translate_diag_embed);
  registry.add("torch.ops.aten.pixel_shuffle.default",
               [](Context& ctx, const pt2::Node& node) { translate_pixel_shuffle(ctx, node, true); });
  registry.add("torch.ops.aten.pixel_unshuffle.default",
               [](Context& ctx, const pt2::Node& node) { translate_pixel_shuffle(ctx, node, false); });
  registry.add("torch.ops.aten.eye.default", translate_eye);
  registry.add("torch.ops.aten.eye.m", translate_eye);
  registry.add("torch.ops.aten.linspace.default", translate_linspace);
  registry.add("torch.ops.aten.logspace.default", translate_logspace);
  registry.add("torch.ops.aten._to_copy.default", translate_to_copy);
  registry.add("torch.ops.aten.to.dtype", translate_to_copy);
  registry.add("torch.ops.aten.to.dtype_layout", translate_to_copy);
}

}  // namespace luminal::frontend
