// Private to csrc/passes: the inlining machinery shared by the passes (passes.cpp) and row
// fusion (row_fusion.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "ir/graph.h"
#include "ir/simplify.h"

namespace luminal::passes::detail {

// The ranges of a node's loop variables (its shape) and reduce variables (static extents).
ir::IndexRanges ranges_of(const ir::Node& node);
// Inlines producer input `slot` of `consumer`: each load of that slot becomes the producer's body
// at the loaded index (the slot stays until compact_slots drops it).
void inline_slot(ir::Graph& graph, ir::Node& consumer, size_t slot);
// Drops input slots that no load reads any more, renumbering the loads.
void compact_slots(ir::Node& node);
// The loop variables an expression reads (through nested loads too).
std::vector<bool> loop_vars_read(const ir::Expr& e, size_t rank);

}  // namespace luminal::passes::detail
