#include "runtime/cpu/attention.h"

#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/half.h"

namespace luminal::runtime::cpu {

namespace {

template <typename T>
T read_element(const AttentionOperand& x, int64_t offset) {
  switch (x.dtype) {
    case DType::F32: return static_cast<T>(static_cast<const float*>(x.data)[offset]);
    case DType::F64: return static_cast<T>(static_cast<const double*>(x.data)[offset]);
    case DType::F16: return static_cast<T>(half_bits_to_float(static_cast<const uint16_t*>(x.data)[offset]));
    case DType::BF16: return static_cast<T>(bf16_bits_to_float(static_cast<const uint16_t*>(x.data)[offset]));
    case DType::Bool: return static_cast<T>(static_cast<const uint8_t*>(x.data)[offset] != 0);
    default: fail("internal error: attention operand of dtype ", dtype_name(x.dtype));
  }
}

template <typename T>
void write_element(DType dtype, void* out, int64_t offset, T value) {
  switch (dtype) {
    case DType::F32: static_cast<float*>(out)[offset] = static_cast<float>(value); break;
    case DType::F64: static_cast<double*>(out)[offset] = static_cast<double>(value); break;
    case DType::F16: static_cast<uint16_t*>(out)[offset] = float_to_half_bits(static_cast<float>(value)); break;
    case DType::BF16: static_cast<uint16_t*>(out)[offset] = float_to_bf16_bits(static_cast<float>(value)); break;
    default: fail("internal error: attention output of dtype ", dtype_name(dtype));
  }
}

// Offset of element [b, h, i, j] of a mask, its size-1 dimensions broadcast.
int64_t mask_offset(const AttentionOperand& mask, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t index[4] = {b, h, i, j};
  int64_t offset = 0;
  for (int d = 0; d < 4; ++d) offset += (mask.sizes[d] == 1 ? 0 : index[d]) * mask.strides[d];
  return offset;
}

// T: the compute type (float, or double for f64).
template <typename T>
void attention_in(const AttentionOperand& q, const AttentionOperand& k, const AttentionOperand& v,
                  const AttentionOperand* mask, double scale, bool causal, void* out) {
  const int64_t batch = q.sizes[0], heads = q.sizes[1], queries = q.sizes[2], head_size = q.sizes[3];
  const int64_t kv_heads = k.sizes[1], keys = k.sizes[2], value_size = v.sizes[3];
  LUMINAL_CHECK(kv_heads > 0 && heads % kv_heads == 0, "attention: ", heads, " query heads for ", kv_heads,
                " key/value heads");
  const int64_t group = heads / kv_heads;
  const T factor = static_cast<T>(scale);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> scores(static_cast<size_t>(keys));
  std::vector<T> row(static_cast<size_t>(value_size));
  int64_t out_offset = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < queries; ++i) {
        const int64_t q_row = b * q.strides[0] + h * q.strides[1] + i * q.strides[2];
        T max = minus_inf;
        for (int64_t j = 0; j < keys; ++j) {
          T s = minus_inf;
          if (!(causal && j > i)) {
            const int64_t k_row = b * k.strides[0] + g * k.strides[1] + j * k.strides[2];
            T dot = 0;
            for (int64_t d = 0; d < head_size; ++d) {
              dot += read_element<T>(q, q_row + d * q.strides[3]) * read_element<T>(k, k_row + d * k.strides[3]);
            }
            s = dot * factor;
            if (mask) {
              const T m = read_element<T>(*mask, mask_offset(*mask, b, h, i, j));
              if (mask->dtype == DType::Bool) {
                if (m == 0) s = minus_inf;
              } else {
                s += m;
              }
            }
          }
          scores[j] = s;
          if (s > max) max = s;
        }
        std::fill(row.begin(), row.end(), T(0));
        // A row whose keys are all dropped (every score -inf) is 0, not NaN.
        if (max != minus_inf) {
          T sum = 0;
          for (int64_t j = 0; j < keys; ++j) {
            scores[j] = std::exp(scores[j] - max);
            sum += scores[j];
          }
          for (int64_t j = 0; j < keys; ++j) {
            const T p = scores[j] / sum;
            const int64_t v_row = b * v.strides[0] + g * v.strides[1] + j * v.strides[2];
            for (int64_t d = 0; d < value_size; ++d) row[d] += p * read_element<T>(v, v_row + d * v.strides[3]);
          }
        }
        for (int64_t d = 0; d < value_size; ++d) write_element(q.dtype, out, out_offset++, row[d]);
      }
    }
  }
}

}  // namespace

void attention(const AttentionOperand& q, const AttentionOperand& k, const AttentionOperand& v,
               const AttentionOperand* mask, double scale, bool causal, void* out) {
  LUMINAL_CHECK(q.sizes.size() == 4 && k.sizes.size() == 4 && v.sizes.size() == 4 && (!mask || mask->sizes.size() == 4),
                "internal error: attention operands must be rank 4");
  if (q.dtype == DType::F64) {
    attention_in<double>(q, k, v, mask, scale, causal, out);
  } else {
    attention_in<float>(q, k, v, mask, scale, causal, out);
  }
}

}  // namespace luminal::runtime::cpu
