// Library-call staging for the CUDA engine (a graph -> graph pass, run before its plan of steps).
//
// User inputs and graph outputs feeding a library node (a matmul, or a convolution cuDNN may
// compute) are copied into the arena, and a library node that is a graph output writes the arena
// and is copied out, so that captured library calls only ever touch
// memory whose address is fixed for an instance (an output's memory is the caller's, new on every
// call). A view that repeats rows or columns of its base (a stride-0 matrix dimension) is staged
// too: cuBLASLt has no leading dimension for it.
#pragma once

#include <cstddef>
#include <string>

#include "ir/graph.h"

namespace luminal::passes {

struct StagedGraph {
  ir::Graph graph;
  size_t copies = 0;  // staging copies added
};

StagedGraph stage_library_operands(const ir::Graph& graph);

}  // namespace luminal::passes
