#include "runtime/cpu/interpreter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/half.h"
#include "ir/check_label.h"

namespace luminal::runtime::cpu {

using ir::Expr;
using ir::ExprOp;

Lane lane_of(DType dtype) {
  switch (dtype) {
    case DType::F16:
    case DType::BF16:
    case DType::F32: return Lane::F32;
    case DType::F64: return Lane::F64;
    default: return Lane::I64;
  }
}

// ------------------------------------------------------------------------------------------------
// Compilation
// ------------------------------------------------------------------------------------------------
namespace {

// Regions while compiling: each fold body is a region nested in the one computing its extent.
struct RegionScope {
  int parent = -1;
  int var = -1;  // the fold variable bound here (-1 for region 0)
  std::unordered_map<Expr, int, ir::ExprHash, ir::ExprEqual> memo;
};

}  // namespace

Program::Program(const std::vector<Expr>& roots, std::string origin, const LoadProof& proven)
    : origin_(std::move(origin)) {
  std::vector<RegionScope> scopes(1);
  regions_.emplace_back();
  // The innermost region (from `region` outwards) that binds a variable `e` reads; values are
  // computed there so that a fold re-evaluates only what changes per step.
  auto placement = [&](const Expr& e, int region) {
    const std::vector<int> vars = ir::free_reduce_vars(e);
    while (region != 0 && std::find(vars.begin(), vars.end(), scopes[region].var) == vars.end()) {
      region = scopes[region].parent;
    }
    return region;
  };
  auto lookup = [&](const Expr& e, int region) -> int {
    for (int r = region; r >= 0; r = scopes[r].parent) {
      if (auto it = scopes[r].memo.find(e); it != scopes[r].memo.end()) return it->second;
    }
    return -1;
  };
  std::function<int(const Expr&, int)> emit = [&](const Expr& e, int current) -> int {
    const int region = placement(e, current);
    if (const int found = lookup(e, region); found >= 0) return found;
    Instr in;
    in.op = e->op;
    in.dtype = e->dtype;
    in.lane = lane_of(e->dtype);
    switch (e->op) {
      case ExprOp::Const:
        in.int_value = e->int_value;
        in.float_value = e->float_value;
        break;
      case ExprOp::Symbol: in.symbol = e->symbol; break;
      case ExprOp::LoopVar:
        in.slot = e->index;
        if (!uses_loop_var(e->index)) loop_axes_.push_back(e->index);
        break;
      case ExprOp::ReduceVar:
        in.slot = e->index;
        in.fold_bound = scopes[region].var == e->index;
        uses_reduce_var_ = uses_reduce_var_ || !in.fold_bound;
        break;
      case ExprOp::Load:
        in.slot = e->index;
        in.check_bounds = !(proven && proven(*e));
        for (size_t d = 0; d < e->load_rank(); ++d) in.index.push_back(emit(e->args[d], region));
        if (e->masked) in.mask = emit(e->mask(), region);
        break;
      case ExprOp::CheckIndex:
        in.symbol = e->symbol;  // the label
        in.a = emit(e->args[0], region);
        in.b = emit(e->args[1], region);
        if (e->masked) in.mask = emit(e->args[2], region);
        break;
      case ExprOp::Fold: {
        in.a = emit(e->args[0], region);  // the extent is computed outside the loop
        const int body_region = static_cast<int>(scopes.size());
        scopes.push_back(RegionScope{region, e->index, {}});
        regions_.emplace_back();
        in.slot = emit(ir::reduce_var(e->index), body_region);
        in.b = emit(e->args[1], body_region);
        in.region = body_region;
        in.int_value = e->int_value;  // the ReduceOp
        break;
      }
      default:
        if (!e->args.empty()) in.a = emit(e->args[0], region);
        if (e->args.size() > 1) in.b = emit(e->args[1], region);
        if (e->args.size() > 2) in.c = emit(e->args[2], region);
        break;
    }
    code_.push_back(std::move(in));
    const int reg = static_cast<int>(code_.size()) - 1;
    regions_[region].push_back(reg);
    scopes[region].memo.emplace(e, reg);
    return reg;
  };
  for (const Expr& root : roots) results_.push_back(emit(root, 0));
}

bool Program::uses_loop_var(int axis) const {
  return std::find(loop_axes_.begin(), loop_axes_.end(), axis) != loop_axes_.end();
}

Registers::Registers(const Program& program) : storage_(program.code().size() * static_cast<size_t>(kLanes), 0) {}

namespace {

// ------------------------------------------------------------------------------------------------
// Lane helpers
// ------------------------------------------------------------------------------------------------
template <typename T, typename F>
void map1(const T* a, T* out, int n, F f) {
  for (int i = 0; i < n; ++i) out[i] = f(a[i]);
}

template <typename T, typename F>
void map2(const T* a, const T* b, T* out, int n, F f) {
  for (int i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

// Float -> int64 without undefined behaviour: NaN and out-of-range values give INT64_MIN, which
// is what the x86 conversion instruction (and therefore eager torch) produces.
template <typename F>
int64_t float_to_int(F value) {
  constexpr F kLimit = static_cast<F>(9223372036854775808.0);  // 2^63
  if (!(value > -kLimit && value < kLimit)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

// Inverse error function: a rational first guess refined by Newton steps on erf (double
// precision; C++ has no erfinv). +-1 give +-inf, |x| > 1 and NaN give NaN, as in torch.
double erfinv(double x) {
  if (!(x > -1.0 && x < 1.0)) {
    if (x == 1.0) return std::numeric_limits<double>::infinity();
    if (x == -1.0) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  // Giles' single-precision approximation ("Approximating the erfinv function", 2010).
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (const double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                           -0.00417768164, 0.246640727, 1.50140941}) {
      p = c + p * w;
    }
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (const double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                           0.00943887047, 1.00167406, 2.83297682}) {
      p = c + p * w;
    }
  }
  double y = p * x;
  constexpr double kTwoOverSqrtPi = 1.1283791670955126;
  for (int step = 0; step < 3; ++step) y -= (std::erf(y) - x) / (kTwoOverSqrtPi * std::exp(-y * y));
  return y;
}

// Modified Bessel function of the first kind, order 0: its power series (positive terms, no
// cancellation). Infinite inputs give NaN as torch's Chebyshev evaluation does.
double bessel_i0(double x) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  const double quarter_x2 = x * x / 4.0;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 2000 && term > sum * 1e-17; ++k) {
    term *= quarter_x2 / (static_cast<double>(k) * k);
    sum += term;
    if (std::isinf(sum)) break;
  }
  return sum;
}

template <typename T>
T nan_max(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

template <typename T>
T nan_min(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

// torch.remainder for floating point: the result has the divisor's sign.
template <typename T>
T float_mod(T a, T b) {
  T m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

// ------------------------------------------------------------------------------------------------
// Instruction kernels
// ------------------------------------------------------------------------------------------------
template <typename T>
void unary_float(ExprOp op, const T* a, T* out, int n) {
  switch (op) {
    case ExprOp::Neg: map1(a, out, n, [](T x) { return -x; }); break;
    case ExprOp::Abs: map1(a, out, n, [](T x) { return std::fabs(x); }); break;
    case ExprOp::Relu: map1(a, out, n, [](T x) { return x < T(0) ? T(0) : x; }); break;  // keeps NaN
    case ExprOp::Sigmoid: map1(a, out, n, [](T x) { return T(1) / (T(1) + std::exp(-x)); }); break;
    case ExprOp::Tanh: map1(a, out, n, [](T x) { return std::tanh(x); }); break;
    case ExprOp::Exp: map1(a, out, n, [](T x) { return std::exp(x); }); break;
    case ExprOp::Log: map1(a, out, n, [](T x) { return std::log(x); }); break;
    case ExprOp::Sqrt: map1(a, out, n, [](T x) { return std::sqrt(x); }); break;
    case ExprOp::Rsqrt: map1(a, out, n, [](T x) { return T(1) / std::sqrt(x); }); break;
    case ExprOp::Recip: map1(a, out, n, [](T x) { return T(1) / x; }); break;
    case ExprOp::Sin: map1(a, out, n, [](T x) { return std::sin(x); }); break;
    case ExprOp::Cos: map1(a, out, n, [](T x) { return std::cos(x); }); break;
    case ExprOp::Erf: map1(a, out, n, [](T x) { return std::erf(x); }); break;
    case ExprOp::Tan: map1(a, out, n, [](T x) { return std::tan(x); }); break;
    case ExprOp::Asin: map1(a, out, n, [](T x) { return std::asin(x); }); break;
    case ExprOp::Acos: map1(a, out, n, [](T x) { return std::acos(x); }); break;
    case ExprOp::Atan: map1(a, out, n, [](T x) { return std::atan(x); }); break;
    case ExprOp::Sinh: map1(a, out, n, [](T x) { return std::sinh(x); }); break;
    case ExprOp::Cosh: map1(a, out, n, [](T x) { return std::cosh(x); }); break;
    case ExprOp::Asinh: map1(a, out, n, [](T x) { return std::asinh(x); }); break;
    case ExprOp::Acosh: map1(a, out, n, [](T x) { return std::acosh(x); }); break;
    case ExprOp::Atanh: map1(a, out, n, [](T x) { return std::atanh(x); }); break;
    case ExprOp::Expm1: map1(a, out, n, [](T x) { return std::expm1(x); }); break;
    case ExprOp::Log1p: map1(a, out, n, [](T x) { return std::log1p(x); }); break;
    case ExprOp::Log2: map1(a, out, n, [](T x) { return std::log2(x); }); break;
    case ExprOp::Log10: map1(a, out, n, [](T x) { return std::log10(x); }); break;
    case ExprOp::Exp2: map1(a, out, n, [](T x) { return std::exp2(x); }); break;
    case ExprOp::Erfc: map1(a, out, n, [](T x) { return std::erfc(x); }); break;
    case ExprOp::Erfinv: map1(a, out, n, [](T x) { return static_cast<T>(erfinv(x)); }); break;
    case ExprOp::Lgamma: map1(a, out, n, [](T x) { return std::lgamma(x); }); break;
    case ExprOp::I0: map1(a, out, n, [](T x) { return static_cast<T>(bessel_i0(x)); }); break;
    case ExprOp::GeluTanh: map1(a, out, n, [](T x) { return gelu_tanh(x); }); break;
    case ExprOp::Floor: map1(a, out, n, [](T x) { return std::floor(x); }); break;
    case ExprOp::Ceil: map1(a, out, n, [](T x) { return std::ceil(x); }); break;
    case ExprOp::Trunc: map1(a, out, n, [](T x) { return std::trunc(x); }); break;
    case ExprOp::Round: map1(a, out, n, [](T x) { return std::nearbyint(x); }); break;
    case ExprOp::Sign:
      // torch: (0 < x) - (x < 0), so NaN gives 0.
      map1(a, out, n, [](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
      break;
    default: fail("internal error: unary op ", ir::expr_op_name(op), " on floating lanes");
  }
}

void unary_int(ExprOp op, const int64_t* a, int64_t* out, int n, DType dtype) {
  switch (op) {
    case ExprOp::Neg: map1(a, out, n, [](int64_t x) { return wrap_sub(0, x); }); break;
    case ExprOp::Abs: map1(a, out, n, [](int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }); break;
    case ExprOp::Relu: map1(a, out, n, [](int64_t x) { return x < 0 ? int64_t{0} : x; }); break;
    case ExprOp::Sign: map1(a, out, n, [](int64_t x) { return static_cast<int64_t>((0 < x) - (x < 0)); }); break;
    case ExprOp::Not: map1(a, out, n, [](int64_t x) { return static_cast<int64_t>(x == 0); }); break;
    case ExprOp::BitNot:
      if (dtype == DType::Bool) {
        map1(a, out, n, [](int64_t x) { return static_cast<int64_t>(x == 0); });
      } else {
        map1(a, out, n, [](int64_t x) { return ~x; });
      }
      break;
    case ExprOp::Floor:
    case ExprOp::Ceil:
    case ExprOp::Trunc:
    case ExprOp::Round: map1(a, out, n, [](int64_t x) { return x; }); break;
    default: fail("internal error: unary op ", ir::expr_op_name(op), " on integer lanes");
  }
}

template <typename T>
void binary_float(ExprOp op, const T* a, const T* b, T* out, int n) {
  switch (op) {
    case ExprOp::Add: map2(a, b, out, n, [](T x, T y) { return x + y; }); break;
    case ExprOp::Sub: map2(a, b, out, n, [](T x, T y) { return x - y; }); break;
    case ExprOp::Mul: map2(a, b, out, n, [](T x, T y) { return x * y; }); break;
    case ExprOp::Div: map2(a, b, out, n, [](T x, T y) { return x / y; }); break;
    case ExprOp::Pow: map2(a, b, out, n, [](T x, T y) { return std::pow(x, y); }); break;
    case ExprOp::Atan2: map2(a, b, out, n, [](T x, T y) { return std::atan2(x, y); }); break;
    case ExprOp::Hypot: map2(a, b, out, n, [](T x, T y) { return std::hypot(x, y); }); break;
    case ExprOp::Fmod: map2(a, b, out, n, [](T x, T y) { return std::fmod(x, y); }); break;
    case ExprOp::Copysign: map2(a, b, out, n, [](T x, T y) { return std::copysign(x, y); }); break;
    case ExprOp::Max: map2(a, b, out, n, [](T x, T y) { return nan_max(x, y); }); break;
    case ExprOp::Min: map2(a, b, out, n, [](T x, T y) { return nan_min(x, y); }); break;
    case ExprOp::FloorDiv: map2(a, b, out, n, [](T x, T y) { return std::floor(x / y); }); break;
    case ExprOp::Mod: map2(a, b, out, n, [](T x, T y) { return float_mod(x, y); }); break;
    default: fail("internal error: binary op ", ir::expr_op_name(op), " on floating lanes");
  }
}

// torch's shifts of a `bits`-wide integer: shifting left by a negative or too large amount gives 0,
// shifting right by one gives the sign fill. Lanes hold the value sign- or zero-extended.
int64_t shift_left(int64_t a, int64_t b, int bits) {
  if (b < 0 || b >= bits) return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(a) << b);
}
int64_t shift_right(int64_t a, int64_t b, int bits, bool is_signed) {
  const int max_shift = bits - (is_signed ? 1 : 0);
  if (b < 0 || b >= max_shift) return max_shift >= 64 ? 0 : a >> max_shift;
  return a >> b;
}

void binary_int(ExprOp op, const int64_t* a, const int64_t* b, int64_t* out, int n, DType dtype,
                const std::string& origin) {
  auto check_divisor = [&] {
    for (int i = 0; i < n; ++i) {
      if (b[i] == 0) fail("integer division by zero in ", origin);
    }
  };
  switch (op) {
    case ExprOp::Add: map2(a, b, out, n, wrap_add); break;
    case ExprOp::Sub: map2(a, b, out, n, wrap_sub); break;
    case ExprOp::Mul: map2(a, b, out, n, wrap_mul); break;
    case ExprOp::FloorDiv:
      check_divisor();
      map2(a, b, out, n, [](int64_t x, int64_t y) {
        if (y == -1) return wrap_sub(0, x);  // avoids INT64_MIN / -1 overflow
        const int64_t q = x / y;
        return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
      });
      break;
    case ExprOp::Mod:
      check_divisor();
      map2(a, b, out, n, [](int64_t x, int64_t y) {
        if (y == -1) return int64_t{0};
        const int64_t r = x % y;
        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
      });
      break;
    case ExprOp::Max: map2(a, b, out, n, [](int64_t x, int64_t y) { return std::max(x, y); }); break;
    case ExprOp::Min: map2(a, b, out, n, [](int64_t x, int64_t y) { return std::min(x, y); }); break;
    case ExprOp::BitAnd: map2(a, b, out, n, [](int64_t x, int64_t y) { return x & y; }); break;
    case ExprOp::BitOr: map2(a, b, out, n, [](int64_t x, int64_t y) { return x | y; }); break;
    case ExprOp::BitXor: map2(a, b, out, n, [](int64_t x, int64_t y) { return x ^ y; }); break;
    case ExprOp::Shl: {
      const int bits = static_cast<int>(dtype_size(dtype) * 8);
      map2(a, b, out, n, [bits](int64_t x, int64_t y) { return shift_left(x, y, bits); });
      break;
    }
    case ExprOp::Shr: {
      const int bits = static_cast<int>(dtype_size(dtype) * 8);
      const bool is_signed = dtype != DType::U8;
      map2(a, b, out, n, [bits, is_signed](int64_t x, int64_t y) { return shift_right(x, y, bits, is_signed); });
      break;
    }
    case ExprOp::And: map2(a, b, out, n, [](int64_t x, int64_t y) { return static_cast<int64_t>(x && y); }); break;
    case ExprOp::Or: map2(a, b, out, n, [](int64_t x, int64_t y) { return static_cast<int64_t>(x || y); }); break;
    default: fail("internal error: binary op ", ir::expr_op_name(op), " on integer lanes");
  }
}

template <typename T>
void compare(ExprOp op, const T* a, const T* b, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    bool r = false;
    switch (op) {
      case ExprOp::Eq: r = a[i] == b[i]; break;
      case ExprOp::Ne: r = a[i] != b[i]; break;
      case ExprOp::Lt: r = a[i] < b[i]; break;
      case ExprOp::Le: r = a[i] <= b[i]; break;
      case ExprOp::Gt: r = a[i] > b[i]; break;
      case ExprOp::Ge: r = a[i] >= b[i]; break;
      default: break;
    }
    out[i] = r;
  }
}

template <typename T>
void select(const int64_t* cond, const T* a, const T* b, T* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = cond[i] ? a[i] : b[i];
}

void eval_cast(const Instr& in, const Instr& src, Registers& regs, int out_reg, int n) {
  const int a = in.a;
  const bool to_bool = in.dtype == DType::Bool;
  switch (src.lane) {
    case Lane::F32: {
      const float* x = regs.f32(a);
      if (in.lane == Lane::F32) {
        std::copy(x, x + n, regs.f32(out_reg));
      } else if (in.lane == Lane::F64) {
        std::transform(x, x + n, regs.f64(out_reg), [](float v) { return static_cast<double>(v); });
      } else {
        int64_t* out = regs.i64(out_reg);
        for (int i = 0; i < n; ++i) out[i] = to_bool ? static_cast<int64_t>(x[i] != 0.0f) : float_to_int(x[i]);
      }
      break;
    }
    case Lane::F64: {
      const double* x = regs.f64(a);
      if (in.lane == Lane::F32) {
        std::transform(x, x + n, regs.f32(out_reg), [](double v) { return static_cast<float>(v); });
      } else if (in.lane == Lane::F64) {
        std::copy(x, x + n, regs.f64(out_reg));
      } else {
        int64_t* out = regs.i64(out_reg);
        for (int i = 0; i < n; ++i) out[i] = to_bool ? static_cast<int64_t>(x[i] != 0.0) : float_to_int(x[i]);
      }
      break;
    }
    case Lane::I64: {
      const int64_t* x = regs.i64(a);
      if (in.lane == Lane::F32) {
        std::transform(x, x + n, regs.f32(out_reg), [](int64_t v) { return static_cast<float>(v); });
      } else if (in.lane == Lane::F64) {
        std::transform(x, x + n, regs.f64(out_reg), [](int64_t v) { return static_cast<double>(v); });
      } else {
        std::copy(x, x + n, regs.i64(out_reg));
      }
      break;
    }
  }
}

template <typename Lanes>
void read_elements(const void* base, DType dtype, const int64_t* offsets, const uint8_t* valid, Lanes* out, int n) {
  auto read = [&](auto typed, auto convert) {
    for (int i = 0; i < n; ++i) out[i] = valid[i] ? convert(typed[offsets[i]]) : Lanes(0);
  };
  auto same = [](auto v) { return static_cast<Lanes>(v); };
  switch (dtype) {
    case DType::Bool:
      read(static_cast<const uint8_t*>(base), [](uint8_t v) { return static_cast<Lanes>(v != 0); });
      break;
    case DType::U8: read(static_cast<const uint8_t*>(base), same); break;
    case DType::I8: read(static_cast<const int8_t*>(base), same); break;
    case DType::I16: read(static_cast<const int16_t*>(base), same); break;
    case DType::I32: read(static_cast<const int32_t*>(base), same); break;
    case DType::I64: read(static_cast<const int64_t*>(base), same); break;
    case DType::F16:
      read(static_cast<const uint16_t*>(base), [](uint16_t v) { return static_cast<Lanes>(half_bits_to_float(v)); });
      break;
    case DType::BF16:
      read(static_cast<const uint16_t*>(base), [](uint16_t v) { return static_cast<Lanes>(bf16_bits_to_float(v)); });
      break;
    case DType::F32: read(static_cast<const float*>(base), same); break;
    case DType::F64: read(static_cast<const double*>(base), same); break;
  }
}

void eval_load(const Instr& in, Registers& regs, int out_reg, int n, const EvalContext& ctx,
               const std::string& origin) {
  LUMINAL_CHECK(ctx.operands && static_cast<size_t>(in.slot) < ctx.operands->size(), "internal error in ", origin,
                ": load from unbound slot ", in.slot);
  const Operand& operand = (*ctx.operands)[in.slot];
  LUMINAL_CHECK(operand.dtype == in.dtype && operand.strides.size() == in.index.size(), "internal error in ", origin,
                ": load", in.slot, " does not match its operand");
  int64_t offsets[kLanes];
  uint8_t valid[kLanes];
  const int64_t* mask = in.mask >= 0 ? regs.i64(in.mask) : nullptr;
  for (int i = 0; i < n; ++i) {
    valid[i] = (!mask || mask[i]) && (!ctx.active || ctx.active[i]);
    offsets[i] = 0;
  }
  for (size_t d = 0; d < in.index.size(); ++d) {
    const int64_t* index = regs.i64(in.index[d]);
    const int64_t stride = operand.strides[d];
    const int64_t size = operand.sizes[d];
    if (in.check_bounds) {
      // Defense in depth: lowering must never produce an out-of-range read.
      for (int i = 0; i < n; ++i) {
        if (valid[i] && (index[i] < 0 || index[i] >= size)) {
          fail("internal error in ", origin, ": load", in.slot, " dimension ", d, " index ", index[i],
               " is outside [0, ", size, ")");
        }
      }
    }
    for (int i = 0; i < n; ++i) offsets[i] += valid[i] ? index[i] * stride : 0;
  }
  switch (in.lane) {
    case Lane::F32: read_elements(operand.data, operand.dtype, offsets, valid, regs.f32(out_reg), n); break;
    case Lane::F64: read_elements(operand.data, operand.dtype, offsets, valid, regs.f64(out_reg), n); break;
    case Lane::I64: read_elements(operand.data, operand.dtype, offsets, valid, regs.i64(out_reg), n); break;
  }
}

void eval_check_index(const Instr& in, Registers& regs, int out_reg, int n, const EvalContext& ctx,
                      const std::string& origin) {
  const int64_t* index = regs.i64(in.a);
  const int64_t* bound = regs.i64(in.b);
  const int64_t* mask = in.mask >= 0 ? regs.i64(in.mask) : nullptr;
  int64_t* out = regs.i64(out_reg);
  for (int i = 0; i < n; ++i) {
    const bool live = (!mask || mask[i]) && (!ctx.active || ctx.active[i]);
    if (live && (index[i] < 0 || index[i] >= bound[i])) {
      fail(ir::check_failure_message(in.symbol, index[i], bound[i], origin));
    }
    out[i] = live ? index[i] : 0;
  }
}

// Rounds or wraps lanes to the instruction's dtype.
void narrow(const Instr& in, Registers& regs, int reg, int n) {
  switch (in.dtype) {
    case DType::F16: map1(regs.f32(reg), regs.f32(reg), n, round_to_half); break;
    case DType::BF16: map1(regs.f32(reg), regs.f32(reg), n, round_to_bf16); break;
    case DType::I32: map1(regs.i64(reg), regs.i64(reg), n, [](int64_t v) { return int64_t{static_cast<int32_t>(v)}; }); break;
    case DType::I16: map1(regs.i64(reg), regs.i64(reg), n, [](int64_t v) { return int64_t{static_cast<int16_t>(v)}; }); break;
    case DType::I8: map1(regs.i64(reg), regs.i64(reg), n, [](int64_t v) { return int64_t{static_cast<int8_t>(v)}; }); break;
    case DType::U8: map1(regs.i64(reg), regs.i64(reg), n, [](int64_t v) { return int64_t{static_cast<uint8_t>(v)}; }); break;
    case DType::Bool: map1(regs.i64(reg), regs.i64(reg), n, [](int64_t v) { return int64_t{v != 0}; }); break;
    default: break;
  }
}

void eval_instruction(const Program& program, size_t r, Registers& regs, int n, const EvalContext& ctx);

void evaluate_region(const Program& program, int region, Registers& regs, int n, const EvalContext& ctx) {
  for (int r : program.regions()[region]) eval_instruction(program, static_cast<size_t>(r), regs, n, ctx);
}

// Runs a fold's body region once per step for every lane, combining in double (floats) or int64.
void eval_fold(const Program& program, const Instr& in, size_t r, Registers& regs, int n, const EvalContext& ctx) {
  const auto op = static_cast<ir::ReduceOp>(in.int_value);
  const int64_t* extent = regs.i64(in.a);
  int64_t steps = 0;
  for (int i = 0; i < n; ++i) {
    if (!ctx.active || ctx.active[i]) steps = std::max(steps, extent[i]);
  }
  const Instr& body = program.code()[in.b];
  const bool floating = body.lane != Lane::I64;
  double facc[kLanes];
  int64_t iacc[kLanes];
  const double finit = op == ir::ReduceOp::Max   ? -std::numeric_limits<double>::infinity()
                       : op == ir::ReduceOp::Min ? std::numeric_limits<double>::infinity()
                       : (op == ir::ReduceOp::Prod || op == ir::ReduceOp::All) ? 1.0
                                                                               : 0.0;
  const int64_t iinit = op == ir::ReduceOp::Max   ? std::numeric_limits<int64_t>::min()
                        : op == ir::ReduceOp::Min ? std::numeric_limits<int64_t>::max()
                        : (op == ir::ReduceOp::Prod || op == ir::ReduceOp::All) ? 1
                                                                                : 0;
  std::fill(facc, facc + n, finit);
  std::fill(iacc, iacc + n, iinit);
  uint8_t active[kLanes];
  EvalContext inner = ctx;
  inner.active = active;
  int64_t* var = regs.i64(in.slot);
  for (int64_t step = 0; step < steps; ++step) {
    for (int i = 0; i < n; ++i) {
      active[i] = (!ctx.active || ctx.active[i]) && step < extent[i];
      var[i] = step;
    }
    evaluate_region(program, in.region, regs, n, inner);
    for (int i = 0; i < n; ++i) {
      if (!active[i]) continue;
      double v = 0;
      int64_t iv = 0;
      switch (body.lane) {
        case Lane::F32: v = regs.f32(in.b)[i]; break;
        case Lane::F64: v = regs.f64(in.b)[i]; break;
        case Lane::I64: iv = regs.i64(in.b)[i]; break;
      }
      if (floating) {
        double& a = facc[i];
        switch (op) {
          case ir::ReduceOp::Sum: a += v; break;
          case ir::ReduceOp::Prod: a *= v; break;
          case ir::ReduceOp::Max: a = (a != a || v != v) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, v); break;
          case ir::ReduceOp::Min: a = (a != a || v != v) ? std::numeric_limits<double>::quiet_NaN() : std::min(a, v); break;
          case ir::ReduceOp::Any: a = (a != 0 || v != 0); break;
          case ir::ReduceOp::All: a = (a != 0 && v != 0); break;
        }
      } else {
        int64_t& a = iacc[i];
        switch (op) {
          case ir::ReduceOp::Sum: a = wrap_add(a, iv); break;
          case ir::ReduceOp::Prod: a = wrap_mul(a, iv); break;
          case ir::ReduceOp::Max: a = std::max(a, iv); break;
          case ir::ReduceOp::Min: a = std::min(a, iv); break;
          case ir::ReduceOp::Any: a = (a != 0 || iv != 0); break;
          case ir::ReduceOp::All: a = (a != 0 && iv != 0); break;
        }
      }
    }
  }
  const int out = static_cast<int>(r);
  switch (in.lane) {
    case Lane::F32: std::transform(facc, facc + n, regs.f32(out), [](double v) { return static_cast<float>(v); }); break;
    case Lane::F64: std::copy(facc, facc + n, regs.f64(out)); break;
    case Lane::I64: std::copy(iacc, iacc + n, regs.i64(out)); break;
  }
}

void eval_instruction(const Program& program, size_t r, Registers& regs, int n, const EvalContext& ctx) {
  const Instr& in = program.code()[r];
  const int out = static_cast<int>(r);
  const std::vector<Instr>& code = program.code();
  switch (in.op) {
    case ExprOp::Const:
    case ExprOp::Symbol:
    case ExprOp::LoopVar:
    case ExprOp::ReduceVar: return;  // filled by the caller (or by the enclosing fold)
    case ExprOp::Fold: eval_fold(program, in, r, regs, n, ctx); break;
    case ExprOp::Load: eval_load(in, regs, out, n, ctx, program.origin()); break;
    case ExprOp::CheckIndex: eval_check_index(in, regs, out, n, ctx, program.origin()); return;
    case ExprOp::Cast: eval_cast(in, code[in.a], regs, out, n); break;
    case ExprOp::Where:
      switch (in.lane) {
        case Lane::F32: select(regs.i64(in.a), regs.f32(in.b), regs.f32(in.c), regs.f32(out), n); break;
        case Lane::F64: select(regs.i64(in.a), regs.f64(in.b), regs.f64(in.c), regs.f64(out), n); break;
        case Lane::I64: select(regs.i64(in.a), regs.i64(in.b), regs.i64(in.c), regs.i64(out), n); break;
      }
      return;  // both branches already have this dtype
    case ExprOp::IsNan: {
      int64_t* dst = regs.i64(out);
      if (code[in.a].lane == Lane::F32) {
        const float* x = regs.f32(in.a);
        for (int i = 0; i < n; ++i) dst[i] = x[i] != x[i];
      } else if (code[in.a].lane == Lane::F64) {
        const double* x = regs.f64(in.a);
        for (int i = 0; i < n; ++i) dst[i] = x[i] != x[i];
      } else {
        std::fill(dst, dst + n, 0);
      }
      return;
    }
    default:
      if (ir::is_comparison_op(in.op)) {
        switch (code[in.a].lane) {
          case Lane::F32: compare(in.op, regs.f32(in.a), regs.f32(in.b), regs.i64(out), n); break;
          case Lane::F64: compare(in.op, regs.f64(in.a), regs.f64(in.b), regs.i64(out), n); break;
          case Lane::I64: compare(in.op, regs.i64(in.a), regs.i64(in.b), regs.i64(out), n); break;
        }
        return;
      }
      if (in.b < 0) {
        switch (in.lane) {
          case Lane::F32: unary_float(in.op, regs.f32(in.a), regs.f32(out), n); break;
          case Lane::F64: unary_float(in.op, regs.f64(in.a), regs.f64(out), n); break;
          case Lane::I64: unary_int(in.op, regs.i64(in.a), regs.i64(out), n, in.dtype); break;
        }
      } else {
        switch (in.lane) {
          case Lane::F32: binary_float(in.op, regs.f32(in.a), regs.f32(in.b), regs.f32(out), n); break;
          case Lane::F64: binary_float(in.op, regs.f64(in.a), regs.f64(in.b), regs.f64(out), n); break;
          case Lane::I64: binary_int(in.op, regs.i64(in.a), regs.i64(in.b), regs.i64(out), n, in.dtype, program.origin()); break;
        }
      }
      break;
  }
  narrow(in, regs, out, n);
}

}  // namespace

void initialize_constants(const Program& program, Registers& regs, const EvalContext& ctx) {
  const std::vector<Instr>& code = program.code();
  for (size_t r = 0; r < code.size(); ++r) {
    const Instr& in = code[r];
    const int reg = static_cast<int>(r);
    if (in.op == ExprOp::Const) {
      switch (in.lane) {
        case Lane::F32: std::fill(regs.f32(reg), regs.f32(reg) + kLanes, static_cast<float>(in.float_value)); break;
        case Lane::F64: std::fill(regs.f64(reg), regs.f64(reg) + kLanes, in.float_value); break;
        case Lane::I64: std::fill(regs.i64(reg), regs.i64(reg) + kLanes, in.int_value); break;
      }
      narrow(in, regs, reg, kLanes);
    } else if (in.op == ExprOp::Symbol) {
      LUMINAL_CHECK(ctx.symbols != nullptr, "internal error: symbols not bound for ", program.origin());
      const auto it = ctx.symbols->find(in.symbol);
      LUMINAL_CHECK(it != ctx.symbols->end(), "shape symbol '", in.symbol, "' has no value in ", program.origin());
      std::fill(regs.i64(reg), regs.i64(reg) + kLanes, it->second);
    }
  }
}

void evaluate_program(const Program& program, Registers& regs, int n, const EvalContext& ctx) {
  evaluate_region(program, 0, regs, n, ctx);
}

void store_lanes(const Instr& instr, Registers& regs, int reg, int n, void* out, int64_t offset,
                 const int64_t* offsets) {
  auto write = [&](auto* dst, auto convert) {
    if (offsets) {
      for (int i = 0; i < n; ++i) dst[offsets[i]] = convert(i);
    } else {
      for (int i = 0; i < n; ++i) dst[offset + i] = convert(i);
    }
  };
  switch (instr.dtype) {
    case DType::Bool: write(static_cast<uint8_t*>(out), [&](int i) { return static_cast<uint8_t>(regs.i64(reg)[i] != 0); }); break;
    case DType::U8: write(static_cast<uint8_t*>(out), [&](int i) { return static_cast<uint8_t>(regs.i64(reg)[i]); }); break;
    case DType::I8: write(static_cast<int8_t*>(out), [&](int i) { return static_cast<int8_t>(regs.i64(reg)[i]); }); break;
    case DType::I16: write(static_cast<int16_t*>(out), [&](int i) { return static_cast<int16_t>(regs.i64(reg)[i]); }); break;
    case DType::I32: write(static_cast<int32_t*>(out), [&](int i) { return static_cast<int32_t>(regs.i64(reg)[i]); }); break;
    case DType::I64: write(static_cast<int64_t*>(out), [&](int i) { return regs.i64(reg)[i]; }); break;
    case DType::F16: write(static_cast<uint16_t*>(out), [&](int i) { return float_to_half_bits(regs.f32(reg)[i]); }); break;
    case DType::BF16: write(static_cast<uint16_t*>(out), [&](int i) { return float_to_bf16_bits(regs.f32(reg)[i]); }); break;
    case DType::F32: write(static_cast<float*>(out), [&](int i) { return regs.f32(reg)[i]; }); break;
    case DType::F64: write(static_cast<double*>(out), [&](int i) { return regs.f64(reg)[i]; }); break;
  }
}

}  // namespace luminal::runtime::cpu
