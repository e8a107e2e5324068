// Run-time values of shape symbols: solved from the input tensors' sizes at each call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace luminal::runtime {

using SymbolValues = std::map<std::string, int64_t>;

// Binds every symbol from the inputs (a dimension that is a bare symbol defines it), then checks
// every input dimension, symbol range and shape assertion. Raises luminal::Error naming the
// input and the expected shape on any mismatch. Also checks dtypes, ranks and devices.
SymbolValues bind_inputs(const ir::Graph& graph, const std::vector<TensorView>& inputs);

int64_t evaluate(const ir::Expr& shape_expr, const SymbolValues& symbols);
std::vector<int64_t> evaluate(const ir::Shape& shape, const SymbolValues& symbols);

}  // namespace luminal::runtime
