#include "codegen/cuda_codegen.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>
#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "ir/simplify.h"
#include "passes/passes.h"
#include "passes/row_plan.h"

namespace luminal::codegen {

using ir::Expr;
using ir::ExprOp;
using ir::Node;
using ir::NodeKind;

namespace {

constexpr size_t kMaxPieces = 256;
constexpr int64_t kWarpFoldLength = 64;

// Grouped-rows GEMM tiles (see KernelWriter::write_grouped_rows).
constexpr int kGroupedTile = 64;
constexpr int kGroupedThreads = 128;
constexpr const char* kGroupedRowsKernel = R"(
// acc += as[rows of this warp] x bs[columns of this warp]^T over one 32-deep k step.
__device__ __forceinline__ void LM_KERNEL_tile_product(const @SMEM_T@ (*as)[40], const @SMEM_T@ (*bs)[40],
                                                       float (&acc)[2][4][4], int wm, int wn, int quad, int pair) {
#if @USE_MMA@ && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  #pragma unroll
  for (int kk = 0; kk < 32; kk += 16) {
    unsigned fa[2][4], fb[4][2];
    #pragma unroll
    for (int i = 0; i < 2; ++i) {
      const unsigned short* top = &as[wm + i * 16 + quad][kk + pair];
      const unsigned short* bottom = top + 8 * 40;
      fa[i][0] = *(const unsigned*)top;
      fa[i][1] = *(const unsigned*)bottom;
      fa[i][2] = *(const unsigned*)(top + 8);
      fa[i][3] = *(const unsigned*)(bottom + 8);
    }
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned short* column = &bs[wn + j * 8 + quad][kk + pair];
      fb[j][0] = *(const unsigned*)column;
      fb[j][1] = *(const unsigned*)(column + 8);
    }
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.@MMA_TYPE@.@MMA_TYPE@.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
            : "r"(fa[i][0]), "r"(fa[i][1]), "r"(fa[i][2]), "r"(fa[i][3]), "r"(fb[j][0]), "r"(fb[j][1]));
  }
#else
  // The same fragment ownership as the mma path, one FMA at a time.
  for (int kk = 0; kk < 32; ++kk) {
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c)
          acc[i][j][c] += @FROM_SMEM@(as[wm + i * 16 + quad + (c >> 1) * 8][kk]) * @FROM_SMEM@(bs[wn + j * 8 + pair + (c & 1)][kk]);
  }
#endif
}

extern "C" __global__ void __launch_bounds__(128) LM_KERNEL(const LM_KERNEL_params p) {
  const lm_i64 lm_m = @M@, lm_n = @N@, lm_k = @K@, lm_groups = @G@;
  const lm_i64 lm_a_row_stride = @A_ROW_STRIDE@, lm_b_group_stride = @B_GROUP_STRIDE@, lm_b_col_stride = @B_COL_STRIDE@;
  const bool lm_b_k_contiguous = @B_K_STRIDE@ == 1;
  // Whole 16-byte vectors: k-contiguous, every row/column start and the end of k vector-aligned.
  constexpr int LM_VEC = 16 / sizeof(@SMEM_T@);
  const bool lm_a_vectors = @A_K_STRIDE@ == 1 && lm_a_row_stride % LM_VEC == 0 && lm_k % LM_VEC == 0 &&
                            ((unsigned long long)p.in0 & 15ull) == 0;
  const bool lm_b_vectors = lm_b_k_contiguous && lm_b_col_stride % LM_VEC == 0 && lm_b_group_stride % LM_VEC == 0 &&
                            lm_k % LM_VEC == 0 && ((unsigned long long)p.in1 & 15ull) == 0;
  // Two stages: [row or column][k], 8 elements of padding per row against bank conflicts.
  __shared__ __align__(16) @SMEM_T@ lm_as[2][64][40];
  __shared__ __align__(16) @SMEM_T@ lm_bs[2][64][40];
  const int lm_tid = threadIdx.x, lm_warp = lm_tid >> 5, lm_lane = lm_tid & 31;
  const int lm_quad = lm_lane >> 2, lm_pair = (lm_lane & 3) * 2;  // mma fragment coordinates
  const int lm_wm = (lm_warp >> 1) * 32, lm_wn = (lm_warp & 1) * 32;
  const lm_i64 lm_col_tiles = (lm_n + 63) / 64;
  const lm_i64 lm_tiles = ((lm_m + 63) / 64 + lm_groups + 1) * lm_col_tiles;
  for (lm_i64 lm_tile = blockIdx.x; lm_tile < lm_tiles; lm_tile += gridDim.x) {
    const lm_i64 lm_col0 = (lm_tile % lm_col_tiles) * 64;
    // Row tile number `slot` of the concatenation of every group's row tiles (group lm_groups:
    // the rows past the last end).
    lm_i64 lm_slot = lm_tile / lm_col_tiles, lm_start = 0, lm_row0 = 0, lm_row1 = 0, lm_group = -1;
    for (lm_i64 g = 0; g <= lm_groups; ++g) {
      lm_i64 lm_end = lm_m;
      if (g < lm_groups) {
        lm_end = LM_KERNEL_end(p, g);
        if (lm_end < lm_start || lm_end > lm_m) {
          lm_report(p.error, 1, lm_end - lm_start, lm_m - lm_start + 1, -1);
          lm_end = lm_end < lm_start ? lm_start : lm_m;
        }
      }
      const lm_i64 lm_count = (lm_end - lm_start + 63) / 64;
      if (lm_slot < lm_count) {
        lm_group = g;
        lm_row0 = lm_start + lm_slot * 64;
        lm_row1 = min(lm_row0 + 64, lm_end);
        break;
      }
      lm_slot -= lm_count;
      lm_start = lm_end;
    }
    if (lm_group < 0) continue;  // the same for the whole block: no thread waits at a barrier alone
    float lm_acc[2][4][4];
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c) lm_acc[i][j][c] = 0.0f;
    if (lm_group < lm_groups && lm_k > 0 && lm_a_vectors && lm_b_vectors) {
      // Pipelined: the next k step's tiles are in flight (cp.async) while this one multiplies.
      const auto issue = [&](int stage, lm_i64 k0) {
        for (int e = lm_tid; e < 64 * 32 / LM_VEC; e += 128) {
          const int r = e / (32 / LM_VEC), kk = (e % (32 / LM_VEC)) * LM_VEC;
          const lm_i64 row = lm_row0 + r, col = lm_col0 + r, k = k0 + kk;
          const bool a_ok = row < lm_row1 && k < lm_k, b_ok = col < lm_n && k < lm_k;
          lm_copy16(&lm_as[stage][r][kk], a_ok ? p.in0 + row * lm_a_row_stride + k : p.in0, a_ok);
          lm_copy16(&lm_bs[stage][r][kk], b_ok ? p.in1 + lm_group * lm_b_group_stride + col * lm_b_col_stride + k : p.in1, b_ok);
        }
        lm_copy16_commit();
      };
      issue(0, 0);
      int stage = 0;
      for (lm_i64 lm_k0 = 0; lm_k0 < lm_k; lm_k0 += 32) {
        if (lm_k0 + 32 < lm_k) {
          issue(stage ^ 1, lm_k0 + 32);
          lm_copy16_wait_all_but_last();
        } else {
          lm_copy16_wait_all();
        }
        __syncthreads();
        LM_KERNEL_tile_product(lm_as[stage], lm_bs[stage], lm_acc, lm_wm, lm_wn, lm_quad, lm_pair);
        __syncthreads();
        stage ^= 1;
      }
    } else {
      for (lm_i64 lm_k0 = 0; lm_group < lm_groups && lm_k0 < lm_k; lm_k0 += 32) {
        if (lm_a_vectors) {
          for (int e = lm_tid; e < 64 * 32 / LM_VEC; e += 128) {
            const int r = e / (32 / LM_VEC), kk = (e % (32 / LM_VEC)) * LM_VEC;
            const lm_i64 row = lm_row0 + r, k = lm_k0 + kk;
            lm_vec16 v = {0u, 0u, 0u, 0u};
            if (row < lm_row1 && k < lm_k) v = *(const lm_vec16*)(p.in0 + row * lm_a_row_stride + k);
            *(lm_vec16*)&lm_as[0][r][kk] = v;
          }
        } else {
          for (int e = lm_tid; e < 64 * 32; e += 128) {
            const int r = e >> 5, kk = e & 31;
            const lm_i64 row = lm_row0 + r, k = lm_k0 + kk;
            lm_as[0][r][kk] = @TO_SMEM@((row < lm_row1 && k < lm_k) ? LM_KERNEL_a(p, row, k) : 0.0f);
          }
        }
        for (int e = lm_tid; e < 64 * 32; e += 128) {
          // Neighbouring threads read neighbouring elements: along k when b is k-contiguous, else along n.
          const int c = lm_b_k_contiguous ? e >> 5 : e & 63, kk = lm_b_k_contiguous ? e & 31 : e >> 6;
          const lm_i64 col = lm_col0 + c, k = lm_k0 + kk;
          lm_bs[0][c][kk] = @TO_SMEM@((col < lm_n && k < lm_k) ? LM_KERNEL_b(p, lm_group, k, col) : 0.0f);
        }
        __syncthreads();
        LM_KERNEL_tile_product(lm_as[0], lm_bs[0], lm_acc, lm_wm, lm_wn, lm_quad, lm_pair);
        __syncthreads();
      }
    }
    #pragma unroll
    for (int i = 0; i < 2; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j)
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const lm_i64 row = lm_row0 + lm_wm + i * 16 + lm_quad + (c >> 1) * 8;
          const lm_i64 col = lm_col0 + lm_wn + j * 8 + lm_pair + (c & 1);
          if (row < lm_row1 && col < lm_n) p.out[row * lm_n + col] = LM_KERNEL_store(lm_acc[i][j][c]);
        }
  }
}
)";

// ------------------------------------------------------------------------------------------------
// Types and literals
// ------------------------------------------------------------------------------------------------

// The C type a value of `dtype` has inside a kernel (f16/bf16 are computed as float).
const char* value_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::U8: return "unsigned char";
    case DType::I8: return "signed char";
    case DType::I16: return "short";
    case DType::I32: return "int";
    case DType::I64: return "lm_i64";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

// The C type of an element in memory.
const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::U8: return "unsigned char";
    case DType::F16:
    case DType::BF16: return "unsigned short";
    default: return value_type(dtype);
  }
}

// The unsigned type used for wrap-around arithmetic of a signed integer type.
// (32 bits for the narrow types too: their products must not overflow int after promotion.)
const char* unsigned_type(DType dtype) { return dtype == DType::I64 ? "lm_u64" : "unsigned int"; }

std::string hex_bits(uint64_t bits) {
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

std::string float_literal(double value, DType dtype) {
  if (dtype == DType::F64) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return "__longlong_as_double(" + hex_bits(bits) + "ull)";
  }
  const float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return "__int_as_float(" + hex_bits(bits) + ")";
}

std::string int_literal(int64_t value, DType dtype) {
  if (dtype == DType::Bool) return value ? "true" : "false";
  if (value == INT64_MIN) return str_cat("((", value_type(dtype), ")(-9223372036854775807LL - 1))");
  return str_cat("((", value_type(dtype), ")", value, "LL)");
}

std::string sanitize(const std::string& symbol) {
  std::string out = "s_";
  for (char c : symbol) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// ------------------------------------------------------------------------------------------------
// Kernel writer
// ------------------------------------------------------------------------------------------------
class KernelWriter {
 public:
  // `check_labels`: where the labels of the checks go (shared by the nodes of a row kernel);
  // null: the writer's own list, which name_and_finish hands to the kernel.
  KernelWriter(const Node& node, const std::vector<OperandInfo>& operands,
               std::vector<std::string>* check_labels = nullptr)
      : node_(node), operands_(operands), check_labels_(check_labels ? check_labels : &own_check_labels_) {}

  // ---- shape expressions (i64, symbols only) ----
  static std::string shape_code(const Expr& e) {
    switch (e->op) {
      case ExprOp::Const: return str_cat(e->int_value, "LL");
      case ExprOp::Symbol: return "p." + sanitize(e->symbol);
      case ExprOp::Add: return str_cat("(", shape_code(e->args[0]), " + ", shape_code(e->args[1]), ")");
      case ExprOp::Mul: return str_cat("(", shape_code(e->args[0]), " * ", shape_code(e->args[1]), ")");
      case ExprOp::FloorDiv:
        return str_cat("lm_floordiv_s(", shape_code(e->args[0]), ", ", shape_code(e->args[1]), ")");
      case ExprOp::Mod: return str_cat("lm_mod_s(", shape_code(e->args[0]), ", ", shape_code(e->args[1]), ")");
      case ExprOp::Max: return str_cat("max(", shape_code(e->args[0]), ", ", shape_code(e->args[1]), ")");
      case ExprOp::Min: return str_cat("min(", shape_code(e->args[0]), ", ", shape_code(e->args[1]), ")");
      default: fail("internal error: cannot emit shape expression ", ir::to_string(e));
    }
  }

  static std::string replace_all(std::string text, const std::string& from, const std::string& to) {
    for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
      text.replace(pos, from.size(), to);
    }
    return text;
  }

  // A grouped-rows contraction (ir::Contraction::GroupedRows) as a tiled grouped GEMM: 64x64
  // output tiles of one group each, K in steps of 32 staged through shared memory, four warps of
  // 32x32. bf16/f16 multiply on tensor cores (mma.sync, sm_80+); f32, and older GPUs, with FMAs.
  // Operands are read through the same load code as any kernel (any layout, run-time strides).
  Kernel write_grouped_rows() {
    const DType in = operands_.at(0).dtype;
    const Expr rows = node_.shape[0], cols = node_.shape[1];
    const Expr inner = operands_.at(0).shape[1], groups = operands_.at(1).shape[0];
    const bool transposed = node_.contraction == ir::Contraction::GroupedRowsTransposedB;  // b is [G, N, K]
    Kernel kernel;
    kernel.block_size = kGroupedThreads;
    kernel.threads_per_output = kGroupedThreads;
    // Tiles: per column tile, at most ceil(M / 64) + G row tiles (one partial tile per group) plus
    // the tail of rows past the last end (written as zeros).
    const Expr tile = ir::int_const(kGroupedTile);
    const auto tiles_of = [&](const Expr& n) { return ir::floordiv(ir::add(n, ir::int_const(kGroupedTile - 1)), tile); };
    kernel.outputs = ir::simplify(ir::mul(ir::add(ir::add(tiles_of(rows), groups), ir::int_const(1)), tiles_of(cols)), {});

    add_node_params();
    const Expr i0 = ir::loop_var(0), i1 = ir::loop_var(1), i2 = ir::loop_var(2);
    std::ostringstream text;
    text << params_declaration();
    text << element_function("LM_KERNEL_a", "float", ir::cast(ir::load(0, in, {i0, i1}), DType::F32), 2);
    // LM_KERNEL_b(p, g, k, n)
    const std::vector<Expr> b_index = transposed ? std::vector<Expr>{i0, i2, i1} : std::vector<Expr>{i0, i1, i2};
    text << element_function("LM_KERNEL_b", "float", ir::cast(ir::load(1, in, b_index), DType::F32), 3);
    text << element_function("LM_KERNEL_end", "lm_i64", ir::cast(ir::load(2, DType::I32, {i0}), DType::I64), 1);
    const bool half = in == DType::BF16 || in == DType::F16;
    text << "__device__ __forceinline__ " << storage_type(node_.dtype) << " LM_KERNEL_store(float v) { return "
         << store_code("v") << "; }\n";
    std::string body = kGroupedRowsKernel;
    body = replace_all(body, "@M@", shape_code(rows));
    body = replace_all(body, "@N@", shape_code(cols));
    body = replace_all(body, "@K@", shape_code(inner));
    body = replace_all(body, "@G@", shape_code(groups));
    const std::vector<std::string> a_strides = operand_strides(0), b_strides = operand_strides(1);
    body = replace_all(body, "@A_ROW_STRIDE@", str_cat("(", a_strides.at(0), ")"));
    body = replace_all(body, "@A_K_STRIDE@", str_cat("(", a_strides.at(1), ")"));
    body = replace_all(body, "@B_GROUP_STRIDE@", str_cat("(", b_strides.at(0), ")"));
    body = replace_all(body, "@B_K_STRIDE@", str_cat("(", b_strides.at(transposed ? 2 : 1), ")"));
    body = replace_all(body, "@B_COL_STRIDE@", str_cat("(", b_strides.at(transposed ? 1 : 2), ")"));
    body = replace_all(body, "@SMEM_T@", half ? "unsigned short" : "float");
    body = replace_all(body, "@TO_SMEM@", in == DType::BF16 ? "lm_f2bf" : in == DType::F16 ? "lm_f2h" : "");
    body = replace_all(body, "@FROM_SMEM@", in == DType::BF16 ? "lm_bf2f" : in == DType::F16 ? "lm_h2f" : "");
    body = replace_all(body, "@USE_MMA@", half ? "1" : "0");
    body = replace_all(body, "@MMA_TYPE@", in == DType::F16 ? "f16" : "bf16");
    text << body;
    name_and_finish(kernel, text.str());
    return kernel;
  }

  // A scatter (ir::NodeKind::Scatter): one thread per element of the domain computes its target
  // and value and writes it (an assignment's winner among duplicate targets is unspecified, as in
  // eager), or adds it atomically, rounded once per add. The base was copied into the output
  // before (or the output is the base's own memory). A failed bounds check writes nothing.
  Kernel write_scatter() {
    Kernel kernel;
    kernel.outputs = ir::simplify(ir::product(node_.scatter_domain), {});
    add_node_params();
    const int root = open_scope(-1, {}, false);
    std::vector<std::string> coordinates;
    for (const Expr& target : node_.scatter_targets) coordinates.push_back(emit(target, root));
    const std::string value = emit(node_.body, root);
    std::ostringstream out;
    out << "extern \"C\" __global__ void __launch_bounds__(256) LM_KERNEL(const LM_KERNEL_params p) {\n";
    out << "  const lm_i64 lm_n = " << shape_code(kernel.outputs) << ";\n";
    out << "  for (lm_i64 lm_flat = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x; lm_flat < lm_n;"
        << " lm_flat += (lm_i64)gridDim.x * blockDim.x) {\n";
    out << "    bool lm_ok = true; (void)lm_ok;\n";
    out << unravel("lm_flat", 4, node_.scatter_domain);
    out << scopes_[root]->code.str();
    std::string offset = "0LL";
    Expr stride = ir::int_const(1);
    for (size_t d = node_.rank(); d-- > 0;) {
      offset = str_cat("(", offset, " + ", coordinates[d], " * ", shape_code(ir::simplify(stride, {})), ")");
      stride = ir::mul(stride, node_.shape[d]);
    }
    out << "    if (!lm_ok) continue;\n";
    out << "    " << storage_type(node_.dtype) << "* const lm_target = p.out + " << offset << ";\n";
    out << "    " << (node_.scatter_accumulate ? accumulate_code("lm_target", value) : str_cat("*lm_target = ", store_code(value), ";")) << "\n";
    out << "  }\n}\n";
    name_and_finish(kernel, params_declaration() + out.str());
    return kernel;
  }

  // An atomic `*target = round(*target + value)` in the node's dtype (prelude helpers).
  std::string accumulate_code(const std::string& target, const std::string& value) const {
    switch (node_.dtype) {
      case DType::F32: return str_cat("atomicAdd(", target, ", ", value, ");");
      case DType::F64: return str_cat("atomicAdd(", target, ", ", value, ");");
      case DType::F16: return str_cat("lm_atomic_add_h(", target, ", ", value, ");");
      case DType::BF16: return str_cat("lm_atomic_add_bf(", target, ", ", value, ");");
      case DType::I64: return str_cat("atomicAdd((lm_u64*)", target, ", (lm_u64)", value, ");");
      case DType::I32: return str_cat("atomicAdd((unsigned int*)", target, ", (unsigned int)", value, ");");
      case DType::I16: return str_cat("lm_atomic_add_narrow(", target, ", (unsigned int)", value, ", 16u);");
      case DType::I8:
      case DType::U8: return str_cat("lm_atomic_add_narrow(", target, ", (unsigned int)", value, ", 8u);");
      case DType::Bool: return str_cat("if (", value, " != 0) *", target, " = 1;");
    }
    fail("internal error: scatter accumulation of ", dtype_name(node_.dtype));
  }

  Kernel write() {
    Kernel kernel;
    kernel.outputs = ir::product(node_.shape);
    std::vector<passes::PointwisePiece> pieces;
    if (node_.kind == NodeKind::Reduce) {
      kernel.schedule = choose_reduce_schedule();
    } else {
      pieces = passes::split_pointwise(node_);
      if (pieces.size() > 1 && pieces.size() <= kMaxPieces) {
        kernel.schedule = Schedule::Pieces;
        kernel.grid_y = static_cast<int>(pieces.size());
        Expr largest = ir::int_const(0);
        for (const passes::PointwisePiece& piece : pieces) largest = ir::max(largest, ir::product(piece_shape(piece)));
        kernel.outputs = ir::simplify(largest, {});
      } else if (has_long_top_level_fold(node_.body)) {
        kernel.schedule = Schedule::WarpPerOutput;
      }
    }
    kernel.threads_per_output = kernel.schedule == Schedule::WarpPerOutput ? 32 : 1;
    warp_mode_ = kernel.schedule == Schedule::WarpPerOutput;

    add_node_params();

    std::string body;
    switch (kernel.schedule) {
      case Schedule::Elementwise: body = elementwise_body(); break;
      case Schedule::Pieces: body = pieces_body(pieces); break;
      case Schedule::WarpPerOutput: body = node_.kind == NodeKind::Reduce ? reduce_body(kernel.schedule) : elementwise_body(); break;
      case Schedule::ThreadPerOutput: body = reduce_body(kernel.schedule); break;
    }
    name_and_finish(kernel, params_declaration() + body);
    return kernel;
  }

 private:
  // ---- parameters ----
  // A node kernel's parameters: output, inputs, error flag, symbols, then the run-time strides of
  // strided (graph input) operands.
  void add_node_params() {
    add_param(ParamKind::Output);
    for (size_t slot = 0; slot < operands_.size(); ++slot) add_param(ParamKind::Input, static_cast<int>(slot));
    add_param(ParamKind::ErrorFlag);
    add_param(ParamKind::CheckBase);
    collect_symbols();
    for (size_t slot = 0; slot < operands_.size(); ++slot) {
      if (operands_[slot].layout != Layout::Strided) continue;
      for (size_t d = 0; d < operands_[slot].shape.size(); ++d) {
        add_param(ParamKind::InputStride, static_cast<int>(slot), static_cast<int>(d));
      }
    }
  }

  // Names the kernel by its text, so that equal kernels share one compiled function.
  void name_and_finish(Kernel& kernel, const std::string& text) const {
    kernel.name = str_cat("lm_", hex_bits(std::hash<std::string>{}(text)).substr(2));
    kernel.source = replace_all(text, "LM_KERNEL", kernel.name);
    kernel.params = params_;
    kernel.check_labels = *check_labels_;
  }

  // The kernel-local id of a check label.
  size_t check_label_id(const std::string& label) {
    const auto found = std::find(check_labels_->begin(), check_labels_->end(), label);
    if (found != check_labels_->end()) return static_cast<size_t>(found - check_labels_->begin());
    check_labels_->push_back(label);
    return check_labels_->size() - 1;
  }

  void add_param(ParamKind kind, int slot = -1, int dim = -1, std::string symbol = "") {
    KernelParam p;
    p.kind = kind;
    p.slot = slot;
    p.dim = dim;
    p.symbol = std::move(symbol);
    params_.push_back(std::move(p));
  }

  void collect_symbols() {
    std::vector<std::string> names;
    auto collect = [&](const Expr& e) { ir::collect_symbols(e, names); };
    for (const Expr& dim : node_.shape) collect(dim);
    if (node_.body) collect(node_.body);
    for (const Expr& e : node_.reduce_extents) collect(e);
    for (const Expr& e : node_.scatter_domain) collect(e);
    for (const Expr& e : node_.scatter_targets) collect(e);
    for (const OperandInfo& op : operands_) {
      for (const Expr& dim : op.shape) collect(dim);
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const std::string& name : names) add_param(ParamKind::Symbol, -1, -1, name);
  }

  std::string params_declaration() const {
    std::ostringstream out;
    out << "struct LM_KERNEL_params {\n";
    for (size_t k = 0; k < params_.size(); ++k) {
      const KernelParam& p = params_[k];
      switch (p.kind) {
        case ParamKind::Output: out << "  " << storage_type(node_.dtype) << "* out;\n"; break;
        case ParamKind::Input:
          out << "  const " << storage_type(operands_[p.slot].dtype) << "* __restrict__ in" << p.slot << ";\n";
          break;
        case ParamKind::ErrorFlag: out << "  lm_i64* error;\n"; break;
        case ParamKind::CheckBase: out << "  lm_i64 check_base;\n"; break;
        case ParamKind::Symbol: out << "  lm_i64 " << sanitize(p.symbol) << ";\n"; break;
        case ParamKind::InputStride: out << "  lm_i64 stride" << p.slot << "_" << p.dim << ";\n"; break;
        case ParamKind::NodePointer:
        case ParamKind::NodeStride: fail("internal error: row-kernel parameter in a node kernel");
      }
    }
    out << "};\n";
    return out.str();
  }

  // The C name of input `slot`'s pointer.
  std::string operand_pointer(int slot) const {
    const OperandInfo& op = operands_.at(slot);
    return op.name.empty() ? str_cat("p.in", slot) : op.name;
  }

  // Element strides of input `slot`, one C expression per dimension.
  std::vector<std::string> operand_strides(int slot) const {
    const OperandInfo& op = operands_.at(slot);
    std::vector<std::string> strides(op.shape.size());
    switch (op.layout) {
      case Layout::Strided:
        for (size_t d = 0; d < strides.size(); ++d) {
          strides[d] = op.name.empty() ? str_cat("p.stride", slot, "_", d) : str_cat(op.name, "_s", d);
        }
        break;
      case Layout::Row: fail("internal error: row operands have no memory strides");
      case Layout::Fixed:
        for (size_t d = 0; d < strides.size(); ++d) strides[d] = str_cat(op.fixed_strides.at(d), "LL");
        break;
      case Layout::Contiguous: {
        Expr stride = ir::int_const(1);
        for (size_t d = strides.size(); d-- > 0;) {
          strides[d] = shape_code(ir::simplify(stride, {}));
          stride = ir::mul(stride, op.shape[d]);
        }
        break;
      }
    }
    return strides;
  }

  // ---- expressions (SSA statements in nested scopes) ----
  // A scope is the root of a work item, a loop (the node's reduction or a fold) or one branch of a
  // lazily evaluated `where`. Values are emitted in the outermost scope they may live in: out of
  // loops whose variables they do not read, but never out of a branch (the other branch must not
  // pay for them). A scope's code is pasted into its parent when it is closed.
  struct Scope {
    int parent = -1;
    std::vector<int> vars;  // reduce variables bound by this scope
    bool branch = false;
    std::unordered_map<Expr, std::string, ir::ExprHash, ir::ExprEqual> names;  // structural CSE
    std::ostringstream code;
    int indent = 4;
  };

  int open_scope(int parent, std::vector<int> vars, bool branch) {
    auto scope = std::make_unique<Scope>();
    scope->parent = parent;
    scope->vars = std::move(vars);
    scope->branch = branch;
    scope->indent = parent >= 0 ? scopes_[parent]->indent + 2 : 4;
    scopes_.push_back(std::move(scope));
    return static_cast<int>(scopes_.size()) - 1;
  }

  bool inside_loop(int scope) const {
    for (int s = scope; s >= 0; s = scopes_[s]->parent) {
      if (!scopes_[s]->vars.empty()) return true;
    }
    return false;
  }

  int placement(const Expr& e, int scope) {
    const std::vector<int>& vars = free_vars(e);
    while (scopes_[scope]->parent >= 0 && !scopes_[scope]->branch) {
      bool binds = false;
      for (int v : scopes_[scope]->vars) binds = binds || std::find(vars.begin(), vars.end(), v) != vars.end();
      if (binds) break;
      scope = scopes_[scope]->parent;
    }
    return scope;
  }

  const std::vector<int>& free_vars(const Expr& e) {
    auto it = free_vars_.find(e.get());
    if (it == free_vars_.end()) it = free_vars_.emplace(e.get(), ir::free_reduce_vars(e)).first;
    return it->second;
  }

  std::string fresh() { return str_cat("v", counter_++); }

  void line(int scope, const std::string& text) {
    scopes_[scope]->code << std::string(scopes_[scope]->indent, ' ') << text << "\n";
  }

  // Emits `e` (as needed from `scope`) and returns the C expression naming its value.
  std::string emit(const Expr& e, int scope) {
    const int target = placement(e, scope);
    for (int s = target; s >= 0; s = scopes_[s]->parent) {
      if (auto it = scopes_[s]->names.find(e); it != scopes_[s]->names.end()) return it->second;
    }
    if (e->op == ExprOp::Fold) return emit_fold(e, target);
    if (e->op == ExprOp::Where && (expensive(e->args[1]) || expensive(e->args[2]))) return emit_lazy_where(e, target);
    const std::string value = value_code(e, target);
    // Variables, symbols and literals are used in place; everything else gets a name.
    if (e->op == ExprOp::LoopVar || e->op == ExprOp::ReduceVar || e->op == ExprOp::Symbol || e->op == ExprOp::Const) {
      scopes_[target]->names.emplace(e, value);
      return value;
    }
    const std::string name = fresh();
    line(target, str_cat("const ", value_type(e->dtype), " ", name, " = ", value, ";"));
    scopes_[target]->names.emplace(e, name);
    return name;
  }

  // Branches that load memory or loop are evaluated only when selected.
  bool expensive(const Expr& e) {
    if (auto it = expensive_.find(e.get()); it != expensive_.end()) return it->second;
    bool result = e->op == ExprOp::Load || e->op == ExprOp::Fold;
    for (const Expr& arg : e->args) result = result || expensive(arg);
    expensive_.emplace(e.get(), result);
    return result;
  }

  std::string emit_lazy_where(const Expr& e, int scope) {
    const std::string cond = emit(e->args[0], scope);
    const std::string name = fresh();
    line(scope, str_cat(value_type(e->dtype), " ", name, ";"));
    const int then_scope = open_scope(scope, {}, true);
    const std::string then_value = emit(e->args[1], then_scope);
    const int else_scope = open_scope(scope, {}, true);
    const std::string else_value = emit(e->args[2], else_scope);
    line(scope, str_cat("if (", cond, ") {"));
    scopes_[scope]->code << scopes_[then_scope]->code.str() << indented(then_scope, str_cat(name, " = ", then_value, ";"));
    line(scope, "} else {");
    scopes_[scope]->code << scopes_[else_scope]->code.str() << indented(else_scope, str_cat(name, " = ", else_value, ";"));
    line(scope, "}");
    scopes_[scope]->names.emplace(e, name);
    return name;
  }

  std::string indented(int scope, const std::string& text) const {
    return std::string(scopes_[scope]->indent, ' ') + text + "\n";
  }

  struct Combine {
    std::string acc_type, init, step;  // step uses `acc` and `val`
  };

  // fold(op, r < extent: body): a loop in its own scope; invariant parts of the body are hoisted.
  std::string emit_fold(const Expr& e, int scope) {
    const auto op = static_cast<ir::ReduceOp>(e->int_value);
    const Combine c = combine_code(op, e->dtype);
    const std::string extent = emit(e->args[0], scope);
    const std::string var = str_cat("r", e->index);
    const std::string acc = fresh();
    const int body_scope = open_scope(scope, {e->index}, false);
    scopes_[body_scope]->names.emplace(ir::reduce_var(e->index), var);
    const std::string value = emit(e->args[1], body_scope);
    // In warp mode a fold outside any loop is shared by the warp's lanes (the element is
    // warp-uniform); its partial results are combined across lanes with shuffles.
    const bool cooperative = warp_mode_ && !inside_loop(scope);
    std::optional<VectorFold> vector;
    if (!cooperative && !unroll_folds_) vector = emit_vector_fold(e, scope, c, acc);
    line(scope, str_cat(c.acc_type, " ", acc, " = ", c.init, ";"));
    if (vector) {
      line(scope, str_cat("if (", vector->condition, ") {"));
      line(scope, "#pragma unroll");
      line(scope, str_cat("for (lm_i64 ", var, " = 0; ", var, " < ", extent, "; ", var, " += ", kVectorWidth, ") {"));
      scopes_[scope]->code << vector->code;
      line(scope, "}");
      line(scope, "} else {");
    }
    // Row kernels unroll static folds, so that the row arrays they index stay in registers.
    if (unroll_folds_ && ir::as_int_const(e->args[0])) line(scope, "#pragma unroll");
    line(scope, str_cat("for (lm_i64 ", var, " = ", cooperative ? "lm_lane" : "0", "; ", var, " < ", extent, "; ",
                        var, cooperative ? " += 32" : "++", ") {"));
    scopes_[scope]->code << scopes_[body_scope]->code.str()
                         << indented(body_scope, str_cat("{ const ", c.acc_type, " val = (", c.acc_type, ")", value, "; ",
                                                         replace_all(c.step, "acc", acc), " }"));
    line(scope, "}");
    if (vector) line(scope, "}");
    if (cooperative) line(scope, replace_all(warp_combine(c), "acc", acc));
    const std::string name = fresh();
    line(scope, str_cat("const ", value_type(e->dtype), " ", name, " = ", rounding(e->dtype, str_cat("(", value_type(e->dtype), ")", acc)), ";"));
    scopes_[scope]->names.emplace(e, name);
    return name;
  }

  // ---- vectorized folds ----
  // A fold over a static [0, E), E a multiple of 4, whose loads that vary with the fold read f32
  // at [..., r] (r the fold's variable, unit stride, every other stride a multiple of 4): when
  // each such pointer is 16-byte aligned at run time, the loop steps by 4, reads one float4 per
  // load, and writes the body out for the 4 elements in order, so the sums are the scalar loop's.
  // It saves L1 traffic where neighbouring threads read different rows (DLRM's pairwise dot
  // products). Bodies with bounds checks, nested folds or lazily loaded branches that vary with r
  // keep the scalar loop only.
  static constexpr int kVectorWidth = 4;

  struct VectorFold {
    std::string condition;  // run-time: every vector load aligned (and unit innermost stride)
    std::string code;       // the vector loop's body
  };

  bool varies_with(const Expr& e, int var) {
    const std::vector<int>& vars = free_vars(e);
    return std::find(vars.begin(), vars.end(), var) != vars.end();
  }

  // The loads of `e` that vary with `var`, or false when a part varying with `var` rules the
  // vector loop out.
  bool vector_loads(const Expr& e, int var, std::vector<Expr>& loads, std::unordered_set<const ir::ExprNode*>& seen) {
    if (!seen.insert(e.get()).second || !varies_with(e, var)) return true;
    switch (e->op) {
      case ExprOp::Fold:
      case ExprOp::CheckIndex: return false;
      case ExprOp::Where:
        if (expensive(e->args[1]) || expensive(e->args[2])) return false;
        break;
      case ExprOp::Load: {
        if (e->masked || e->load_rank() == 0) return false;
        const OperandInfo& op = operands_.at(e->index);
        if (op.dtype != DType::F32 || op.layout == Layout::Row) return false;
        const size_t last = e->load_rank() - 1;
        const Expr& inner = e->args[last];
        if (inner->op != ExprOp::ReduceVar || inner->index != var) return false;
        for (size_t d = 0; d < last; ++d) {
          if (varies_with(e->args[d], var)) return false;
        }
        loads.push_back(e);
        return true;
      }
      default: break;
    }
    for (const Expr& arg : e->args) {
      if (!vector_loads(arg, var, loads, seen)) return false;
    }
    return true;
  }

  // The run-time condition under which `load` may read 4 elements at once, or "" if it never may.
  std::string vector_load_condition(const Expr& load) {
    const OperandInfo& op = operands_.at(load->index);
    const std::string pointer = operand_pointer(load->index);
    const size_t last = load->load_rank() - 1;
    std::string condition = str_cat("(((unsigned long long)", pointer, ") & 15ull) == 0ull");
    switch (op.layout) {
      case Layout::Contiguous: {
        // Outer strides are multiples of the innermost size.
        const std::optional<int64_t> inner = ir::as_int_const(op.shape[last]);
        if (!inner || *inner % kVectorWidth != 0) return "";
        break;
      }
      case Layout::Fixed:
        if (op.fixed_strides.at(last) != 1) return "";
        for (size_t d = 0; d < last; ++d) {
          if (op.fixed_strides[d] % kVectorWidth != 0) return "";
        }
        break;
      case Layout::Strided: {
        const std::vector<std::string> strides = operand_strides(load->index);
        condition += str_cat(" && ", strides[last], " == 1");
        for (size_t d = 0; d < last; ++d) condition += str_cat(" && (", strides[d], " & 3) == 0");
        break;
      }
      case Layout::Row: return "";
    }
    return condition;
  }

  std::optional<VectorFold> emit_vector_fold(const Expr& fold, int scope, const Combine& c, const std::string& acc) {
    const std::optional<int64_t> extent = ir::as_int_const(fold->args[0]);
    if (!extent || *extent <= 0 || *extent % kVectorWidth != 0) return std::nullopt;
    const int var = fold->index;
    std::vector<Expr> loads;
    std::unordered_set<const ir::ExprNode*> seen;
    if (!vector_loads(fold->args[1], var, loads, seen) || loads.empty()) return std::nullopt;
    std::vector<std::string> conditions;
    for (const Expr& load : loads) {
      conditions.push_back(vector_load_condition(load));
      if (conditions.back().empty()) return std::nullopt;
    }
    std::sort(conditions.begin(), conditions.end());
    conditions.erase(std::unique(conditions.begin(), conditions.end()), conditions.end());
    VectorFold vector;
    for (const std::string& condition : conditions) {
      vector.condition += (vector.condition.empty() ? "" : " && ") + condition;
    }
    // The loop scope binds nothing, so what does not vary with r is still hoisted out of it.
    const int loop = open_scope(scope, {}, false);
    const std::string r = str_cat("r", var);
    std::vector<std::string> vectors;
    for (const Expr& load : loads) {
      const std::vector<std::string> strides = operand_strides(load->index);
      const size_t last = load->load_rank() - 1;
      std::string offset = r;
      for (size_t d = 0; d < last; ++d) {
        const std::string index = emit(load->args[d], loop);
        offset += str_cat(" + ", index, strides[d] == "1LL" ? "" : str_cat(" * ", strides[d]));
      }
      const std::string pointer = operand_pointer(load->index);
      vectors.push_back(fresh());
      line(loop, str_cat("const float4 ", vectors.back(), " = lm_ok ? *reinterpret_cast<const float4*>(", pointer, " + (",
                         offset, ")) : make_float4(0.f, 0.f, 0.f, 0.f);"));
    }
    static constexpr const char* kComponents[kVectorWidth] = {".x", ".y", ".z", ".w"};
    for (int lane = 0; lane < kVectorWidth; ++lane) {
      const int body = open_scope(loop, {var}, false);
      scopes_[body]->names.emplace(ir::reduce_var(var), str_cat("(", r, " + ", lane, ")"));
      for (size_t k = 0; k < loads.size(); ++k) scopes_[body]->names.emplace(loads[k], vectors[k] + kComponents[lane]);
      const std::string value = emit(fold->args[1], body);
      scopes_[loop]->code << scopes_[body]->code.str()
                          << indented(body, str_cat("{ const ", c.acc_type, " val = (", c.acc_type, ")", value, "; ",
                                                    replace_all(c.step, "acc", acc), " }"));
    }
    vector.code = scopes_[loop]->code.str();
    return vector;
  }

  // Folds `e` evaluates whatever its data (not inside another fold or a lazy branch), each once.
  static std::vector<Expr> unconditional_folds(const Expr& root) {
    std::vector<Expr> found;
    std::unordered_set<const ir::ExprNode*> seen;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (!seen.insert(e.get()).second) return;
      if (e->op == ExprOp::Fold) {
        found.push_back(e);
        return;
      }
      if (e->op == ExprOp::Where) {
        walk(e->args[0]);
        return;
      }
      for (const Expr& arg : e->args) walk(arg);
    };
    walk(root);
    return found;
  }

  // Groups of folds (each group: one reduction and extent) as one loop with an accumulator per
  // fold. A single static group loops over its own variable (unrolled); several groups loop to the
  // longest extent and guard each group's body by its own extent.
  void emit_fold_groups(const std::vector<std::vector<Expr>>& groups, int scope) {
    struct Member {
      const Expr* fold;
      std::string acc, value;
      Combine c;
    };
    const bool single = groups.size() == 1;
    std::vector<std::string> extents;
    for (const std::vector<Expr>& group : groups) extents.push_back(emit(group.front()->args[0], scope));
    std::string counter = str_cat("r", groups.front().front()->index);
    std::string limit = extents.front();
    if (!single) {
      counter = fresh();
      limit = fresh();
      std::string longest = extents.front();
      for (size_t g = 1; g < extents.size(); ++g) longest = str_cat("max(", longest, ", ", extents[g], ")");
      line(scope, str_cat("const lm_i64 ", limit, " = ", longest, ";"));
    }
    std::vector<Member> members;
    std::ostringstream loop_body;
    for (size_t g = 0; g < groups.size(); ++g) {
      const Expr& first = groups[g].front();
      const std::string var = str_cat("r", first->index);
      const int body_scope = open_scope(scope, {first->index}, /*branch=*/!single);
      scopes_[body_scope]->names.emplace(ir::reduce_var(first->index), var);
      const Combine c = combine_code(static_cast<ir::ReduceOp>(first->int_value), first->dtype);
      std::vector<Member> group_members;
      for (const Expr& fold : groups[g]) {
        group_members.push_back({&fold, fresh(), emit(fold->args[1], body_scope), c});
        line(scope, str_cat(c.acc_type, " ", group_members.back().acc, " = ", c.init, ";"));
      }
      if (!single) loop_body << indented(body_scope, str_cat("if (", counter, " < ", extents[g], ") { const lm_i64 ", var,
                                                             " = ", counter, ";"));
      loop_body << scopes_[body_scope]->code.str();
      for (const Member& m : group_members) {
        loop_body << indented(body_scope, str_cat("{ const ", m.c.acc_type, " val = (", m.c.acc_type, ")", m.value, "; ",
                                                  replace_all(m.c.step, "acc", m.acc), " }"));
      }
      if (!single) loop_body << indented(body_scope, "}");
      members.insert(members.end(), group_members.begin(), group_members.end());
    }
    if (single && ir::as_int_const(groups.front().front()->args[0])) line(scope, "#pragma unroll");
    line(scope, str_cat("for (lm_i64 ", counter, " = 0; ", counter, " < ", limit, "; ", counter, "++) {"));
    scopes_[scope]->code << loop_body.str();
    line(scope, "}");
    for (const Member& m : members) {
      const std::string name = fresh();
      const DType t = (*m.fold)->dtype;
      line(scope, str_cat("const ", value_type(t), " ", name, " = ", rounding(t, str_cat("(", value_type(t), ")", m.acc)),
                          ";"));
      scopes_[scope]->names.emplace(*m.fold, name);
    }
  }

  std::string rounding(DType dtype, const std::string& value) const {
    if (dtype == DType::F16) return "lm_round_h(" + value + ")";
    if (dtype == DType::BF16) return "lm_round_bf(" + value + ")";
    return value;
  }

  std::string value_code(const Expr& e, int scope) {
    auto arg = [&](size_t k) { return emit(e->args[k], scope); };
    const DType t = e->dtype;
    const bool is_double = t == DType::F64;
    const std::string f = is_double ? "" : "f";  // math function suffix
    switch (e->op) {
      case ExprOp::Const:
        return is_floating(t) ? rounding(t, float_literal(e->float_value, t)) : int_literal(e->int_value, t);
      case ExprOp::LoopVar: return str_cat("i", e->index);
      case ExprOp::ReduceVar: return str_cat("r", e->index);
      case ExprOp::Symbol: return "p." + sanitize(e->symbol);
      case ExprOp::Load: return load_code(e, scope);
      case ExprOp::CheckIndex: {
        const std::string mask = e->masked ? arg(2) : "true";
        uses_checks_ = true;
        return str_cat("lm_check(", arg(0), ", ", arg(1), ", ", mask, ", p.error, lm_ok, p.check_base + ",
                       check_label_id(e->symbol), ")");
      }
      case ExprOp::Cast: return cast_code(e->args[0]->dtype, t, arg(0));
      case ExprOp::Where: return str_cat("(", arg(0), " ? ", arg(1), " : ", arg(2), ")");
      case ExprOp::IsNan:
        return is_floating(e->args[0]->dtype) ? str_cat("(", arg(0), " != ", arg(0), ")") : std::string("false");
      default: break;
    }
    if (ir::is_comparison_op(e->op)) {
      static const std::unordered_map<int, const char*> symbols = {
          {static_cast<int>(ExprOp::Eq), "=="}, {static_cast<int>(ExprOp::Ne), "!="},
          {static_cast<int>(ExprOp::Lt), "<"},  {static_cast<int>(ExprOp::Le), "<="},
          {static_cast<int>(ExprOp::Gt), ">"},  {static_cast<int>(ExprOp::Ge), ">="}};
      return str_cat("(", arg(0), " ", symbols.at(static_cast<int>(e->op)), " ", arg(1), ")");
    }
    if (is_floating(t)) return rounding(t, float_op(e, f, is_double, arg));
    return int_op(e, arg);
  }

  template <typename Arg>
  std::string float_op(const Expr& e, const std::string& f, bool is_double, Arg&& arg) {
    const std::string one = is_double ? "1.0" : "1.0f";
    const std::string zero = is_double ? "0.0" : "0.0f";
    const std::string sfx = is_double ? "d" : "f";
    switch (e->op) {
      case ExprOp::Neg: return "(-" + arg(0) + ")";
      case ExprOp::Abs: return str_cat("fabs", f, "(", arg(0), ")");
      case ExprOp::Relu: return str_cat("(", arg(0), " < ", zero, " ? ", zero, " : ", arg(0), ")");
      case ExprOp::Sigmoid: return str_cat("(", one, " / (", one, " + exp", f, "(-", arg(0), ")))");
      case ExprOp::Tanh: return str_cat("tanh", f, "(", arg(0), ")");
      case ExprOp::Exp: return str_cat("exp", f, "(", arg(0), ")");
      case ExprOp::Log: return str_cat("log", f, "(", arg(0), ")");
      case ExprOp::Sqrt: return str_cat("sqrt", f, "(", arg(0), ")");
      case ExprOp::Rsqrt: return str_cat("(", one, " / sqrt", f, "(", arg(0), "))");
      case ExprOp::Recip: return str_cat("(", one, " / ", arg(0), ")");
      case ExprOp::Sin: return str_cat("sin", f, "(", arg(0), ")");
      case ExprOp::Cos: return str_cat("cos", f, "(", arg(0), ")");
      case ExprOp::Erf: return str_cat("erf", f, "(", arg(0), ")");
      case ExprOp::Tan: return str_cat("tan", f, "(", arg(0), ")");
      case ExprOp::Asin: return str_cat("asin", f, "(", arg(0), ")");
      case ExprOp::Acos: return str_cat("acos", f, "(", arg(0), ")");
      case ExprOp::Atan: return str_cat("atan", f, "(", arg(0), ")");
      case ExprOp::Sinh: return str_cat("sinh", f, "(", arg(0), ")");
      case ExprOp::Cosh: return str_cat("cosh", f, "(", arg(0), ")");
      case ExprOp::Asinh: return str_cat("asinh", f, "(", arg(0), ")");
      case ExprOp::Acosh: return str_cat("acosh", f, "(", arg(0), ")");
      case ExprOp::Atanh: return str_cat("atanh", f, "(", arg(0), ")");
      case ExprOp::Expm1: return str_cat("expm1", f, "(", arg(0), ")");
      case ExprOp::Log1p: return str_cat("log1p", f, "(", arg(0), ")");
      case ExprOp::Log2: return str_cat("log2", f, "(", arg(0), ")");
      case ExprOp::Log10: return str_cat("log10", f, "(", arg(0), ")");
      case ExprOp::Exp2: return str_cat("exp2", f, "(", arg(0), ")");
      case ExprOp::Erfc: return str_cat("erfc", f, "(", arg(0), ")");
      case ExprOp::Erfinv: return str_cat("erfinv", f, "(", arg(0), ")");
      case ExprOp::Lgamma: return str_cat("lgamma", f, "(", arg(0), ")");
      // torch's Chebyshev evaluation gives NaN for +-inf; CUDA's gives inf.
      case ExprOp::I0: return str_cat("lm_i0_", sfx, "(", arg(0), ")");
      case ExprOp::GeluTanh: return str_cat("lm_gelu_tanh_", sfx, "(", arg(0), ")");
      case ExprOp::Floor: return str_cat("floor", f, "(", arg(0), ")");
      case ExprOp::Ceil: return str_cat("ceil", f, "(", arg(0), ")");
      case ExprOp::Trunc: return str_cat("trunc", f, "(", arg(0), ")");
      case ExprOp::Round: return str_cat("rint", f, "(", arg(0), ")");
      case ExprOp::Sign: return str_cat("lm_sign_", sfx, "(", arg(0), ")");
      case ExprOp::Add: return str_cat("(", arg(0), " + ", arg(1), ")");
      case ExprOp::Sub: return str_cat("(", arg(0), " - ", arg(1), ")");
      case ExprOp::Mul: return str_cat("(", arg(0), " * ", arg(1), ")");
      case ExprOp::Div: return str_cat("(", arg(0), " / ", arg(1), ")");
      case ExprOp::Pow: return str_cat("pow", f, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Atan2: return str_cat("atan2", f, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Hypot: return str_cat("hypot", f, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Fmod: return str_cat("fmod", f, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Copysign: return str_cat("copysign", f, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Max: return str_cat("lm_max_", sfx, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::Min: return str_cat("lm_min_", sfx, "(", arg(0), ", ", arg(1), ")");
      case ExprOp::FloorDiv: return str_cat("floor", f, "(", arg(0), " / ", arg(1), ")");
      case ExprOp::Mod: return str_cat("lm_pymod_", sfx, "(", arg(0), ", ", arg(1), ")");
      default: fail("internal error: cannot emit ", ir::expr_op_name(e->op), " on ", dtype_name(e->dtype));
    }
  }

  template <typename Arg>
  std::string int_op(const Expr& e, Arg&& arg) {
    const DType t = e->dtype;
    const std::string type = value_type(t);
    const std::string u = unsigned_type(t);
    auto wrap = [&](const char* op) {
      if (t == DType::Bool) return str_cat("((", arg(0), " ", op, " ", arg(1), ") != 0)");
      if (t == DType::U8) return str_cat("((", type, ")(", arg(0), " ", op, " ", arg(1), "))");
      return str_cat("((", type, ")((", u, ")", arg(0), " ", op, " (", u, ")", arg(1), "))");
    };
    switch (e->op) {
      case ExprOp::Neg: return str_cat("((", type, ")(0u - (", u, ")", arg(0), "))");
      case ExprOp::Abs: return str_cat("(", arg(0), " < 0 ? ((", type, ")(0u - (", u, ")", arg(0), ")) : ", arg(0), ")");
      case ExprOp::Relu: return str_cat("(", arg(0), " < 0 ? (", type, ")0 : ", arg(0), ")");
      case ExprOp::Sign: return str_cat("((", type, ")((", arg(0), " > 0) - (", arg(0), " < 0)))");
      case ExprOp::Not: return str_cat("(!", arg(0), ")");
      case ExprOp::BitNot:
        return t == DType::Bool ? str_cat("(!", arg(0), ")") : str_cat("((", type, ")~", arg(0), ")");
      case ExprOp::Floor:
      case ExprOp::Ceil:
      case ExprOp::Trunc:
      case ExprOp::Round: return arg(0);
      case ExprOp::Add: return wrap("+");
      case ExprOp::Sub: return wrap("-");
      case ExprOp::Mul: return t == DType::Bool ? str_cat("(", arg(0), " && ", arg(1), ")") : wrap("*");
      case ExprOp::FloorDiv: return str_cat("((", type, ")lm_floordiv((lm_i64)", arg(0), ", (lm_i64)", arg(1), ", p.error))");
      case ExprOp::Mod: return str_cat("((", type, ")lm_mod((lm_i64)", arg(0), ", (lm_i64)", arg(1), ", p.error))");
      case ExprOp::Max: return str_cat("(", arg(0), " > ", arg(1), " ? ", arg(0), " : ", arg(1), ")");
      case ExprOp::Min: return str_cat("(", arg(0), " < ", arg(1), " ? ", arg(0), " : ", arg(1), ")");
      case ExprOp::BitAnd: return str_cat("((", type, ")(", arg(0), " & ", arg(1), "))");
      case ExprOp::BitOr: return str_cat("((", type, ")(", arg(0), " | ", arg(1), "))");
      case ExprOp::BitXor: return str_cat("((", type, ")(", arg(0), " ^ ", arg(1), "))");
      // torch's shifts: a negative or too large amount shifts everything out (left) or gives the
      // sign fill (right); C++ leaves those undefined, so they are handled explicitly.
      case ExprOp::Shl: {
        const size_t bits = dtype_size(t) * 8;
        return str_cat("((", arg(1), " < 0 || ", arg(1), " >= ", bits, ") ? (", type, ")0 : (", type, ")((", u, ")",
                       arg(0), " << ", arg(1), "))");
      }
      case ExprOp::Shr: {
        const size_t max_shift = dtype_size(t) * 8 - (t == DType::U8 ? 0 : 1);
        return str_cat("((", arg(1), " < 0 || ", arg(1), " >= ", max_shift, ") ? (", type, ")(", arg(0), " >> ",
                       max_shift, ") : (", type, ")(", arg(0), " >> ", arg(1), "))");
      }
      case ExprOp::And: return str_cat("(", arg(0), " && ", arg(1), ")");
      case ExprOp::Or: return str_cat("(", arg(0), " || ", arg(1), ")");
      default: fail("internal error: cannot emit ", ir::expr_op_name(e->op), " on ", dtype_name(e->dtype));
    }
  }

  std::string cast_code(DType from, DType to, const std::string& value) const {
    if (from == to) return value;
    if (to == DType::Bool) return str_cat("(", value, " != 0)");
    if (is_floating(to)) {
      if (is_floating(from) && from != DType::F64 && to != DType::F64) return rounding(to, value);  // f32-class
      return rounding(to, str_cat("((", value_type(to), ")", value, ")"));
    }
    if (is_floating(from)) return str_cat("((", value_type(to), ")lm_f2i((double)", value, "))");
    return str_cat("((", value_type(to), ")", value, ")");
  }

  std::string load_code(const Expr& e, int scope) {
    const int slot = e->index;
    const OperandInfo& op = operands_.at(slot);
    if (op.layout == Layout::Row) return row_load_code(e, scope);
    const std::vector<std::string> strides = operand_strides(slot);
    std::string offset;
    for (size_t d = 0; d < e->load_rank(); ++d) {
      const std::string index = emit(e->args[d], scope);
      const std::string term = strides[d] == "1LL" ? index : str_cat(index, " * ", strides[d]);
      offset = offset.empty() ? term : str_cat(offset, " + ", term);
    }
    if (offset.empty()) offset = "0";
    std::string read = str_cat(operand_pointer(slot), "[", offset, "]");
    switch (op.dtype) {
      case DType::F16: read = "lm_h2f(" + read + ")"; break;
      case DType::BF16: read = "lm_bf2f(" + read + ")"; break;
      case DType::Bool: read = "(" + read + " != 0)"; break;
      default: break;
    }
    return guarded(e, read, scope);
  }

  // Reads that a failed check or a false mask must not perform yield 0.
  std::string guarded(const Expr& e, const std::string& read, int scope) {
    std::string guard = uses_checks_ ? "lm_ok" : "";
    if (e->masked) {
      const std::string mask = emit(e->mask(), scope);
      guard = guard.empty() ? mask : str_cat(guard, " && ", mask);
    }
    if (guard.empty()) return read;
    return str_cat("((", guard, ") ? ", read, " : (", value_type(e->dtype), ")0)");
  }

  // A read of the producer's row of the current batch index: dimensions 1.. index a contiguous
  // local array (the row planner proved that dimension 0 is i0).
  std::string row_load_code(const Expr& e, int scope) {
    const OperandInfo& op = operands_.at(e->index);
    Expr flat = ir::int_const(0);
    int64_t stride = 1;
    for (size_t d = e->load_rank(); d-- > 1;) {
      flat = ir::add(flat, ir::mul(e->args[d], ir::int_const(stride)));
      stride *= ir::as_int_const(op.shape[d]).value();
    }
    const std::string offset = emit(ir::simplify(flat, {}), scope);
    return guarded(e, str_cat(op.name, "[", offset, "]"), scope);
  }

 public:
  // Row kernels: the code computing this node's row for batch index i0 into `array`, one
  // statement per element from its specialized body (see passes::specialize_row_elements): every
  // row index is a constant, so rows stay in registers.
  std::string row_fragment(const std::string& array, const std::vector<Expr>& element_bodies) {
    unroll_folds_ = true;
    const int root = open_scope(-1, {}, false);
    // Folds that every element evaluates unconditionally and that share a loop (same reduction and
    // extent: an embedding bag's dimensions, a layer's outputs) run as one loop with one
    // accumulator each, so that the loads they share are issued once and their chains overlap.
    std::vector<std::vector<Expr>> groups;
    for (const Expr& body : element_bodies) {
      for (const Expr& fold : unconditional_folds(body)) {
        auto same_loop = [&](const std::vector<Expr>& group) {
          const Expr& g = group.front();
          return g->int_value == fold->int_value && g->index == fold->index && g->dtype == fold->dtype &&
                 ir::expr_equal(g->args[0], fold->args[0]);
        };
        auto it = std::find_if(groups.begin(), groups.end(), same_loop);
        if (it == groups.end()) {
          groups.push_back({fold});
        } else if (std::none_of(it->begin(), it->end(), [&](const Expr& f) { return ir::expr_equal(f, fold); })) {
          it->push_back(fold);
        }
      }
    }
    // Static groups unroll on their own; groups whose length depends on the data (embedding bags)
    // share one loop, so that the gathers of different tables are in flight together.
    std::vector<std::vector<Expr>> ragged;
    for (std::vector<Expr>& group : groups) {
      if (!ir::as_int_const(group.front()->args[0])) {
        ragged.push_back(std::move(group));
      } else if (group.size() > 1) {
        emit_fold_groups({group}, root);
      }
    }
    if (!ragged.empty()) emit_fold_groups(ragged, root);
    for (size_t j = 0; j < element_bodies.size(); ++j) {
      const std::string value = emit(element_bodies[j], root);
      line(root, str_cat(array, "[", j, "] = ", value, ";"));
    }
    return scopes_[root]->code.str();
  }

 private:

  // A device function computing `e` from loop variables i0..i<arity-1> (its parameters).
  std::string element_function(const std::string& name, const std::string& type, const Expr& e, int arity) {
    const int root = open_scope(-1, {}, false);
    const std::string value = emit(e, root);
    std::ostringstream out;
    out << "__device__ __forceinline__ " << type << " " << name << "(const LM_KERNEL_params& p";
    for (int v = 0; v < arity; ++v) out << ", lm_i64 i" << v;
    out << ") {\n    bool lm_ok = true; (void)lm_ok;\n" << scopes_[root]->code.str() << "    return " << value << ";\n}\n";
    return out.str();
  }

  // ---- kernel bodies ----
  std::string unravel(const std::string& flat, int indent) const { return unravel(flat, indent, node_.shape); }

  std::string unravel(const std::string& flat, int indent, const ir::Shape& shape) const {
    std::ostringstream out;
    const std::string pad(indent, ' ');
    out << pad << "lm_i64 lm_rest = " << flat << ";\n";
    for (size_t d = shape.size(); d-- > 0;) {
      const std::string dim = shape_code(shape[d]);
      if (d == 0) {
        out << pad << "const lm_i64 i0 = lm_rest;\n";
      } else if (shape[d]->is_int_const(1)) {
        out << pad << "const lm_i64 i" << d << " = 0;\n";
      } else {
        out << pad << "const lm_i64 i" << d << " = lm_rest % " << dim << "; lm_rest /= " << dim << ";\n";
      }
    }
    out << pad << "(void)lm_rest;\n";
    return out.str();
  }

  std::string store_code(const std::string& value) const {
    switch (node_.dtype) {
      case DType::F16: return "lm_f2h(" + value + ")";
      case DType::BF16: return "lm_f2bf(" + value + ")";
      case DType::Bool: return "(unsigned char)(" + value + ")";
      default: return value;
    }
  }

  std::string elementwise_body() {
    const int root = open_scope(-1, {}, false);
    const std::string result = emit(node_.body, root);
    std::ostringstream out;
    out << "extern \"C\" __global__ void __launch_bounds__(256) LM_KERNEL(const LM_KERNEL_params p) {\n";
    out << "  const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(node_.shape), {})) << ";\n";
    if (warp_mode_) {
      // A warp per element: every lane runs the element's code, lanes split its top-level folds.
      out << "  const int lm_lane = threadIdx.x & 31;\n";
      out << "  for (lm_i64 lm_flat = ((lm_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; lm_flat < lm_n;"
          << " lm_flat += ((lm_i64)gridDim.x * blockDim.x) >> 5) {\n";
    } else {
      out << "  for (lm_i64 lm_flat = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x; lm_flat < lm_n;"
          << " lm_flat += (lm_i64)gridDim.x * blockDim.x) {\n";
    }
    out << "    bool lm_ok = true; (void)lm_ok;\n";
    out << unravel("lm_flat", 4);
    out << scopes_[root]->code.str();
    out << "    " << (warp_mode_ ? "if (lm_lane == 0) " : "") << "p.out[lm_flat] = " << store_code(result) << ";\n";
    out << "  }\n}\n";
    return out.str();
  }

  static ir::Shape piece_shape_of(const Node& node, const passes::PointwisePiece& piece) {
    ir::Shape shape = node.shape;
    if (piece.axis >= 0) shape[piece.axis] = piece.extent;
    return shape;
  }
  ir::Shape piece_shape(const passes::PointwisePiece& piece) const { return piece_shape_of(node_, piece); }

  // One case per piece, selected by blockIdx.y; each piece iterates its own box of the output.
  std::string pieces_body(const std::vector<passes::PointwisePiece>& pieces) {
    std::ostringstream out;
    out << "extern \"C\" __global__ void __launch_bounds__(256) LM_KERNEL(const LM_KERNEL_params p) {\n";
    out << "  switch (blockIdx.y) {\n";
    // Contiguous output strides.
    std::vector<std::string> strides(node_.rank());
    {
      Expr stride = ir::int_const(1);
      for (size_t d = node_.rank(); d-- > 0;) {
        strides[d] = shape_code(ir::simplify(stride, {}));
        stride = ir::mul(stride, node_.shape[d]);
      }
    }
    for (size_t k = 0; k < pieces.size(); ++k) {
      const passes::PointwisePiece& piece = pieces[k];
      const ir::Shape box = piece_shape(piece);
      const int root = open_scope(-1, {}, false);
      scopes_[root]->indent = 6;
      const std::string result = emit(piece.body, root);
      std::string offset;
      for (size_t d = 0; d < node_.rank(); ++d) {
        std::string index = str_cat("i", d);
        if (static_cast<int>(d) == piece.axis && !piece.begin->is_int_const(0)) {
          index = str_cat("(i", d, " + ", shape_code(piece.begin), ")");
        }
        const std::string term = strides[d] == "1LL" ? index : str_cat(index, " * ", strides[d]);
        offset = offset.empty() ? term : str_cat(offset, " + ", term);
      }
      if (offset.empty()) offset = "0";
      out << "    case " << k << ": {\n";
      out << "    const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(box), {})) << ";\n";
      out << "    for (lm_i64 lm_flat = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x; lm_flat < lm_n;"
          << " lm_flat += (lm_i64)gridDim.x * blockDim.x) {\n";
      out << "      bool lm_ok = true; (void)lm_ok;\n";
      out << unravel("lm_flat", 6, box);
      out << scopes_[root]->code.str();
      out << "      p.out[" << offset << "] = " << store_code(result) << ";\n";
      out << "    }\n";
      out << "    } break;\n";
    }
    out << "  }\n}\n";
    return out.str();
  }

  // A fold long enough that a warp should share it (it is not inside another loop).
  bool has_long_top_level_fold(const Expr& body) const {
    bool found = false;
    std::function<void(const Expr&, bool)> walk = [&](const Expr& e, bool in_loop) {
      if (found) return;
      if (e->op == ExprOp::Fold) {
        const auto extent = ir::as_int_const(e->args[0]);
        if (!in_loop && extent && *extent >= kWarpFoldLength) found = true;
        walk(e->args[0], in_loop);
        walk(e->args[1], true);
        return;
      }
      for (const Expr& arg : e->args) walk(arg, in_loop);
    };
    walk(body, false);
    return found;
  }

  Schedule choose_reduce_schedule() const {
    const bool ragged = !ir::is_shape_expr(node_.reduce_extents[0]);
    if (ragged) return Schedule::ThreadPerOutput;
    // A warp per output pays off when consecutive reduction steps read consecutive memory.
    bool reduction_is_innermost = false;
    ir::visit(node_.body, [&](const Expr& e) {
      if (e->op != ExprOp::Load || e->load_rank() == 0) return;
      const Expr& last = e->args[e->load_rank() - 1];
      if (ir::contains_op(last, ExprOp::ReduceVar)) reduction_is_innermost = true;
    });
    return reduction_is_innermost ? Schedule::WarpPerOutput : Schedule::ThreadPerOutput;
  }

  static Combine combine_code(ir::ReduceOp op, DType t) {
    const bool floating = is_floating(t);
    const std::string acc = floating ? (t == DType::F64 ? "double" : "float") : "lm_i64";
    const std::string sfx = t == DType::F64 ? "d" : "f";
    switch (op) {
      case ir::ReduceOp::Sum: return {acc, "0", "acc = acc + val;"};
      case ir::ReduceOp::Prod: return {acc, "1", "acc = acc * val;"};
      case ir::ReduceOp::Max:
        if (floating) return {acc, "-__int_as_float(0x7f800000)", "acc = lm_max_" + sfx + "(acc, val);"};
        return {acc, "(-9223372036854775807LL - 1)", "acc = acc > val ? acc : val;"};
      case ir::ReduceOp::Min:
        if (floating) return {acc, "__int_as_float(0x7f800000)", "acc = lm_min_" + sfx + "(acc, val);"};
        return {acc, "9223372036854775807LL", "acc = acc < val ? acc : val;"};
      case ir::ReduceOp::Any: return {acc, "0", "acc = (acc != 0 || val != 0);"};
      case ir::ReduceOp::All: return {acc, "1", "acc = (acc != 0 && val != 0);"};
    }
    return {acc, "0", ""};
  }

  std::string warp_combine(const Combine& c) const {
    // The same step, with `val` taken from another lane.
    return str_cat("for (int lm_o = 16; lm_o > 0; lm_o >>= 1) { const ", c.acc_type,
                   " val = __shfl_xor_sync(0xffffffffu, acc, lm_o); ", c.step, " }");
  }

  std::string reduce_body(Schedule schedule) {
    const Combine c = combine_code(node_.reduce_op, node_.dtype);
    const bool ragged = !ir::is_shape_expr(node_.reduce_extents[0]);
    const int outer = open_scope(-1, {}, false);
    std::vector<int> node_vars;
    for (size_t d = 0; d < node_.reduce_extents.size(); ++d) node_vars.push_back(static_cast<int>(d));
    const int inner = open_scope(outer, node_vars, false);
    for (int v : node_vars) scopes_[inner]->names.emplace(ir::reduce_var(v), str_cat("r", v));
    // Extents: static ones are products of shape expressions; a ragged one is evaluated per output.
    std::string extent_code;
    std::vector<std::string> static_extents;
    if (ragged) {
      extent_code = emit(node_.reduce_extents[0], outer);
    } else {
      for (const Expr& extent : node_.reduce_extents) static_extents.push_back(shape_code(extent));
      extent_code = shape_code(ir::simplify(ir::product(node_.reduce_extents), {}));
    }
    // Reduction variables from the flat reduction index lm_r.
    std::ostringstream rvars;
    {
      const std::string pad(scopes_[inner]->indent, ' ');
      if (ragged) {
        rvars << pad << "const lm_i64 r0 = lm_r;\n";
      } else {
        rvars << pad << "lm_i64 lm_rr = lm_r;\n";
        for (size_t d = static_extents.size(); d-- > 0;) {
          if (d == 0) {
            rvars << pad << "const lm_i64 r0 = lm_rr;\n";
          } else {
            rvars << pad << "const lm_i64 r" << d << " = lm_rr % " << static_extents[d] << "; lm_rr /= "
                  << static_extents[d] << ";\n";
          }
        }
        rvars << pad << "(void)lm_rr;\n";
      }
    }
    const std::string value = emit(node_.body, inner);
    const std::string cast_value = str_cat("(", c.acc_type, ")", value);

    std::ostringstream out;
    const bool warp = schedule == Schedule::WarpPerOutput;
    out << "extern \"C\" __global__ void __launch_bounds__(256) LM_KERNEL(const LM_KERNEL_params p) {\n";
    out << "  const lm_i64 lm_n = " << shape_code(ir::simplify(ir::product(node_.shape), {})) << ";\n";
    if (warp) {
      out << "  const int lm_lane = threadIdx.x & 31;\n";
      out << "  const lm_i64 lm_first = ((lm_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n";
      out << "  const lm_i64 lm_step = ((lm_i64)gridDim.x * blockDim.x) >> 5;\n";
    } else {
      out << "  const lm_i64 lm_first = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
      out << "  const lm_i64 lm_step = (lm_i64)gridDim.x * blockDim.x;\n";
    }
    out << "  for (lm_i64 lm_flat = lm_first; lm_flat < lm_n; lm_flat += lm_step) {\n";
    out << "    bool lm_ok = true; (void)lm_ok;\n";
    out << unravel("lm_flat", 4);
    out << scopes_[outer]->code.str();
    out << "    const lm_i64 lm_extent = " << extent_code << ";\n";
    out << "    " << c.acc_type << " acc = " << c.init << ";\n";
    out << "    for (lm_i64 lm_r = " << (warp ? "lm_lane" : "0") << "; lm_r < lm_extent; lm_r += " << (warp ? "32" : "1")
        << ") {\n";
    out << rvars.str();
    out << scopes_[inner]->code.str();
    out << "      const " << c.acc_type << " val = " << cast_value << ";\n";
    out << "      " << c.step << "\n";
    out << "    }\n";
    if (warp) {
      out << "    " << warp_combine(c) << "\n";
      out << "    if (lm_lane == 0) p.out[lm_flat] = " << store_code(str_cat("(", value_type(node_.dtype), ")acc")) << ";\n";
    } else {
      out << "    p.out[lm_flat] = " << store_code(str_cat("(", value_type(node_.dtype), ")acc")) << ";\n";
    }
    out << "  }\n}\n";
    return out.str();
  }


  const Node& node_;
  const std::vector<OperandInfo>& operands_;
  std::vector<KernelParam> params_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::unordered_map<const ir::ExprNode*, std::vector<int>> free_vars_;
  std::unordered_map<const ir::ExprNode*, bool> expensive_;
  std::vector<std::string> own_check_labels_;
  std::vector<std::string>* check_labels_;
  int counter_ = 0;
  bool uses_checks_ = false;
  bool warp_mode_ = false;
  bool unroll_folds_ = false;
};

}  // namespace

Kernel generate_kernel(const Node& node, const std::vector<OperandInfo>& operands) {
  if (node.contraction != ir::Contraction::None) {
    LUMINAL_CHECK(operands.size() == 3, "internal error: grouped-rows operands of ", node.origin);
    try {
      return KernelWriter(node, operands).write_grouped_rows();
    } catch (const Error& error) {
      fail("CUDA code generation failed for ", node.origin, ": ", error.what());
    }
  }
  LUMINAL_CHECK(node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce || node.kind == NodeKind::Scatter,
                "internal error: no kernel for ", ir::node_kind_name(node.kind), " node ", node.origin);
  LUMINAL_CHECK(operands.size() == node.inputs.size(), "internal error: operand info for ", node.origin);
  try {
    KernelWriter writer(node, operands);
    return node.kind == NodeKind::Scatter ? writer.write_scatter() : writer.write();
  } catch (const Error& error) {
    fail("CUDA code generation failed for ", node.origin, ": ", error.what());
  }
}

namespace {

constexpr int kRowBlock = 32;  // one warp per block: a few thousand rows spread over many SMs

std::string row_array(ir::NodeId id) { return str_cat("t", id); }
std::string node_pointer(ir::NodeId id) { return str_cat("p.g", id); }

std::string store_value(DType dtype, const std::string& value) {
  switch (dtype) {
    case DType::F16: return "lm_f2h(" + value + ")";
    case DType::BF16: return "lm_f2bf(" + value + ")";
    case DType::Bool: return "(unsigned char)(" + value + ")";
    default: return value;
  }
}

// How a row-kernel node sees each of its inputs.
std::vector<OperandInfo> row_operands(const ir::Graph& graph, const Node& node) {
  std::vector<OperandInfo> operands;
  for (ir::NodeId input : node.inputs) {
    const Node& producer = graph.node(input);
    OperandInfo info;
    info.dtype = producer.dtype;
    info.shape = producer.shape;
    switch (producer.kind) {
      case NodeKind::Input:
        // The executor runs the row kernel only when every input is contiguous (strides then
        // follow from the shapes and fold into the index arithmetic).
        info.layout = Layout::Contiguous;
        info.name = node_pointer(input);
        break;
      case NodeKind::Constant:
        info.layout = Layout::Fixed;
        info.fixed_strides = producer.constant->strides;
        info.name = node_pointer(input);
        break;
      case NodeKind::Pointwise:
        info.layout = Layout::Row;
        info.name = row_array(input);
        break;
      default: fail("internal error: the row kernel cannot read ", ir::node_kind_name(producer.kind), " node %", input);
    }
    operands.push_back(std::move(info));
  }
  return operands;
}

}  // namespace

Kernel generate_row_kernel(const ir::Graph& graph, const Expr& rows) {
  std::vector<bool> is_output(graph.size(), false), read(graph.size(), false);
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) is_output[out.node] = true;
  }
  std::vector<std::string> symbols;
  ir::collect_symbols(rows, symbols);
  std::vector<std::string> check_labels;  // of every node's checks
  std::ostringstream body;
  for (const Node& node : graph.nodes()) {
    if (!node.is_compute()) continue;
    LUMINAL_CHECK(node.kind == NodeKind::Pointwise, "internal error: row kernel node ", node.origin, " is not pointwise");
    for (ir::NodeId input : node.inputs) read[input] = true;
    for (const Expr& dim : node.shape) ir::collect_symbols(dim, symbols);
    ir::collect_symbols(node.body, symbols);
    const std::vector<Expr> bodies = passes::specialize_row_elements(graph, node);
    const size_t elements = bodies.size();
    const std::vector<OperandInfo> operands = row_operands(graph, node);
    std::string fragment;
    try {
      fragment = KernelWriter(node, operands, &check_labels).row_fragment(row_array(node.id), bodies);
    } catch (const Error& error) {
      fail("CUDA code generation failed for ", node.origin, " in the row kernel: ", error.what());
    }
    body << "  // " << node.origin << "\n";
    body << "  " << value_type(node.dtype) << " " << row_array(node.id) << "[" << elements << "];\n";
    body << "  {\n" << fragment << "  }\n";
    if (!is_output[node.id]) continue;
    body << "  #pragma unroll\n";
    body << "  for (int j = 0; j < " << elements << "; ++j) " << node_pointer(node.id) << "[i0 * " << elements
         << "LL + j] = " << store_value(node.dtype, row_array(node.id) + "[j]") << ";\n";
  }
  std::sort(symbols.begin(), symbols.end());
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());

  Kernel kernel;
  kernel.schedule = Schedule::Elementwise;
  kernel.outputs = rows;
  kernel.block_size = kRowBlock;
  std::ostringstream params;
  params << "struct LM_KERNEL_params {\n";
  auto add = [&](ParamKind kind, int slot, int dim, const std::string& symbol, const std::string& declaration) {
    kernel.params.push_back(KernelParam{kind, slot, dim, symbol});
    params << "  " << declaration << ";\n";
  };
  for (const Node& node : graph.nodes()) {
    if (is_output[node.id]) {
      add(ParamKind::NodePointer, node.id, -1, "", str_cat(storage_type(node.dtype), "* g", node.id));
    } else if (read[node.id] && !node.is_compute()) {
      add(ParamKind::NodePointer, node.id, -1, "",
          str_cat("const ", storage_type(node.dtype), "* __restrict__ g", node.id));
    }
  }
  add(ParamKind::ErrorFlag, -1, -1, "", "lm_i64* error");
  add(ParamKind::CheckBase, -1, -1, "", "lm_i64 check_base");
  for (const std::string& symbol : symbols) add(ParamKind::Symbol, -1, -1, symbol, "lm_i64 " + sanitize(symbol));
  params << "};\n";

  std::ostringstream text;
  text << params.str();
  text << "extern \"C\" __global__ void __launch_bounds__(" << kRowBlock << ") LM_KERNEL(const LM_KERNEL_params p) {\n";
  text << "  const lm_i64 i0 = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
  text << "  if (i0 >= " << KernelWriter::shape_code(rows) << ") return;\n";
  text << "  bool lm_ok = true; (void)lm_ok;\n";
  text << body.str() << "}\n";
  const std::string source = text.str();
  kernel.name = str_cat("lm_row_", hex_bits(std::hash<std::string>{}(source)).substr(2));
  kernel.source = KernelWriter::replace_all(source, "LM_KERNEL", kernel.name);
  kernel.check_labels = std::move(check_labels);
  return kernel;
}

const std::string& prelude() {
  static const std::string text = R"(// luminal kernel prelude
typedef long long lm_i64;
typedef unsigned long long lm_u64;
struct __align__(16) lm_vec16 { unsigned int x, y, z, w; };  // a 16-byte vector load
// 16-byte global -> shared copies, asynchronous on sm_80+ (cp.async; `valid` false writes zeros).
__device__ __forceinline__ void lm_copy16(void* shared, const void* global, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long address;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(address) : "l"(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)address), "l"(global), "r"(valid ? 16 : 0));
#else
  lm_vec16 v = {0u, 0u, 0u, 0u};
  if (valid) v = *(const lm_vec16*)global;
  *(lm_vec16*)shared = v;
#endif
}
__device__ __forceinline__ void lm_copy16_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void lm_copy16_wait_all_but_last() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
__device__ __forceinline__ void lm_copy16_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

__device__ __forceinline__ float lm_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short lm_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float lm_bf2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
__device__ __forceinline__ unsigned short lm_f2bf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) return (unsigned short)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
__device__ __forceinline__ float lm_round_h(float f) { return lm_h2f(lm_f2h(f)); }
__device__ __forceinline__ float lm_round_bf(float f) { return lm_bf2f(lm_f2bf(f)); }

__device__ __forceinline__ float lm_max_f(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
__device__ __forceinline__ float lm_min_f(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
__device__ __forceinline__ double lm_max_d(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
__device__ __forceinline__ double lm_min_d(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
__device__ __forceinline__ float lm_sign_f(float x) { return (float)((0.0f < x) - (x < 0.0f)); }  // NaN -> 0, as torch
__device__ __forceinline__ float lm_i0_f(float x) { return isinf(x) ? (x - x) : cyl_bessel_i0f(x); }
__device__ __forceinline__ double lm_i0_d(double x) { return isinf(x) ? (x - x) : cyl_bessel_i0(x); }
__device__ __forceinline__ double lm_sign_d(double x) { return (double)((0.0 < x) - (x < 0.0)); }
__device__ __forceinline__ float lm_pymod_f(float a, float b) { float m = fmodf(a, b); if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) m += b; return m; }
__device__ __forceinline__ double lm_pymod_d(double a, double b) { double m = fmod(a, b); if (m != 0.0 && ((b < 0.0) != (m < 0.0))) m += b; return m; }
__device__ __forceinline__ float lm_gelu_tanh_f(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * (x * x * x)))); }
__device__ __forceinline__ double lm_gelu_tanh_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x)))); }

// NaN and out-of-range values convert to INT64_MIN, as on the CPU.
__device__ __forceinline__ lm_i64 lm_f2i(double v) {
  return (v > -9223372036854775808.0 && v < 9223372036854775808.0) ? (lm_i64)v : (lm_i64)0x8000000000000000ull;
}

// error record: [code, value, bound, check label id or -1]; the first error wins.
__device__ __noinline__ void lm_report(lm_i64* error, lm_i64 code, lm_i64 value, lm_i64 bound, lm_i64 check) {
  if (atomicCAS((unsigned long long*)error, 0ull, (unsigned long long)code) == 0ull) {
    error[1] = value;
    error[2] = bound;
    error[3] = check;
  }
}
__device__ __forceinline__ lm_i64 lm_check(lm_i64 index, lm_i64 bound, bool live, lm_i64* error, bool& ok, lm_i64 check) {
  if (!live) return 0;
  if (index < 0 || index >= bound) { lm_report(error, 1, index, bound, check); ok = false; return 0; }
  return index;
}
__device__ __forceinline__ lm_i64 lm_floordiv(lm_i64 a, lm_i64 b, lm_i64* error) {
  if (b == 0) { lm_report(error, 2, a, 0, -1); return 0; }
  if (b == -1) return (lm_i64)(0ull - (lm_u64)a);
  const lm_i64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ lm_i64 lm_mod(lm_i64 a, lm_i64 b, lm_i64* error) {
  if (b == 0) { lm_report(error, 2, a, 0, -1); return 0; }
  if (b == -1) return 0;
  const lm_i64 r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Scatter accumulation into 16- and 8-bit elements: a compare-and-swap loop on the aligned 32-bit
// word that holds the element (the other bytes are written back unchanged).
__device__ __forceinline__ void lm_atomic_update16(unsigned short* address, float value, bool bf16) {
  unsigned int* word = (unsigned int*)((lm_u64)address & ~(lm_u64)3);
  const unsigned int shift = ((lm_u64)address & 2) ? 16u : 0u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned short current = (unsigned short)((assumed >> shift) & 0xffffu);
    const unsigned short next = bf16 ? lm_f2bf(lm_bf2f(current) + value) : lm_f2h(lm_h2f(current) + value);
    old = atomicCAS(word, assumed, (assumed & ~(0xffffu << shift)) | ((unsigned int)next << shift));
  } while (assumed != old);
}
__device__ __forceinline__ void lm_atomic_add_h(unsigned short* address, float value) { lm_atomic_update16(address, value, false); }
__device__ __forceinline__ void lm_atomic_add_bf(unsigned short* address, float value) { lm_atomic_update16(address, value, true); }
// (element + value) modulo 2^bits for an 8- or 16-bit integer element (bits: 8 or 16).
__device__ __forceinline__ void lm_atomic_add_narrow(void* address, unsigned int value, unsigned int bits) {
  unsigned int* word = (unsigned int*)((lm_u64)address & ~(lm_u64)3);
  const unsigned int shift = ((unsigned int)((lm_u64)address & 3)) * 8u;
  const unsigned int mask = ((1u << bits) - 1u) << shift;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int next = (((assumed >> shift) + value) << shift) & mask;
    old = atomicCAS(word, assumed, (assumed & ~mask) | next);
  } while (assumed != old);
}
// Shape arithmetic (divisors are positive sizes).
__device__ __forceinline__ lm_i64 lm_floordiv_s(lm_i64 a, lm_i64 b) { const lm_i64 q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ lm_i64 lm_mod_s(lm_i64 a, lm_i64 b) { const lm_i64 r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
)";
  return text;
}

std::string module_source(const std::vector<Kernel>& kernels) {
  std::string source = prelude();
  std::vector<std::string> seen;
  for (const Kernel& kernel : kernels) {
    if (std::find(seen.begin(), seen.end(), kernel.name) != seen.end()) continue;
    seen.push_back(kernel.name);
    source += "\n" + kernel.source;
  }
  return source;
}

}  // namespace luminal::codegen
