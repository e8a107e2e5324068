// Labels of run-time checks: the message of a failed check names the user-level op and input,
// however the check is fused; value checks survive simplification; CUDA kernels keep labels out
// of their source (equal computations share a kernel) and report them through check_base.
#include <gtest/gtest.h>

#include "codegen/cuda_codegen.h"
#include "common/error.h"
#include "graph_helpers.h"
#include "ir/check_label.h"
#include "ir/simplify.h"

using namespace luminal;
using namespace luminal::ir;
using luminal::testing::GraphFixture;
using luminal::testing::Host;

namespace {

template <typename F>
std::string failure_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CheckLabel, UserOpNames) {
  EXPECT_EQ(user_op_name("aten._embedding_bag_forward_only.default"), "embedding_bag");
  EXPECT_EQ(user_op_name("aten._embedding_bag.default"), "embedding_bag");
  EXPECT_EQ(user_op_name("aten.embedding_bag.padding_idx"), "embedding_bag");
  EXPECT_EQ(user_op_name("aten.index.Tensor"), "index");
  EXPECT_EQ(user_op_name("aten.index_select.default"), "index_select");
  EXPECT_EQ(user_op_name("weird"), "weird");
}

TEST(CheckLabel, FailureMessages) {
  const CheckSite site{"embedding_1", "aten.embedding.default"};
  const Expr plain = bind_check_labels(check_index(loop_var(0), int_const(10), nullptr, index_check_label("indices", false)), site);
  EXPECT_EQ(check_failure_message(plain->symbol, -1, 10, "unused"),
            "embedding: index -1 is out of bounds: valid range [0, 10) (indices, aten.embedding.default, node embedding_1)");
  // A wrapped negative index is shown as written: -11 wrapped to -1 before it failed.
  const Expr wrapped = bind_check_labels(check_index(loop_var(0), int_const(10), nullptr, index_check_label("indices[0]", true)),
                                         CheckSite{"index", "aten.index.Tensor"});
  EXPECT_EQ(check_failure_message(wrapped->symbol, -1, 10, "unused"),
            "index: index -11 is out of bounds: valid range [-10, 10) (indices[0], aten.index.Tensor, node index)");
  EXPECT_EQ(check_failure_message(wrapped->symbol, 12, 10, "unused").substr(0, 15), "index: index 12");
  // Unlabelled checks get the generic label of the op; without any label, the old message.
  const Expr bare = bind_check_labels(check_index(loop_var(0), int_const(3)), site);
  EXPECT_NE(check_failure_message(bare->symbol, 5, 3, "x").find("embedding: index 5 is out of bounds"), std::string::npos);
  EXPECT_EQ(check_failure_message("", 5, 3, "view (aten.view.default)"),
            "index 5 is out of bounds for a dimension of size 3 in view (aten.view.default)");
  // A node name from an archive is data: braces in it never read as placeholders.
  const Expr odd = bind_check_labels(check_index(loop_var(0), int_const(3), nullptr, index_check_label("x", false)),
                                     CheckSite{"{value}", "aten.gather.default"});
  const std::string odd_message = check_failure_message(odd->symbol, 7, 3, "");
  EXPECT_NE(odd_message.find("node (value))"), std::string::npos) << odd_message;
  EXPECT_EQ(check_failure_message("{op} {limit} {bound} {value}", 4, 3, ""), "{op} 2 3 4");
}

TEST(CheckLabel, ValueChecksSurviveSimplification) {
  // Offsets checked against an empty indices tensor (bound 1): the index check's range [0, 0] makes
  // the extent a constant 0 and drops the checks with it; value checks stay.
  const Expr start = load(0, DType::I64, {loop_var(0)});
  const Expr end = load(0, DType::I64, {add(loop_var(0), int_const(1))});
  const IndexRanges ranges{{int_const(4)}, {}};
  const Expr dropped = simplify(max(sub(check_index(end, int_const(1)), check_index(start, int_const(1))), int_const(0)), ranges);
  EXPECT_FALSE(contains_op(dropped, ExprOp::CheckIndex)) << to_string(dropped);
  const Expr kept = simplify(max(sub(check_value(end, int_const(1), "e"), check_value(start, int_const(1), "s")), int_const(0)), ranges);
  EXPECT_TRUE(contains_op(kept, ExprOp::CheckIndex)) << to_string(kept);
  EXPECT_NE(to_string(kept).find("check_value"), std::string::npos);
  // Rebuilding (as passes do) keeps the kind and the label.
  const Expr rebuilt = rebuild(check_value(start, int_const(1), "s"), {end, int_const(2)});
  EXPECT_TRUE(is_value_check(*rebuilt));
  EXPECT_EQ(rebuilt->symbol, "s");
}

TEST(CheckLabel, CpuExecutorNamesTheOpThroughFusion) {
  GraphFixture f;
  f.b().set_op("embedding", "aten.embedding.default");
  const NodeId table = f.input(DType::F32, {int_const(4), int_const(2)});
  const NodeId index = f.input(DType::I64, {int_const(3)});
  const NodeId gathered = f.b().take(table, 0, index, /*wrap_negative=*/false, "indices");
  f.b().set_op("view", "aten.view.default");  // the check runs in the view's kernel after fusion
  f.output(f.b().reshape(gathered, {int_const(6)}));
  const Host t = Host::of<float>(DType::F32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  const std::string message = failure_of([&] { f.run({t, Host::of<int64_t>(DType::I64, {3}, {2, -1, 0})}); });
  EXPECT_EQ(message, "embedding: index -1 is out of bounds: valid range [0, 4) (indices, aten.embedding.default, node embedding)");
}

TEST(CheckLabel, CudaKernelsKeepLabelsOutOfTheirSource) {
  // Two gathers that differ only in their op: one kernel text, two label lists.
  auto kernel_for = [](const std::string& node_name) {
    GraphFixture f;
    f.b().set_op(node_name, "aten.embedding.default");
    const NodeId table = f.input(DType::F32, {int_const(4), int_const(2)});
    const NodeId index = f.input(DType::I64, {int_const(3)});
    const NodeId out = f.b().take(table, 0, index, false, "indices");
    std::vector<codegen::OperandInfo> operands;
    for (NodeId input : f.graph().node(out).inputs) {
      codegen::OperandInfo info;
      info.dtype = f.graph().node(input).dtype;
      info.shape = f.graph().node(input).shape;
      operands.push_back(info);
    }
    return codegen::generate_kernel(f.graph().node(out), operands);
  };
  const codegen::Kernel a = kernel_for("embedding"), b = kernel_for("embedding_2");
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.source, b.source);
  ASSERT_EQ(a.check_labels.size(), 1u);
  EXPECT_NE(a.check_labels[0].find("node embedding)"), std::string::npos) << a.check_labels[0];
  EXPECT_NE(b.check_labels[0].find("node embedding_2)"), std::string::npos) << b.check_labels[0];
  EXPECT_EQ(a.source.find("embedding"), std::string::npos) << a.source;
  EXPECT_NE(a.source.find("p.check_base + 0"), std::string::npos) << a.source;
  bool has_base = false;
  for (const codegen::KernelParam& p : a.params) has_base = has_base || p.kind == codegen::ParamKind::CheckBase;
  EXPECT_TRUE(has_base);
}
