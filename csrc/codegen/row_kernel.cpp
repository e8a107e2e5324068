// Row kernels: one kernel for a whole row-local graph (passes/row_plan.h).
#include <algorithm>

#include "codegen/kernel_writer.h"
#include "ir/simplify.h"
#include "passes/row_plan.h"

namespace luminal::codegen::detail {

// Row kernels: the code computing this node's row for batch index i0 into `array`, one
// statement per element from its specialized body (see passes::specialize_row_elements): every
// row index is a constant, so rows stay in registers.
std::string KernelWriter::row_fragment(const std::string& array, const std::vector<Expr>& element_bodies) {
  const int root = open_scope(-1, {}, false);
  // Folds that every element evaluates unconditionally and that share a loop (same reduction and
  // extent: an embedding bag's dimensions, a layer's outputs) run as one loop with one
  // accumulator each, so that the loads they share are issued once and their chains overlap.
  std::vector<std::vector<Expr>> groups;
  for (const Expr& body : element_bodies) {
    for (const Expr& fold : unconditional_folds(body)) {
      auto same_loop = [&](const std::vector<Expr>& group) {
        const Expr& g = group.front();
        return g->int_value == fold->int_value && g->index == fold->index && g->dtype == fold->dtype &&
               ir::expr_equal(g->args[0], fold->args[0]);
      };
      auto it = std::find_if(groups.begin(), groups.end(), same_loop);
      if (it == groups.end()) {
        groups.push_back({fold});
      } else if (std::none_of(it->begin(), it->end(), [&](const Expr& f) { return ir::expr_equal(f, fold); })) {
        it->push_back(fold);
      }
    }
  }
  // Static groups unroll on their own; groups whose length depends on the data (embedding bags)
  // share one loop, so that the gathers of different tables are in flight together.
  std::vector<std::vector<Expr>> ragged;
  for (std::vector<Expr>& group : groups) {
    if (!ir::as_int_const(group.front()->args[0])) {
      ragged.push_back(std::move(group));
    } else if (group.size() > 1) {
      emit_fold_groups({group}, root);
    }
  }
  if (!ragged.empty()) emit_fold_groups(ragged, root);
  for (size_t j = 0; j < element_bodies.size(); ++j) {
    const std::string value = emit(element_bodies[j], root);
    line(root, str_cat(array, "[", j, "] = ", value, ";"));
  }
  return scopes_[root]->code.str();
}

}  // namespace luminal::codegen::detail

namespace luminal::codegen {

using detail::hex_bits;
using detail::KernelWriter;
using detail::sanitize;
using detail::storage_type;
using detail::value_type;
using ir::Expr;
using ir::Node;
using ir::NodeKind;

namespace {

std::string row_array(ir::NodeId id) { return str_cat("t", id); }
std::string node_pointer(ir::NodeId id) { return str_cat("p.g", id); }

std::string store_value(DType dtype, const std::string& value) {
  switch (dtype) {
    case DType::F16: return "lm_f2h(" + value + ")";
    case DType::BF16: return "lm_f2bf(" + value + ")";
    case DType::Bool: return "(unsigned char)(" + value + ")";
    default: return value;
  }
}

// The input nodes that the graph updates in place, by node id: the kernel writes their memory, so it
// reads them through coherent loads.
std::vector<bool> inputs_written(const ir::Graph& graph) {
  std::vector<bool> written(graph.size(), false);
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.mutated_input >= 0) written[graph.inputs.at(static_cast<size_t>(out.mutated_input))] = true;
  }
  return written;
}

// How a row-kernel node sees each of its inputs.
std::vector<OperandInfo> row_operands(const ir::Graph& graph, const Node& node, const std::vector<bool>& written) {
  std::vector<OperandInfo> operands;
  for (ir::NodeId input : node.inputs) {
    const Node& producer = graph.node(input);
    OperandInfo info;
    info.dtype = producer.dtype;
    info.shape = producer.shape;
    switch (producer.kind) {
      case NodeKind::Input:
        // The executor runs the row kernel only when every input is contiguous (strides then
        // follow from the shapes and fold into the index arithmetic).
        info.layout = Layout::Contiguous;
        info.name = node_pointer(input);
        info.read_only = !written[input];
        break;
      case NodeKind::Constant:
        info.layout = Layout::Fixed;
        info.fixed_strides = producer.constant->strides;
        info.name = node_pointer(input);
        info.read_only = true;
        break;
      case NodeKind::Pointwise:
        info.layout = Layout::Row;
        info.name = row_array(input);
        break;
      default: fail("internal error: the row kernel cannot read ", ir::node_kind_name(producer.kind), " node %", input);
    }
    operands.push_back(std::move(info));
  }
  return operands;
}

}  // namespace

Kernel render_row_kernel(const ir::Graph& graph, const Expr& rows, const schedule::KernelSchedule& schedule) {
  detail::check_row_renderable(schedule);
  std::vector<bool> is_output(graph.size(), false), read(graph.size(), false);
  for (const ir::GraphOutput& out : graph.outputs) {
    if (out.kind == ir::GraphOutput::Kind::Tensor) is_output[out.node] = true;
  }
  std::vector<std::string> symbols;
  ir::collect_symbols(rows, symbols);
  std::vector<std::string> check_labels;  // of every node's checks
  const std::vector<bool> written = inputs_written(graph);
  std::ostringstream body;
  for (const Node& node : graph.nodes()) {
    if (!node.is_compute()) continue;
    LUMINAL_CHECK(node.kind == NodeKind::Pointwise, "internal error: row kernel node ", node.origin, " is not pointwise");
    for (ir::NodeId input : node.inputs) read[input] = true;
    for (const Expr& dim : node.shape) ir::collect_symbols(dim, symbols);
    ir::collect_symbols(node.body, symbols);
    const std::vector<Expr> bodies = passes::specialize_row_elements(graph, node);
    const size_t elements = bodies.size();
    const std::vector<OperandInfo> operands = row_operands(graph, node, written);
    std::string fragment;
    try {
      fragment = KernelWriter(node, operands, schedule, &check_labels).row_fragment(row_array(node.id), bodies);
    } catch (const Error& error) {
      fail("CUDA code generation failed for ", node.origin, " in the row kernel: ", error.what());
    }
    body << "  // " << node.origin << "\n";
    body << "  " << value_type(node.dtype) << " " << row_array(node.id) << "[" << elements << "];\n";
    body << "  {\n" << fragment << "  }\n";
    if (!is_output[node.id]) continue;
    body << "  #pragma unroll\n";
    body << "  for (int j = 0; j < " << elements << "; ++j) " << node_pointer(node.id) << "[i0 * " << elements
         << "LL + j] = " << store_value(node.dtype, row_array(node.id) + "[j]") << ";\n";
  }
  // The inputs' row strides follow from their shapes (row_operands: contiguous), whose symbols the
  // computed nodes need not mention (a pooler's x[:, 0] of x[s0, s1, 64] reads rows s1 * 64 apart).
  for (const Node& node : graph.nodes()) {
    if (!read[node.id] || node.is_compute()) continue;
    for (const Expr& dim : node.shape) ir::collect_symbols(dim, symbols);
  }
  std::sort(symbols.begin(), symbols.end());
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());

  Kernel kernel;
  kernel.schedule = schedule;
  kernel.outputs = rows;
  kernel.block_size = schedule.block_size;
  std::ostringstream params;
  params << "struct LM_KERNEL_params {\n";
  auto add = [&](ParamKind kind, int slot, int dim, const std::string& symbol, const std::string& declaration) {
    kernel.params.push_back(KernelParam{kind, slot, dim, symbol});
    params << "  " << declaration << ";\n";
  };
  for (const Node& node : graph.nodes()) {
    if (is_output[node.id]) {
      add(ParamKind::NodePointer, node.id, -1, "", str_cat(storage_type(node.dtype), "* g", node.id));
    } else if (read[node.id] && !node.is_compute()) {
      add(ParamKind::NodePointer, node.id, -1, "",
          str_cat("const ", storage_type(node.dtype), "* __restrict__ g", node.id));
    }
  }
  add(ParamKind::ErrorFlag, -1, -1, "", "lm_i64* error");
  add(ParamKind::CheckBase, -1, -1, "", "lm_i64 check_base");
  for (const std::string& symbol : symbols) add(ParamKind::Symbol, -1, -1, symbol, "lm_i64 " + sanitize(symbol));
  params << "};\n";

  std::ostringstream text;
  text << params.str();
  text << "extern \"C\" __global__ void __launch_bounds__(" << schedule.block_size << ") LM_KERNEL(const LM_KERNEL_params p) {\n  lm_kernel_entry();\n";
  text << "  const lm_i64 i0 = (lm_i64)blockIdx.x * blockDim.x + threadIdx.x;\n";
  text << "  if (i0 >= " << KernelWriter::shape_code(rows) << ") return;\n";
  text << "  bool lm_ok = true; (void)lm_ok;\n";
  text << body.str() << "}\n";
  const std::string source = text.str();
  kernel.name = str_cat("lm_row_", hex_bits(std::hash<std::string>{}(source)).substr(2));
  kernel.source = KernelWriter::replace_all(source, "LM_KERNEL", kernel.name);
  kernel.check_labels = std::move(check_labels);
  return kernel;
}

Kernel generate_row_kernel(const ir::Graph& graph, const Expr& rows) {
  return render_row_kernel(graph, rows, schedule::choose_row_schedule());
}

}  // namespace luminal::codegen
