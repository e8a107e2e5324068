// Layout assignment (passes::assign_layouts): every computed tensor is stored row-major in some
// order of its dimensions; this pass picks, for the tensors it may move, the order in which their
// readers read them (and their own inputs are laid out), e.g. channels-last around a ConvNeXt
// block whose LayerNorm and Linear layers read the convolution's output across channels.
//
// A moved node X of logical shape [N, C, H, W] stored in order [0, 2, 3, 1] becomes X' of shape
// [N, H, W, C] (its loop variables renamed: element (n, h, w, c) of X' is element (n, c, h, w) of
// X) and X becomes the pure view X[n, c, h, w] = X'[n, h, w, c], which is inlined into every
// reader: permutes compose into plain index arithmetic and no transposition is materialized. A
// convolution moved so reads its x (and a channels-last copy of its weight) and stores its output
// in that order (ir::Convolution's x_order / w_order / y_order, which cuDNN's binding turns into
// strides).
//
// The choice is a small local search over a cost model: a load costs the loaded tensor's element
// count when the reader's fastest-varying index (its innermost stored loop variable, or the
// variable of the fold the load sits in) does not walk the loaded tensor's innermost stored
// dimension but another one (a transposed read); a convolution must store its output in the order
// its x is stored in (cuDNN's formats; a mixed pair is never chosen). Moves that lower the cost
// are taken until none does.
//
// Legality: only intermediates move. A graph output (the caller's memory, written with eager's
// contiguous strides), an input, a constant, a scatter (it may write its base in place), matmul
// and attention nodes keep their logical layout, and so does a tensor read by anything that
// reads its operands whole (a matmul, a scatter, attention, a grouped-rows contraction, a
// convolution's weight): their reads could not inline the view.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "common/error.h"
#include "passes/inline_helpers.h"
#include "passes/passes.h"

namespace luminal::passes {

using ir::Expr;
using ir::ExprOp;
using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::NodeKind;
using namespace detail;

namespace {

using Order = std::vector<int>;  // stored dim k holds logical dim order[k]

Order identity_order(size_t rank) {
  Order order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = static_cast<int>(d);
  return order;
}

bool is_identity(const Order& order) { return order == identity_order(order.size()); }

// [0, 2, ..., rank - 1, 1]: the channel dim (1) stored innermost.
Order channels_last(size_t rank) {
  Order order{0};
  for (size_t d = 2; d < rank; ++d) order.push_back(static_cast<int>(d));
  order.push_back(1);
  return order;
}

Order inverse(const Order& order) {
  Order inv(order.size());
  for (size_t k = 0; k < order.size(); ++k) inv[order[k]] = static_cast<int>(k);
  return inv;
}

// Element count, a symbolic dimension counted as 1024 (the model only compares tensors).
double elements(const Node& node) {
  double n = 1;
  for (const Expr& dim : node.shape) {
    const auto size = ir::as_int_const(dim);
    n *= size ? static_cast<double>(std::max<int64_t>(*size, 0)) : 1024.0;
  }
  return n;
}

// A load of a producer inside a consumer's body or extents.
struct Site {
  NodeId consumer = -1;
  NodeId producer = -1;
  Expr load;
};

// The loop variable each dimension of a load reads when the load is a pure permutation of the
// reader's loop variables (every index a distinct loop variable, one per reader axis); empty otherwise.
std::vector<int> permutation_read(const Expr& load, size_t reader_rank) {
  if (load->masked || load->load_rank() != reader_rank) return {};
  std::vector<int> sigma;
  std::vector<bool> used(reader_rank, false);
  for (size_t d = 0; d < load->load_rank(); ++d) {
    const Expr& arg = load->args[d];
    if (arg->op != ExprOp::LoopVar || static_cast<size_t>(arg->index) >= reader_rank || used[arg->index]) return {};
    used[arg->index] = true;
    sigma.push_back(arg->index);
  }
  return sigma;
}

bool reads_reduce_var(const Expr& e, int var) {
  bool found = false;
  ir::visit(e, [&](const Expr& n) { found = found || (n->op == ExprOp::ReduceVar && n->index == var); });
  return found;
}

class LayoutSearch {
 public:
  explicit LayoutSearch(const Graph& graph) : g_(graph) {
    order_.resize(g_.size());
    for (const Node& node : g_.nodes()) order_[node.id] = identity_order(node.rank());
    collect_sites();
    find_candidates();
  }

  // The chosen order per node (identity for every node that does not move).
  std::vector<Order> run() {
    for (int round = 0; round < kMaxRounds; ++round) {
      bool improved = false;
      for (NodeId id : candidates_) improved = try_moves(id) || improved;
      if (!improved) break;
    }
    return order_;
  }

 private:
  static constexpr int kMaxRounds = 16;
  static constexpr int kMaxFollowers = 16;  // units that may follow a move
  static constexpr double kGain = 0.5;     // costs are element counts: a real change is >= 1

  void collect_sites() {
    in_.resize(g_.size());
    out_.resize(g_.size());
    whole_reader_.assign(g_.size(), false);
    for (const ir::GraphOutput& o : g_.outputs) {
      if (o.kind == ir::GraphOutput::Kind::Tensor) whole_reader_[o.node] = true;
    }
    for (const Node& node : g_.nodes()) {
      const bool inlinable = (node.kind == NodeKind::Pointwise || node.kind == NodeKind::Reduce) &&
                             node.contraction == ir::Contraction::None;
      if (!inlinable) {
        for (NodeId input : node.inputs) whole_reader_[input] = true;
        continue;
      }
      if (node.convolution) whole_reader_[node.inputs[1]] = true;  // the weight: an input, or read as it is
      auto collect = [&](const Expr& root) {
        ir::visit(root, [&](const Expr& e) {
          if (e->op != ExprOp::Load || (node.convolution && e->index == 1)) return;
          const Site site{node.id, node.inputs.at(e->index), e};
          in_[node.id].push_back(site);
          out_[site.producer].push_back(site);
        });
      };
      if (node.body) collect(node.body);
      for (const Expr& extent : node.reduce_extents) collect(extent);
    }
  }

  void find_candidates() {
    options_.resize(g_.size());
    for (const Node& node : g_.nodes()) {
      if (node.rank() < 2 || whole_reader_[node.id] || out_[node.id].empty()) continue;
      std::vector<Order> suggestions;
      if (node.convolution) {
        if (!node.convolution->x_order.empty() || !node.convolution->y_order.empty()) continue;
        suggestions.push_back(channels_last(node.rank()));
      } else if (node.kind == NodeKind::Pointwise && node.contraction == ir::Contraction::None && node.body &&
                 !as_affine_view(g_, node.id)) {
        suggestions = suggested_orders(node);
      } else {
        continue;
      }
      for (const Order& order : suggestions) {
        if (is_identity(order)) continue;
        if (options_[node.id].empty()) options_[node.id].push_back(identity_order(node.rank()));
        if (std::find(options_[node.id].begin(), options_[node.id].end(), order) == options_[node.id].end()) {
          options_[node.id].push_back(order);
        }
      }
      if (!options_[node.id].empty()) candidates_.push_back(node.id);
    }
  }

  // Orders under which some read of or by a pointwise node becomes a straight (untransposed) one.
  std::vector<Order> suggested_orders(const Node& node) const {
    std::vector<Order> suggestions;
    const size_t rank = node.rank();
    for (const Site& site : out_[node.id]) {
      const Node& reader = g_.node(site.consumer);
      if (reader.convolution) {
        suggestions.push_back(channels_last(rank));  // a convolution's x: channels-last with it
        continue;
      }
      const std::vector<int> sigma = permutation_read(site.load, reader.rank());
      if (sigma.size() != rank) continue;
      Order order = identity_order(rank);  // the dims sorted by the reader's loop variable
      std::sort(order.begin(), order.end(), [&](int a, int b) { return sigma[a] < sigma[b]; });
      suggestions.push_back(order);
    }
    for (const Site& site : in_[node.id]) {
      const Node& input = g_.node(site.producer);
      const std::vector<int> sigma = permutation_read(site.load, rank);
      if (sigma.size() != rank || input.rank() != rank) continue;
      // Loop in the input's stored order: as it is, or channels-last when it is a convolution.
      suggestions.push_back(Order(sigma.begin(), sigma.end()));
      if (input.convolution) {
        Order order;
        for (int d : channels_last(rank)) order.push_back(sigma[d]);
        suggestions.push_back(order);
      }
    }
    return suggestions;
  }

  // The innermost stored dimension of a node that is longer than 1 (-1 when none).
  int innermost_dim(NodeId id) const {
    const Node& node = g_.node(id);
    const Order& order = order_[id];
    for (size_t k = order.size(); k-- > 0;) {
      if (!node.shape[order[k]]->is_int_const(1)) return order[k];
    }
    return -1;
  }

  double site_cost(const Site& site) const {
    const Node& reader = g_.node(site.consumer);
    const Node& producer = g_.node(site.producer);
    if (reader.convolution) {  // x: cuDNN's formats pair x and the output
      return order_[site.consumer] == order_[site.producer] ? 0.0 : std::numeric_limits<double>::infinity();
    }
    const Expr& load = site.load;
    const int dim = innermost_dim(site.producer);
    if (dim < 0 || static_cast<size_t>(dim) >= load->load_rank()) return 0.0;
    std::function<bool(const Expr&)> reads_fast;
    const std::vector<int> reduce_vars = ir::free_reduce_vars(load);
    if (!reduce_vars.empty()) {
      if (reduce_vars.size() != 1) return 0.0;  // a window or several folds: no single fast index
      const int var = reduce_vars[0];
      reads_fast = [var](const Expr& e) { return reads_reduce_var(e, var); };
    } else {
      const int var = innermost_dim(site.consumer);
      if (var < 0) return 0.0;
      reads_fast = [var](const Expr& e) { return ir::reads_loop_var(e, var); };
    }
    if (reads_fast(load->args[dim])) return 0.0;
    for (size_t d = 0; d < load->load_rank(); ++d) {
      if (reads_fast(load->args[d])) return elements(producer);  // walks another dimension: transposed
    }
    return 0.0;  // the same element along the fast index: a broadcast
  }

  // The cost of every site touching the moved nodes (each site once).
  double cost_around(const std::vector<NodeId>& moved) const {
    std::set<std::pair<NodeId, const ir::ExprNode*>> seen;
    double cost = 0;
    for (NodeId id : moved) {
      for (const auto* sites : {&in_[id], &out_[id]}) {
        for (const Site& site : *sites) {
          if (!seen.insert({site.consumer, site.load.get()}).second) continue;
          cost += site_cost(site);
        }
      }
    }
    return cost;
  }

  using Move = std::vector<NodeId>;  // nodes that take one order together

  bool has_option(NodeId id, const Order& order) const {
    const std::vector<Order>& options = options_[id];
    return std::find(options.begin(), options.end(), order) != options.end();
  }

  // The nodes that must take `order` with `id`: a convolution and its x (cuDNN's formats pair
  // them), closed over every convolution reading that x. Empty when one of them cannot.
  Move unit(NodeId id, const Order& order) const {
    Move nodes{id};
    for (size_t k = 0; k < nodes.size(); ++k) {
      const NodeId n = nodes[k];
      if (!has_option(n, order)) return {};
      std::vector<NodeId> linked;
      if (g_.node(n).convolution) linked.push_back(g_.node(n).inputs[0]);
      for (const Site& site : out_[n]) {
        if (g_.node(site.consumer).convolution) linked.push_back(site.consumer);
      }
      for (NodeId m : linked) {
        if (std::find(nodes.begin(), nodes.end(), m) == nodes.end()) nodes.push_back(m);
      }
    }
    return nodes;
  }

  // Sets the nodes to `order` and returns the change of the cost.
  double apply(const Move& nodes, const Order& order) {
    const double before = cost_around(nodes);
    for (NodeId n : nodes) order_[n] = order;
    return cost_around(nodes) - before;
  }

  // Candidates next to the moved nodes (reading them or read by them), not moved yet.
  std::vector<NodeId> neighbours(const std::vector<NodeId>& moved) const {
    std::vector<NodeId> out;
    for (NodeId id : moved) {
      for (const auto* sites : {&in_[id], &out_[id]}) {
        for (const Site& site : *sites) {
          for (NodeId n : {site.consumer, site.producer}) {
            if (options_[n].empty() || std::find(moved.begin(), moved.end(), n) != moved.end()) continue;
            if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
          }
        }
      }
    }
    return out;
  }

  // Moves the unit of `id` to `order`, then lets neighbours follow one unit at a time while each
  // step lowers the cost (a layout change crosses a chain of nodes: a convolution, its x and the
  // residual reading that x move together or not at all); keeps the whole if the total is lower.
  bool try_move(NodeId id, const Order& order) {
    const Move seed = unit(id, order);
    if (seed.empty()) return false;
    std::vector<NodeId> moved;
    std::vector<Order> saved;
    auto record = [&](const Move& nodes) {
      for (NodeId n : nodes) moved.push_back(n), saved.push_back(order_[n]);
    };
    record(seed);
    double delta = apply(seed, order);
    for (int step = 0; step < kMaxFollowers; ++step) {
      double best = -kGain;
      Move best_unit;
      Order best_order;
      for (NodeId n : neighbours(moved)) {
        for (const Order& option : options_[n]) {
          if (option == order_[n]) continue;
          const Move follower = unit(n, option);
          if (follower.empty()) continue;
          const bool overlaps = std::any_of(follower.begin(), follower.end(), [&](NodeId m) {
            return std::find(moved.begin(), moved.end(), m) != moved.end();
          });
          if (overlaps) continue;
          std::vector<Order> current;
          for (NodeId m : follower) current.push_back(order_[m]);
          const double change = apply(follower, option);
          for (size_t k = 0; k < follower.size(); ++k) order_[follower[k]] = current[k];
          if (change < best) best = change, best_unit = follower, best_order = option;
        }
      }
      if (best_unit.empty()) break;
      record(best_unit);
      delta += apply(best_unit, best_order);
    }
    if (delta < -kGain) return true;
    for (size_t k = moved.size(); k-- > 0;) order_[moved[k]] = saved[k];
    return false;
  }

  bool try_moves(NodeId id) {
    bool improved = false;
    const std::vector<Order> options = options_[id];
    for (const Order& order : options) {
      if (order != order_[id]) improved = try_move(id, order) || improved;
    }
    return improved;
  }

  const Graph& g_;
  std::vector<Order> order_;
  std::vector<std::vector<Site>> in_, out_;  // per node: the loads it makes, the loads of it
  std::vector<bool> whole_reader_;           // per node: read whole by someone (or an output)
  std::vector<std::vector<Order>> options_;  // per candidate: identity and the orders it may take
  std::vector<NodeId> candidates_;
};

// The node's body (and extents) with loop variable d renamed to its stored position, and loads
// of moved inputs `stored_inputs` (slot -> the order that input is stored in) indexed in that order.
Expr relayout(const Expr& root, const Order& inv, const std::map<int, Order>& stored_inputs) {
  return ir::transform(root, [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
    if (e->op == ExprOp::LoopVar && !inv.empty()) return ir::loop_var(inv.at(e->index));
    if (e->op != ExprOp::Load) return nullptr;
    const auto it = stored_inputs.find(e->index);
    if (it == stored_inputs.end()) return nullptr;
    std::vector<Expr> index;
    for (int d : it->second) index.push_back(args.at(d));
    return ir::load(e->index, e->dtype, std::move(index), e->masked ? args.back() : nullptr);
  });
}

// A pointwise node copying `source` (stored in logical order) into `order`.
Node stored_copy(const Node& source, NodeId source_id, const Order& order, const std::string& why) {
  ir::Shape shape;
  for (int d : order) shape.push_back(source.shape[d]);
  return permuted_read(source.dtype, std::move(shape), source_id, inverse(order), why);
}

// The logical view of a node stored in `order`: X[i...] = X'[i_order[0], ...].
Node logical_view(const Node& logical, NodeId stored_id, const Order& order) {
  return permuted_read(logical.dtype, logical.shape, stored_id, order, logical.origin);
}

class Rewriter {
 public:
  Rewriter(const Graph& in, const std::vector<Order>& orders) : in_(in), orders_(orders) {}

  Graph run() {
    out_.symbols = in_.symbols;
    out_.shape_assertions = in_.shape_assertions;
    out_.inputs.resize(in_.inputs.size(), -1);
    remap_.assign(in_.size(), -1);
    stored_.assign(in_.size(), -1);
    for (const Node& node : in_.nodes()) {
      Node copy = node;
      for (NodeId& input : copy.inputs) input = remap_[input];
      if (node.convolution) {
        add_convolution(node, std::move(copy));
      } else if (!is_identity(orders_[node.id])) {
        add_moved(node, std::move(copy));
      } else {
        remap_[node.id] = out_.add(std::move(copy));
      }
      if (node.kind == NodeKind::Input) out_.inputs[node.input_position] = remap_[node.id];
    }
    out_.outputs = in_.outputs;
    for (ir::GraphOutput& o : out_.outputs) {
      if (o.kind != ir::GraphOutput::Kind::Tensor) continue;
      LUMINAL_CHECK(is_identity(orders_[o.node]), "internal error: layout assignment moved output %", o.node);
      o.node = remap_[o.node];
    }
    inline_views();
    return eliminate_dead_code(out_);
  }

 private:
  void add_moved(const Node& node, Node copy) {
    const Order& order = orders_[node.id];
    const Order inv = inverse(order);
    Node stored = std::move(copy);
    stored.shape.clear();
    for (int d : order) stored.shape.push_back(node.shape[d]);
    stored.body = relayout(stored.body, inv, {});
    for (Expr& extent : stored.reduce_extents) extent = relayout(extent, inv, {});
    stored_[node.id] = out_.add(std::move(stored));
    remap_[node.id] = out_.add(logical_view(node, stored_[node.id], order));
    views_.insert(remap_[node.id]);
  }

  void add_convolution(const Node& node, Node copy) {
    ir::Convolution conv = *node.convolution;
    std::map<int, Order> stored_inputs;
    const NodeId x = node.inputs[0], w = node.inputs[1];
    if (stored_[x] >= 0) {  // read the moved x where it is stored
      conv.x_order = orders_[x];
      stored_inputs[0] = orders_[x];
      copy.inputs[0] = stored_[x];
    }
    const Order& order = orders_[node.id];
    const Node& weight = in_.node(w);
    // A channels-last convolution reads a channels-last copy of its weight (as eager's does), so
    // that cuDNN gets one format; a weight with one channel per group is that already.
    if (!is_identity(order) && !conv.x_order.empty() && !weight.shape[1]->is_int_const(1)) {
      conv.w_order = channels_last(weight.rank());
      copy.inputs[1] = out_.add(stored_copy(out_.node(copy.inputs[1]), copy.inputs[1], conv.w_order,
                                            str_cat("channels-last weight of ", node.origin)));
      stored_inputs[1] = conv.w_order;
    }
    const Order inv = is_identity(order) ? Order{} : inverse(order);
    if (!inv.empty()) {
      conv.y_order = order;
      copy.shape.clear();
      for (int d : order) copy.shape.push_back(node.shape[d]);
    }
    copy.body = relayout(copy.body, inv, stored_inputs);
    for (Expr& extent : copy.reduce_extents) extent = relayout(extent, inv, {});
    conv.body = copy.body;
    copy.convolution = std::make_shared<const ir::Convolution>(std::move(conv));
    if (inv.empty()) {
      remap_[node.id] = out_.add(std::move(copy));
      return;
    }
    stored_[node.id] = out_.add(std::move(copy));
    remap_[node.id] = out_.add(logical_view(node, stored_[node.id], order));
    views_.insert(remap_[node.id]);
  }

  // Every reader of a logical view reads the stored node instead (the view's index inlined).
  void inline_views() {
    for (NodeId id = 0; id < static_cast<NodeId>(out_.size()); ++id) {
      Node& consumer = out_.node(id);
      if (consumer.kind != NodeKind::Pointwise && consumer.kind != NodeKind::Reduce) continue;
      if (consumer.convolution || consumer.contraction != ir::Contraction::None) continue;
      bool changed = false;
      for (size_t slot = 0; slot < consumer.inputs.size(); ++slot) {
        if (views_.count(consumer.inputs[slot]) == 0) continue;
        inline_slot(out_, consumer, slot);
        changed = true;
      }
      if (!changed) continue;
      compact_slots(consumer);
      consumer.body = ir::simplify(consumer.body, ranges_of(consumer));
      for (Expr& extent : consumer.reduce_extents) extent = ir::simplify(extent, ir::IndexRanges{consumer.shape, {}});
    }
  }

  const Graph& in_;
  const std::vector<Order>& orders_;
  Graph out_;
  std::vector<NodeId> remap_;   // per input node: what its readers read in out_ (itself or its view)
  std::vector<NodeId> stored_;  // per input node: its stored (moved) node in out_, or -1
  std::set<NodeId> views_;      // the logical views added
};

}  // namespace

Graph assign_layouts(const Graph& graph) {
  const std::vector<Order> orders = LayoutSearch(graph).run();
  const bool any = std::any_of(orders.begin(), orders.end(), [](const Order& o) { return !is_identity(o); });
  if (!any) return graph;
  Graph out = Rewriter(graph, orders).run();
  out.verify();
  return out;
}

}  // namespace luminal::passes
