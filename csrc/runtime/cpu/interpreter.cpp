#include "runtime/cpu/interpreter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/half.h"
#include "common/scalar_ops.h"
#include "ir/check_label.h"
#include "ir/scalar_eval.h"

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
      case ExprOp::Where:
      case ExprOp::Cast:
        LUMINAL_SCALAR_OP_CASES
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

using scalar::lm_wrap_add;
using scalar::lm_wrap_mul;

// The op table's host columns (ir/op_table.h) over lanes: one loop per op, so that each one
// vectorizes on its own. Unary ops get their operand as `b` too (y is then unused).
#define LM_NA (ir::op_not_applicable(op), x)
#define LUMINAL_LANES_ENTRY(name, arity, text, kind, classes, host_float, host_int, cuda_float, cuda_int) \
  case ExprOp::name:                                                                                       \
    for (int i = 0; i < n; ++i) {                                                                          \
      const auto x = a[i], y = b[i];                                                                       \
      (void)x, (void)y;                                                                                    \
      out[i] = static_cast<Out>(LUMINAL_LANES_COLUMN(host_float, host_int));                               \
    }                                                                                                      \
    return;

// Floating lanes: Unary and Binary ops write T lanes, Test and Compare ops bool (int64) lanes.
template <typename T, typename Out>
void float_lanes(ExprOp op, const T* a, const T* b, Out* out, int n) {
  using namespace ::luminal::scalar;
#define LUMINAL_LANES_COLUMN(host_float, host_int) host_float
  switch (op) { LUMINAL_EXPR_OPS(LUMINAL_LANES_ENTRY) }
#undef LUMINAL_LANES_COLUMN
}

// Integer and bool lanes (sign- or zero-extended to int64), every scalar kind; narrowed afterwards.
void int_lanes(ExprOp op, const int64_t* a, const int64_t* b, int64_t* out, int n, ir::IntLane lane) {
  using namespace ::luminal::scalar;
  using Out = int64_t;
  const int bits = lane.bits;
  const bool is_signed = lane.is_signed, is_bool = lane.is_bool;
  (void)bits, (void)is_signed, (void)is_bool;
#define LUMINAL_LANES_COLUMN(host_float, host_int) host_int
  switch (op) { LUMINAL_EXPR_OPS(LUMINAL_LANES_ENTRY) }
#undef LUMINAL_LANES_COLUMN
}
#undef LUMINAL_LANES_ENTRY
#undef LM_NA

// A scalar op (Unary, Test, Binary or Compare kind) over lanes [0, n).
void eval_scalar(const Program& program, const Instr& in, Registers& regs, int out, int n) {
  const Instr& src = program.code()[in.a];
  const int b = in.b >= 0 ? in.b : in.a;
  const ir::OpKind kind = ir::op_info(in.op).kind;
  const bool bool_result = kind == ir::OpKind::Test || kind == ir::OpKind::Compare;
  switch (src.lane) {
    case Lane::F32:
      if (bool_result) return float_lanes(in.op, regs.f32(in.a), regs.f32(b), regs.i64(out), n);
      return float_lanes(in.op, regs.f32(in.a), regs.f32(b), regs.f32(out), n);
    case Lane::F64:
      if (bool_result) return float_lanes(in.op, regs.f64(in.a), regs.f64(b), regs.i64(out), n);
      return float_lanes(in.op, regs.f64(in.a), regs.f64(b), regs.f64(out), n);
    case Lane::I64:
      if (ir::op_info(in.op).classes & ir::op_class::DividesInt) {
        const int64_t* divisor = regs.i64(b);
        for (int i = 0; i < n; ++i) {
          if (divisor[i] == 0) fail("integer division by zero in ", program.origin());
        }
      }
      return int_lanes(in.op, regs.i64(in.a), regs.i64(b), regs.i64(out), n, ir::int_lane(src.dtype));
  }
}

template <typename T>
void select(const int64_t* cond, const T* a, const T* b, T* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = cond[i] ? a[i] : b[i];
}

void eval_cast(const Instr& in, const Instr& src, Registers& regs, int out_reg, int n) {
  const int a = in.a;
  const bool to_bool = in.dtype == DType::Bool;
  const bool narrow = float_cast_goes_through_int32(in.dtype);
  switch (src.lane) {
    case Lane::F32: {
      const float* x = regs.f32(a);
      if (in.lane == Lane::F32) {
        std::copy(x, x + n, regs.f32(out_reg));
      } else if (in.lane == Lane::F64) {
        std::transform(x, x + n, regs.f64(out_reg), [](float v) { return static_cast<double>(v); });
      } else {
        int64_t* out = regs.i64(out_reg);
        for (int i = 0; i < n; ++i) out[i] = to_bool ? static_cast<int64_t>(x[i] != 0.0f) : scalar::lm_f2int(x[i], narrow);
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
        for (int i = 0; i < n; ++i) out[i] = to_bool ? static_cast<int64_t>(x[i] != 0.0) : scalar::lm_f2int(x[i], narrow);
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
          case ir::ReduceOp::Sum: a = lm_wrap_add(a, iv); break;
          case ir::ReduceOp::Prod: a = lm_wrap_mul(a, iv); break;
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
      LUMINAL_SCALAR_OP_CASES eval_scalar(program, in, regs, out, n);
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
