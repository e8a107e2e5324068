// Labels of run-time checks: what a failed index or value check says.
//
// A check (ir::check_index / ir::check_value) carries its label, so the message names the
// user-level op and input it guards however the check is later fused, inlined or moved into
// another node's kernel (the node that runs it is usually not the op whose index it is).
//
// A label is a message template. Placeholders filled when the check fails:
//   {value}      the checked value           {bound}  the exclusive upper bound
//   {limit}      bound - 1 (largest valid)    {index}  the index as the user wrote it: a wrapped
//                                                      negative index is shown unwrapped
// and placeholders filled when the translator's node is created (Builder), from the op node:
//   {op}         user-level op, e.g. embedding_bag for aten._embedding_bag_forward_only.default
//   {target}     e.g. aten.embedding.default  {node}   the exported node's name
#pragma once

#include <cstdint>
#include <string>

#include "ir/expr.h"

namespace luminal::ir {

// The exported node a translator is working on.
struct CheckSite {
  std::string node;    // e.g. "embedding_1"
  std::string target;  // short target, e.g. "aten.embedding.default"
};

// "aten._embedding_bag_forward_only.default" -> "embedding_bag", "aten.index.Tensor" -> "index".
std::string user_op_name(const std::string& target);

// The label of an index into a dimension of size {bound}, read from input `input` of the op
// (e.g. "indices"; empty: the op's index input). `wrap_negative`: negative indices count from the
// end, so the message shows the valid range [-bound, bound).
std::string index_check_label(const std::string& input, bool wrap_negative);

// Fills the op placeholders of every check label in `e` (unlabelled checks get the generic index
// label) for the node at `site`.
Expr bind_check_labels(const Expr& e, const CheckSite& site);

// The message of a failed check. An empty label gives the generic form naming `origin` (the
// graph node whose program failed).
std::string check_failure_message(const std::string& label, int64_t value, int64_t bound, const std::string& origin);

}  // namespace luminal::ir
