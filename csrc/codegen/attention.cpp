// The fused attention kernel (ir::NodeKind::Attention): the template text (attention.cuh, embedded
// at build time) with its shapes, strides, element types and mask filled in.
#include <algorithm>
#include <cstdio>

#include "codegen/kernel_writer.h"
#include "ir/simplify.h"

namespace luminal::embedded {
// attention.cuh, embedded at build time (cmake/embed_text.cmake).
extern const char kAttentionTemplate[];
// attention_mma.cuh: the tensor-core variant (f16/bf16).
extern const char kAttentionMmaTemplate[];
// attention_tf32.cuh: the tensor-core variant for f32 (3xTF32).
extern const char kAttentionTf32Template[];
// attention_common.cuh: tile staging and the online softmax of the two tensor-core variants.
extern const char kAttentionCommon[];
// attention_decode.cuh: a few queries (decode steps), the keys spread over a block per query.
extern const char kAttentionDecodeTemplate[];
}  // namespace luminal::embedded

namespace luminal::codegen::detail {

namespace {

// Shared memory the template stages per block: a 16-query tile and 32-key K/V tiles.
constexpr int64_t kQueryTile = 16, kKeyTile = 32;
constexpr int64_t kMmaQueryTile = 64;  // attention_mma.cuh, attention_tf32.cuh: 16 query rows per warp
constexpr int64_t kMmaMaxHeadSize = 128;
constexpr int64_t kStaticSharedBytes = 48 * 1024;
// attention_decode.cuh: at most this many queries (a static size), keys scored in chunks of 256 by a
// block of the attention schedule's threads (the template gets both as @DECODE_CHUNK@, @THREADS@).
constexpr int64_t kDecodeMaxQueries = 4, kDecodeChunk = 256, kDecodeWarps = schedule::kAttentionThreads / 32;
// Its vector path: at most this many 16-byte key vectors each thread requests per chunk
// (@DECODE_KEY_LOADS@: 256 keys of 64 bf16 elements in one round trip), and at most this many value
// vectors (registers: a thread holds both sets at once).
constexpr int64_t kDecodeKeyLoads = 16, kDecodeMaxValueLoads = 16;

// How a value of `dtype` becomes a number: the conversion applied to the stored element.
const char* from_storage(DType dtype) {
  switch (dtype) {
    case DType::F16: return "lm_h2f";
    case DType::BF16: return "lm_bf2f";
    default: return "";
  }
}

std::string double_literal(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

int64_t static_size(const Expr& e, const char* what, const std::string& origin) {
  const auto n = ir::as_int_const(e);
  LUMINAL_CHECK(n && *n > 0, origin, ": the CUDA attention kernel needs a static ", what, ", got ", ir::to_string(e));
  return *n;
}

// The keys per chunk of attention_decode.cuh's vector path with `key_loads` key vectors per thread,
// or 0 where it is not compiled: f32/f16/bf16 heads whose key and value rows are whole 16-byte
// vectors, a power of two of them up to 32 (the threads of a row divide a warp), and whole value
// loads per thread, at most kDecodeMaxValueLoads of them. (The run-time part, addresses and
// strides, the kernel checks.)
int64_t decode_vector_keys(DType dtype, int64_t head_size, int64_t value_size, int64_t key_loads) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) return 0;
  const int64_t per_vector = 16 / dtype_size(dtype);
  const auto lanes = [&](int64_t size) -> int64_t {
    const bool whole = size % per_vector == 0 && size / per_vector <= 32;
    const int64_t n = size / per_vector;
    return whole && n > 0 && (n & (n - 1)) == 0 ? n : 0;
  };
  const int64_t key_lanes = lanes(head_size), value_lanes = lanes(value_size);
  if (key_lanes == 0 || value_lanes == 0) return 0;
  const int64_t keys = key_loads * schedule::kAttentionThreads / key_lanes;
  const int64_t value_vectors = keys * value_lanes;
  const bool whole_loads = value_vectors % schedule::kAttentionThreads == 0;
  return whole_loads && value_vectors / schedule::kAttentionThreads <= kDecodeMaxValueLoads ? keys : 0;
}

// How attention_decode.cuh's vector path splits a row: `split` blocks per row (1: one block), each
// requesting `key_loads` key vectors per thread per chunk; key_loads 0: no vector path.
struct DecodeSplit {
  int64_t split = 1, key_loads = 0;
};

// The schedule's key_split blocks per row, each requesting the fewest key loads that cover its
// slice of a static key count in one chunk (fewer registers; symbolic: kDecodeKeyLoads). One block
// where the vector path is not compiled.
DecodeSplit decode_split(DType dtype, int64_t head_size, int64_t value_size, const Expr& keys, int key_split) {
  DecodeSplit d;
  const auto count = ir::as_int_const(keys);
  d.split = key_split;
  const int64_t per_block = count ? (*count + d.split - 1) / d.split : kDecodeKeyLoads * schedule::kAttentionThreads;
  for (int64_t loads = 1; loads <= kDecodeKeyLoads; loads *= 2) {
    const int64_t chunk = decode_vector_keys(dtype, head_size, value_size, loads);
    if (chunk == 0) continue;  // the values would not be whole loads per thread: more keys
    d.key_loads = loads;
    if (chunk >= per_block) break;
  }
  if (d.key_loads == 0) d.split = 1;  // no vector path: the scalar path takes a row in one block
  return d;
}

// Scores attention_decode.cuh stages in shared memory: the larger of its two paths' chunks.
int64_t decode_scores(DType dtype, int64_t head_size, int64_t value_size, const DecodeSplit& split) {
  const int64_t vector_keys =
      split.key_loads > 0 ? decode_vector_keys(dtype, head_size, value_size, split.key_loads) : 0;
  return std::max(kDecodeChunk, vector_keys);
}

// Whether attention_decode.cuh takes this node: a static query count of at most kDecodeMaxQueries
// (a decode step: the tile kernels would compute 16 or 64 query rows, almost all padding, with one
// block walking every key), and its shared arrays within the static limit.
bool decode_kernel_fits(const Expr& queries, DType dtype, int64_t head_size, int64_t value_size, int64_t element,
                        const DecodeSplit& split) {
  const auto count = ir::as_int_const(queries);
  // The chunk's scores, each warp's partial output and max and sum slots, the cluster's slices.
  const int64_t slice = split.split > 1 ? split.split * (value_size + 2) : 0;
  const int64_t shared =
      (decode_scores(dtype, head_size, value_size, split) + kDecodeWarps * (value_size + 2) + slice) * element;
  return count && *count <= kDecodeMaxQueries && shared <= kStaticSharedBytes;
}

}  // namespace

// A few queries (decode): attention_decode.cuh, one block of 128 threads per (batch, head, query).
// Otherwise one block of 128 threads per (batch, head, tile of queries): on tensor cores with 64 queries,
// attention_mma.cuh for f16/bf16 with head sizes multiples of 16 up to 128 and attention_tf32.cuh
// for f32 with head sizes multiples of 8 up to 128 (both after attention_common.cuh); otherwise
// attention.cuh (SIMT, 16 queries, any dtype and head size). Operands are read by their run-time
// strides (Layout::Strided: views read in place); a mask dimension of size
// 1 is read with stride 0 (broadcast).
Kernel KernelWriter::write_attention() {
  const Node& q = node_;  // (for shapes: the output has q's batch, heads and queries)
  const OperandInfo& key = operands_.at(1);
  const OperandInfo& value = operands_.at(2);
  const DType in = operands_.at(0).dtype;
  const bool f64 = in == DType::F64;
  const char* compute = f64 ? "double" : "float";
  const int64_t head_size = static_size(operands_.at(0).shape[3], "head size", node_.origin);
  const int64_t value_size = static_size(value.shape[3], "value head size", node_.origin);
  const int64_t element = f64 ? 8 : 4;
  const int64_t shared = (kQueryTile * head_size + kKeyTile * (head_size + 1) + kKeyTile * value_size) * element;
  const bool stage = shared <= kStaticSharedBytes;
  // Tensor cores (mma.sync) for half types whose head sizes are whole k-steps of 16 (m16n8k16),
  // and for f32 whose head sizes are whole k-steps of 8 (m16n8k8, 3xTF32); f64 stays SIMT.
  const bool half = in == DType::F16 || in == DType::BF16;
  const int64_t k_step = half ? 16 : 8;
  const bool tensor_cores = (half || in == DType::F32) && head_size % k_step == 0 && value_size % k_step == 0 &&
                            head_size <= kMmaMaxHeadSize && value_size <= kMmaMaxHeadSize;
  const DecodeSplit split = decode_split(in, head_size, value_size, key.shape[2], schedule_.key_split);
  const bool decode = decode_kernel_fits(q.shape[2], in, head_size, value_size, element, split);
  const int64_t query_tile = decode ? 1 : tensor_cores ? kMmaQueryTile : kQueryTile;

  Kernel kernel;
  const Expr query_tiles = ir::floordiv(ir::add(q.shape[2], ir::int_const(query_tile - 1)), ir::int_const(query_tile));
  // One block per output row (tile), or per row and slice of its keys (a decode row's split).
  const Expr blocks_per_row = ir::int_const(decode ? split.split : 1);
  kernel.outputs = ir::simplify(ir::mul(ir::mul(ir::mul(q.shape[0], q.shape[1]), query_tiles), blocks_per_row), {});
  add_node_params();
  // The vector path requests its first keys and values before it waits (KernelSchedule::key_rows).
  const bool early_rows = decode && split.key_loads > 0 && schedule_.has_early_rows();
  if (early_rows) {
    add_param(ParamKind::NodePointer, schedule_.key_rows.input, -1, "key_rows");
    add_param(ParamKind::NodePointer, schedule_.value_rows.input, -1, "value_rows");
  }

  std::ostringstream text;
  text << params_declaration();
  text << "__device__ __forceinline__ " << storage_type(node_.dtype) << " LM_KERNEL_store(" << compute
       << " v) { return " << store_code(str_cat("(", value_type(node_.dtype), ")v")) << "; }\n";
  const char* const tensor_core_template = half ? embedded::kAttentionMmaTemplate : embedded::kAttentionTf32Template;
  std::string body = decode         ? str_cat("\n", embedded::kAttentionDecodeTemplate)
                     : tensor_cores ? str_cat("\n", embedded::kAttentionCommon, "\n", tensor_core_template)
                                    : str_cat("\n", embedded::kAttentionTemplate);
  body = replace_all(body, "@MMA_TYPE@", in == DType::F16 ? "f16" : "bf16");
  body = replace_all(body, "@TO_IN@", in == DType::F16 ? "lm_f2h" : "lm_f2bf");
  body = replace_all(body, "@B@", shape_code(q.shape[0]));
  body = replace_all(body, "@H@", shape_code(q.shape[1]));
  body = replace_all(body, "@LQ@", shape_code(q.shape[2]));
  body = replace_all(body, "@LK@", shape_code(key.shape[2]));
  body = replace_all(body, "@HK@", shape_code(key.shape[1]));
  body = replace_all(body, "@DECODE_CHUNK@", std::to_string(kDecodeChunk));
  body = replace_all(body, "@THREADS@", std::to_string(schedule::kAttentionThreads));
  body = replace_all(body, "@DECODE_VECTOR@", split.key_loads > 0 ? "1" : "0");
  body = replace_all(body, "@DECODE_KEY_LOADS@", std::to_string(std::max<int64_t>(split.key_loads, 1)));
  body = replace_all(body, "@DECODE_SCORES@", std::to_string(decode_scores(in, head_size, value_size, split)));
  body = replace_all(body, "@DECODE_SPLIT@", std::to_string(split.split));
  body = replace_all(body, "@EARLY_ROWS@", early_rows ? "1" : "0");
  body = replace_all(body, "@KEY_ROWS@", std::to_string(early_rows ? schedule_.key_rows.count : 0));
  body = replace_all(body, "@VALUE_ROWS@", std::to_string(early_rows ? schedule_.value_rows.count : 0));
  body = replace_all(body, "@D@", std::to_string(head_size));
  body = replace_all(body, "@DV@", std::to_string(value_size));
  body = replace_all(body, "@STAGE@", stage ? "1" : "0");
  body = replace_all(body, "@CAUSAL@", node_.attention_causal ? "true" : "false");
  body = replace_all(body, "@SCALE@", double_literal(node_.attention_scale));
  body = replace_all(body, "@T@", compute);
  body = replace_all(body, "@IN_T@", storage_type(in));
  body = replace_all(body, "@OUT_T@", storage_type(node_.dtype));
  body = replace_all(body, "@FROM_IN@", from_storage(in));
  body = replace_all(body, "@EXP@", f64 ? "exp" : "expf");
  body = replace_all(body, "@NEG_INF@",
                     f64 ? "-__longlong_as_double(0x7ff0000000000000LL)" : "-__int_as_float(0x7f800000)");
  const char* names[] = {"Q", "K", "V", "M"};
  for (int slot = 0; slot < static_cast<int>(operands_.size()); ++slot) {
    const std::vector<std::string> strides = operand_strides(slot);
    for (int d = 0; d < 4; ++d) {
      std::string stride = strides.at(d);
      // A broadcast mask dimension (size 1) is read at index 0 whatever its stride.
      const auto size = ir::as_int_const(operands_[slot].shape[d]);
      if (slot == 3 && size && *size == 1) stride = "0LL";
      body = replace_all(body, str_cat("@", names[slot], "_S", d, "@"), stride);
    }
  }
  const bool has_mask = operands_.size() > 3;
  body = replace_all(body, "@HAS_MASK@", has_mask ? "1" : "0");
  body = replace_all(body, "@MASK_BOOL@", has_mask && operands_[3].dtype == DType::Bool ? "1" : "0");
  body = replace_all(body, "@FROM_MASK@", has_mask ? from_storage(operands_[3].dtype) : "");
  for (int d = 0; d < 4 && !has_mask; ++d) body = replace_all(body, str_cat("@M_S", d, "@"), "0LL");
  text << body;
  name_and_finish(kernel, text.str());
  return kernel;
}

}  // namespace luminal::codegen::detail
