// Vectorized interpreter for IR scalar expressions on the CPU.
//
// A body is flattened into a register program (one register per distinct subexpression, CSE by
// structure). Each register holds kLanes values of one lane type: f32 (for f32/f16/bf16 values),
// f64, or i64 (for every integer type and bool). After each instruction the lanes are narrowed to
// the instruction's dtype (f16/bf16 rounding, integer wrap-around, bool normalization), which
// gives exactly the per-op semantics of eager torch.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/scalar_ops.h"
#include "ir/expr.h"

namespace luminal::runtime::cpu {

// GELU with the tanh approximation (common/scalar_ops.h), for the CPU executor's matmul epilogue.
template <typename T>
inline T gelu_tanh(T x) {
  return scalar::lm_gelu_tanh(x);
}

constexpr int kLanes = 256;

enum class Lane : uint8_t { F32, F64, I64 };
Lane lane_of(DType dtype);

// A strided tensor a program reads from.
struct Operand {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> strides;  // elements, one per dimension
  std::vector<int64_t> sizes;
};

struct Instr {
  ir::ExprOp op;
  DType dtype;
  Lane lane;
  int a = -1, b = -1, c = -1;  // operand registers
  std::vector<int> index;      // Load: one register per dimension
  int mask = -1;               // Load / CheckIndex: mask register
  int slot = 0;                // Load: operand slot. LoopVar/ReduceVar: axis. Fold: its variable's register
  bool check_bounds = true;    // Load: verify indices at run time (unless proven in range)
  bool fold_bound = false;     // ReduceVar: bound by a fold (set by the fold, not by the caller)
  int region = -1;             // Fold: the region holding its body
  int64_t int_value = 0;
  double float_value = 0;
  std::string symbol;
};

// Decides whether a load's indices are provably inside its operand (so the run-time check can go).
using LoadProof = std::function<bool(const ir::ExprNode& load)>;

class Program {
 public:
  Program() = default;
  // Compiles roots into one program (shared subexpressions computed once).
  Program(const std::vector<ir::Expr>& roots, std::string origin, const LoadProof& proven = nullptr);

  const std::vector<Instr>& code() const { return code_; }
  // Region 0 runs once per evaluation; the others are fold bodies, run once per fold step.
  const std::vector<std::vector<int>>& regions() const { return regions_; }
  int result(size_t root = 0) const { return results_.at(root); }
  bool uses_loop_var(int axis) const;
  bool uses_reduce_var() const { return uses_reduce_var_; }
  const std::string& origin() const { return origin_; }

 private:
  std::vector<Instr> code_;
  std::vector<std::vector<int>> regions_;
  std::vector<int> results_;
  std::vector<int> loop_axes_;
  bool uses_reduce_var_ = false;
  std::string origin_;
};

// Register file for one program evaluation. Loop/reduce variable and constant registers are
// filled by the caller (set_*) before evaluate_program().
class Registers {
 public:
  explicit Registers(const Program& program);
  float* f32(int reg) { return reinterpret_cast<float*>(&storage_[static_cast<size_t>(reg) * kLanes]); }
  double* f64(int reg) { return reinterpret_cast<double*>(&storage_[static_cast<size_t>(reg) * kLanes]); }
  int64_t* i64(int reg) { return reinterpret_cast<int64_t*>(&storage_[static_cast<size_t>(reg) * kLanes]); }

 private:
  std::vector<uint64_t> storage_;
};

struct EvalContext {
  const std::vector<Operand>* operands = nullptr;
  const std::map<std::string, int64_t>* symbols = nullptr;
  const uint8_t* active = nullptr;  // optional per-lane activity (ragged reductions): loads and checks skip inactive lanes
};

// Prepares constant and symbol registers once per run.
void initialize_constants(const Program& program, Registers& regs, const EvalContext& ctx);
// Evaluates lanes [0, n) of every non-leaf instruction.
void evaluate_program(const Program& program, Registers& regs, int n, const EvalContext& ctx);

// Writes lanes [0, n) of register `reg` (of instruction `instr`'s dtype) to out[offset + i], or to
// out[offsets[i]] when `offsets` is given.
void store_lanes(const Instr& instr, Registers& regs, int reg, int n, void* out, int64_t offset,
                 const int64_t* offsets = nullptr);

}  // namespace luminal::runtime::cpu
