#include "runtime/cpu/gemm.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "common/half.h"

namespace luminal::runtime::cpu {

namespace {

template <typename T>
T load_as(const void* base, int64_t offset);

template <>
float load_as<float>(const void* base, int64_t offset) {
  return static_cast<const float*>(base)[offset];
}
template <>
double load_as<double>(const void* base, int64_t offset) {
  return static_cast<const double*>(base)[offset];
}

float load_half(const void* base, int64_t offset, DType dtype) {
  const uint16_t bits = static_cast<const uint16_t*>(base)[offset];
  return dtype == DType::F16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits);
}

// Copies one operand matrix into a dense row-major buffer of the accumulation type.
template <typename Acc>
void pack(const MatrixView& view, DType dtype, int64_t batch, int64_t rows, int64_t cols, std::vector<Acc>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  const int64_t base = batch * view.batch_stride;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t offset = base + r * view.row_stride + c * view.col_stride;
      Acc value;
      if constexpr (std::is_same_v<Acc, double>) {
        value = load_as<double>(view.data, offset);
      } else {
        value = dtype == DType::F32 ? load_as<float>(view.data, offset) : load_half(view.data, offset, dtype);
      }
      out[static_cast<size_t>(r * cols + c)] = value;
    }
  }
}

// C[m, n] = A[m, k] @ B[k, n] on dense row-major buffers; blocked over k so a block of B stays
// in cache while every row of A streams over it. The inner loop over n vectorizes.
template <typename Acc>
void dense_gemm(const Acc* a, const Acc* b, Acc* c, int64_t m, int64_t n, int64_t k) {
  std::fill(c, c + m * n, Acc(0));
  constexpr int64_t kBlockK = 128;
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t k1 = std::min(k, k0 + kBlockK);
    for (int64_t i = 0; i < m; ++i) {
      Acc* row = c + i * n;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const Acc scale = a[i * k + kk];
        const Acc* brow = b + kk * n;
        for (int64_t j = 0; j < n; ++j) row[j] += scale * brow[j];
      }
    }
  }
}

template <typename Acc>
void gemm_typed(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixView& a,
                const MatrixView& b, void* out) {
  std::vector<Acc> pa, pb, pc(static_cast<size_t>(m * n));
  for (int64_t bi = 0; bi < batch; ++bi) {
    pack(a, dtype, bi, m, k, pa);
    pack(b, dtype, bi, k, n, pb);
    dense_gemm(pa.data(), pb.data(), pc.data(), m, n, k);
    const int64_t base = bi * m * n;
    for (int64_t i = 0; i < m * n; ++i) {
      const Acc v = pc[static_cast<size_t>(i)];
      switch (dtype) {
        case DType::F32: static_cast<float*>(out)[base + i] = static_cast<float>(v); break;
        case DType::F64: static_cast<double*>(out)[base + i] = static_cast<double>(v); break;
        case DType::F16: static_cast<uint16_t*>(out)[base + i] = float_to_half_bits(static_cast<float>(v)); break;
        case DType::BF16: static_cast<uint16_t*>(out)[base + i] = float_to_bf16_bits(static_cast<float>(v)); break;
        default: break;
      }
    }
  }
}

}  // namespace

void gemm(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixView& a, const MatrixView& b,
          void* out) {
  switch (dtype) {
    case DType::F64: gemm_typed<double>(dtype, batch, m, n, k, a, b, out); break;
    case DType::F32:
    case DType::F16:
    case DType::BF16: gemm_typed<float>(dtype, batch, m, n, k, a, b, out); break;
    default: fail("matmul on ", dtype_name(dtype), " tensors is not supported");
  }
}

}  // namespace luminal::runtime::cpu
