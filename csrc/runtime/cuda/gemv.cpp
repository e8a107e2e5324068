#include "runtime/cuda/gemv.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "common/cache_files.h"
#include "common/error.h"
#include "runtime/cuda/standalone_kernel.h"

namespace luminal::cuda {

namespace {

// The largest grid y extent (batch entries are blockIdx.y).
constexpr int64_t kMaxGridY = 65535;

// One kernel per (module source, entry point) for the whole process: launches captured into CUDA
// graphs keep referring to its loaded module, so it is never unloaded before exit.
StandaloneKernel* registered_kernel(const std::string& source, const std::string& name) {
  static std::mutex mutex;
  static std::map<std::pair<uint64_t, std::string>, std::unique_ptr<StandaloneKernel>> kernels;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<StandaloneKernel>& kernel = kernels[{fnv1a64(source), name}];
  if (!kernel) kernel = std::make_unique<StandaloneKernel>(source, name);
  return kernel.get();
}

bool aligned16(const void* pointer) { return (reinterpret_cast<uintptr_t>(pointer) & 15u) == 0; }

// A stride in elements that keeps 16-byte alignment from row to row (or is never taken).
bool keeps_alignment(int64_t stride, int64_t size_in_elements, int64_t element_bytes) {
  return size_in_elements <= 1 || (stride * element_bytes) % 16 == 0;
}

}  // namespace

bool generated_gemv_applies(const MatmulShape& shape) {
  return codegen::gemv_supported(shape.dtype, shape.m) && shape.batch >= 1 && shape.batch <= kMaxGridY &&
         shape.n >= 1 && shape.k >= 0;
}

bool gemv_vectorizable(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b) {
  const int64_t bytes = static_cast<int64_t>(dtype_size(shape.dtype));
  const int64_t width = codegen::gemv_vector_width(shape.dtype);
  return shape.k % width == 0 && (a.col_stride == 1 || shape.k <= 1) && (b.row_stride == 1 || shape.k <= 1) &&
         aligned16(a.data) && aligned16(b.data) && keeps_alignment(a.row_stride, shape.m, bytes) &&
         keeps_alignment(b.col_stride, shape.n, bytes) && keeps_alignment(a.batch_stride, shape.batch, bytes) &&
         keeps_alignment(b.batch_stride, shape.batch, bytes);
}

GeneratedGemv::GeneratedGemv(const MatmulShape& shape, const MatrixOperand& a, const MatrixOperand& b,
                             const MatmulEpilogue& epilogue)
    : shape_(shape), a_(a), b_(b), epilogue_(epilogue) {
  LUMINAL_CHECK(generated_gemv_applies(shape), "internal error: the generated GEMV does not take ",
                dtype_name(shape.dtype), " [", shape.batch, ", ", shape.m, ", ", shape.k, "] @ [", shape.k, ", ",
                shape.n, "]");
  vector_ = gemv_vectorizable(shape, a, b);
  configs_ = codegen::gemv_configs(shape.m);
  source_ = codegen::gemv_module_source(shape.dtype, shape.m);
  for (const codegen::GemvConfig& config : configs_) {
    kernels_.push_back(registered_kernel(source_, config.kernel_name()));
  }
}

GeneratedGemv::~GeneratedGemv() = default;

std::string GeneratedGemv::source_key() const {
  return str_cat(std::hex, fnv1a64(source_), std::dec, vector_ ? " (vector loads)" : " (strided loads)");
}

int GeneratedGemv::find(const std::string& name) const {
  for (size_t i = 0; i < configs_.size(); ++i) {
    if (configs_[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

size_t GeneratedGemv::rule_choice() const {
  const bool few_outputs = shape_.n * shape_.batch < 4096;
  const codegen::GemvConfig wanted = few_outputs ? codegen::GemvConfig{1, 4, 1, 4}
                                     : shape_.m >= 4 ? codegen::GemvConfig{2, 1, 4, 4}
                                                     : codegen::GemvConfig{1, 1, 4, 4};
  for (size_t i = 0; i < configs_.size(); ++i) {
    if (configs_[i] == wanted) return i;
  }
  return 0;
}

GeneratedGemv::Launch GeneratedGemv::launch_of(size_t index, void* out, bool early_weights) const {
  const codegen::GemvConfig& config = configs_.at(index);
  Launch launch;
  const int64_t blocks = (shape_.n + config.outputs_per_block() - 1) / config.outputs_per_block();
  LUMINAL_CHECK(blocks <= 0x7fffffff, "generated GEMV: ", shape_.n, " outputs are too many for one launch");
  launch.shape.grid[0] = static_cast<unsigned>(blocks);
  launch.shape.grid[1] = static_cast<unsigned>(shape_.batch);
  launch.shape.block[0] = static_cast<unsigned>(config.threads());
  const int64_t activation = !epilogue_.bias ? 0 : epilogue_.relu ? 1 : epilogue_.gelu_tanh ? 2 : 0;
  launch.arguments = {
      KernelArgument::pointer(a_.data),          KernelArgument::pointer(b_.data),
      KernelArgument::pointer(epilogue_.bias),   KernelArgument::pointer(out),
      KernelArgument::int64(shape_.n),           KernelArgument::int64(shape_.k),
      KernelArgument::int64(a_.batch_stride),    KernelArgument::int64(a_.row_stride),
      KernelArgument::int64(a_.col_stride),      KernelArgument::int64(b_.batch_stride),
      KernelArgument::int64(b_.row_stride),      KernelArgument::int64(b_.col_stride),
      KernelArgument::int64(activation),         KernelArgument::int64(vector_ ? 1 : 0),
      KernelArgument::int64(early_weights ? 1 : 0)};
  LUMINAL_CU(driver().cuCtxGetDevice(&launch.device));
  return launch;
}

void GeneratedGemv::run(size_t index, void* out, CUstream stream) const {
  const Launch launch = launch_of(index, out, /*early_weights=*/false);
  kernels_.at(index)->launch(static_cast<int>(launch.device), launch.shape, stream, launch.arguments);
}

StandaloneKernel& GeneratedGemv::group_kernel(size_t index) const {
  return *registered_kernel(source_, configs_.at(index).group_kernel_name());
}

StandaloneKernel& GeneratedGemv::pair_kernel(size_t index) const {
  LUMINAL_CHECK(codegen::pair_supported(configs_.at(index), shape_.m), "internal error: no paired GEMV for ",
                configs_.at(index).name(), " with ", shape_.m, " rows");
  return *registered_kernel(source_, configs_.at(index).pair_kernel_name());
}

CUDA_KERNEL_NODE_PARAMS GeneratedGemv::node_params(size_t index, void* out, bool early_weights,
                                                   KernelArgumentSlots& slots) const {
  const Launch launch = launch_of(index, out, early_weights);
  return kernels_.at(index)->node_params(static_cast<int>(launch.device), launch.shape, launch.arguments, slots);
}

namespace {

// The bytes [begin, end) an operand of `rows` x `cols` elements spans (rows and columns by stride).
struct Span {
  uintptr_t begin = 0, end = 0;
  bool overlaps(const Span& other) const { return begin < other.end && other.begin < end; }
};

Span span_of(const void* data, int64_t rows, int64_t row_stride, int64_t cols, int64_t col_stride, size_t element) {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const int64_t last = (rows - 1) * row_stride + (cols - 1) * col_stride;
  return {begin, begin + static_cast<uintptr_t>(last + 1) * element};
}

Span output_span(const GemvGroupMember& member) {
  const MatmulShape& shape = member.gemv->shape();
  return span_of(member.out, shape.m, shape.n, shape.n, 1, dtype_size(shape.dtype));
}

}  // namespace

bool gemv_groupable(const std::vector<GemvGroupMember>& group, const GemvGroupMember& other) {
  LUMINAL_CHECK(!group.empty(), "internal error: a GEMV joins an empty group");
  const GeneratedGemv& f = *group.front().gemv;
  const GeneratedGemv& o = *other.gemv;
  const MatmulShape &fs = f.shape(), &os = o.shape();
  const bool same_problem = fs.dtype == os.dtype && fs.m == os.m && fs.k == os.k && fs.batch == 1 && os.batch == 1;
  const bool same_a = f.a().data == o.a().data && f.a().row_stride == o.a().row_stride &&
                      f.a().col_stride == o.a().col_stride;
  if (!same_problem || !same_a || !f.vectorized() || !o.vectorized() || f.has_epilogue() || o.has_epilogue() ||
      fs.n < 1 || os.n < 1 || fs.k < 1) {
    return false;
  }
  const Span a = span_of(f.a().data, fs.m, f.a().row_stride, fs.k, 1, dtype_size(fs.dtype));
  const Span out = output_span(other);
  return !out.overlaps(a) && std::none_of(group.begin(), group.end(), [&](const GemvGroupMember& member) {
    return out.overlaps(output_span(member));
  });
}

CUDA_KERNEL_NODE_PARAMS grouped_gemv_node(const std::vector<GemvGroupMember>& members, bool early_weights,
                                          KernelArgumentSlots& slots) {
  LUMINAL_CHECK(members.size() >= 2 && members.size() <= static_cast<size_t>(codegen::kGemvMaxGroup),
                "internal error: a grouped GEMV of ", members.size(), " products");
  for (size_t i = 1; i < members.size(); ++i) {
    const std::vector<GemvGroupMember> before(members.begin(), members.begin() + static_cast<ptrdiff_t>(i));
    LUMINAL_CHECK(gemv_groupable(before, members[i]), "internal error: GEMV ", i, " cannot join the group");
  }
  const GemvGroupMember* widest = &members[0];
  for (const GemvGroupMember& member : members) {
    if (member.gemv->shape().n > widest->gemv->shape().n) widest = &member;
  }
  const GeneratedGemv& leader = *widest->gemv;
  const codegen::GemvConfig& config = leader.configs().at(widest->config);
  const GeneratedGemv& first = *members[0].gemv;
  std::vector<KernelArgument> arguments = {KernelArgument::pointer(first.a().data),
                                           KernelArgument::int64(first.shape().k),
                                           KernelArgument::int64(first.a().row_stride),
                                           KernelArgument::int64(early_weights ? 1 : 0)};
  int64_t blocks = 0;
  for (int64_t i = 0; i < codegen::kGemvMaxGroup; ++i) {
    const bool present = i < static_cast<int64_t>(members.size());
    const GemvGroupMember* member = present ? &members[static_cast<size_t>(i)] : nullptr;
    const int64_t n = present ? member->gemv->shape().n : 0;
    const int64_t member_blocks = (n + config.outputs_per_block() - 1) / config.outputs_per_block();
    blocks += member_blocks;
    arguments.push_back(KernelArgument::pointer(present ? member->gemv->b().data : nullptr));
    arguments.push_back(KernelArgument::pointer(present ? member->out : nullptr));
    arguments.push_back(KernelArgument::int64(n));
    arguments.push_back(KernelArgument::int64(present ? member->gemv->b().col_stride : 0));
    arguments.push_back(KernelArgument::int64(member_blocks));
  }
  LUMINAL_CHECK(blocks <= 0x7fffffff, "generated GEMV: ", blocks, " blocks are too many for one launch");
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(blocks);
  shape.block[0] = static_cast<unsigned>(config.threads());
  CUdevice device = 0;
  LUMINAL_CU(driver().cuCtxGetDevice(&device));
  return leader.group_kernel(widest->config).node_params(static_cast<int>(device), shape, arguments, slots);
}

std::optional<CUDA_KERNEL_NODE_PARAMS> paired_swiglu_node(const GemvGroupMember& gate, const GemvGroupMember& up,
                                                          void* out, bool early_weights, KernelArgumentSlots& slots) {
  const GeneratedGemv& g = *gate.gemv;
  const GeneratedGemv& u = *up.gemv;
  const bool same_weights = g.shape().n == u.shape().n && g.b().col_stride == u.b().col_stride &&
                            g.b().row_stride == 1 && u.b().row_stride == 1;
  const codegen::GemvConfig& config = g.configs().at(gate.config);
  if (!gemv_groupable({gate}, up) || !same_weights || !codegen::pair_supported(config, g.shape().m)) return {};
  GemvGroupMember stored = gate;  // the values' output must overlap neither a nor the products' inputs
  stored.out = out;
  if (!gemv_groupable({up}, stored)) return {};
  const int64_t blocks = (g.shape().n + config.outputs_per_block() - 1) / config.outputs_per_block();
  LUMINAL_CHECK(blocks <= 0x7fffffff, "generated GEMV: ", g.shape().n, " outputs are too many for one launch");
  LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(blocks);
  shape.block[0] = static_cast<unsigned>(config.threads());
  const std::vector<KernelArgument> arguments = {
      KernelArgument::pointer(g.a().data),      KernelArgument::pointer(g.b().data),
      KernelArgument::pointer(u.b().data),      KernelArgument::pointer(out),
      KernelArgument::int64(g.shape().n),       KernelArgument::int64(g.shape().k),
      KernelArgument::int64(g.a().row_stride),  KernelArgument::int64(g.b().col_stride),
      KernelArgument::int64(early_weights ? 1 : 0)};
  CUdevice device = 0;
  LUMINAL_CU(driver().cuCtxGetDevice(&device));
  return g.pair_kernel(gate.config).node_params(static_cast<int>(device), shape, arguments, slots);
}

}  // namespace luminal::cuda
