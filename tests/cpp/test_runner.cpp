// The runner (csrc/runner): its strict .npy reader/writer against hostile and malformed files, the
// Model API on the fixture archives (signature, a run against eager's recorded outputs, and the
// errors for calls that do not fit), and luminal packages built here around a fixture program.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "error_helpers.h"
#include "fixture_helpers.h"
#include "zip_helpers.h"
#include "runner/cuda_device.h"
#include "runner/npy.h"
#include "runner/runner.h"
#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/api.h"
#endif

using namespace luminal;
using luminal::testing::error_of;
using runner::HostTensor;

namespace {

// The header NumPy 2.x writes for np.save of a float32 [2, 3] array (numpy/lib/format.py).
std::string numpy_header(const std::string& dict) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

std::string npy_file(const std::string& dict, size_t data_bytes) {
  return numpy_header(dict) + std::string(data_bytes, '\0');
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] { runner::parse_npy(bytes, "x.npy"); });
}

HostTensor iota(DType dtype, std::vector<int64_t> sizes) {
  HostTensor t(dtype, std::move(sizes), "test");
  for (size_t i = 0; i < t.nbytes(); ++i) t.data()[i] = static_cast<unsigned char>(dtype == DType::Bool ? i % 2 : i * 7);
  return t;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/luminal_runner_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

TEST(Npy, RoundTripsEveryDtypeAndRank) {
  for (const DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16,
                            DType::I8, DType::U8, DType::Bool}) {
    for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{}, {1}, {5}, {2, 3}, {3, 0, 2}, {2, 1, 3, 2}}) {
      const HostTensor original = iota(dtype, sizes);
      const std::string bytes = runner::encode_npy(original);
      EXPECT_EQ((bytes.size() - original.nbytes()) % 64, 0u) << "header padded to 64 bytes";
      const HostTensor back = runner::parse_npy(bytes, "round trip");
      EXPECT_EQ(back.dtype(), dtype);
      EXPECT_EQ(back.sizes(), sizes);
      ASSERT_EQ(back.nbytes(), original.nbytes());
      EXPECT_EQ(std::memcmp(back.data(), original.data(), original.nbytes()), 0) << dtype_name(dtype);
    }
  }
}

TEST(Npy, WritesWhatNumpyWrites) {
  // np.save of np.zeros((2, 3), np.float32) and np.zeros(3, np.bool_), byte for byte.
  EXPECT_EQ(runner::encode_npy(HostTensor(DType::F32, {2, 3}, "t")),
            npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24));
  EXPECT_EQ(runner::encode_npy(HostTensor(DType::Bool, {3}, "t")),
            npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3));
  EXPECT_EQ(runner::encode_npy(HostTensor(DType::I8, {}, "t")),
            npy_file("{'descr': '|i1', 'fortran_order': False, 'shape': (), }", 1));
}

TEST(Npy, ReadsVersionsTwoAndThreeAndAnyKeyOrder) {
  std::string v2 = npy_file("{'shape': (2,), 'fortran_order': False, 'descr': '<i8'}", 16);
  // Version 2.0: a 4-byte header length.
  v2.replace(6, 4, std::string("\x02\x00", 2) + v2.substr(8, 2) + std::string("\x00\x00", 2));
  const HostTensor t = runner::parse_npy(v2, "v2");
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.sizes(), std::vector<int64_t>{2});
}

TEST(Npy, RefusesEveryTruncation) {
  const std::string whole = runner::encode_npy(iota(DType::F32, {2, 3}));
  for (size_t n = 0; n < whole.size(); ++n) {
    const std::string message = parse_error(whole.substr(0, n));
    EXPECT_CONTAINS(message, "x.npy");
  }
  EXPECT_CONTAINS(parse_error(whole.substr(0, whole.size() - 1)), "but the file holds 23 bytes of data");
  EXPECT_CONTAINS(parse_error(whole + "!"), "but the file holds 25 bytes of data");
}

TEST(Npy, RefusesBadHeaders) {
  const auto with = [](const std::string& dict) { return parse_error(npy_file(dict, 4)); };
  EXPECT_CONTAINS(parse_error("PK\x03\x04 a zip, not a .npy file"), "no \\x93NUMPY magic");
  std::string version9 = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
  version9[6] = 9;
  EXPECT_CONTAINS(parse_error(version9), "version 9.0 is not supported");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'shape': (1,), }"), "lacks one of the keys");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}"), "'extra' is not one of");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"), "appears twice");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}"), "write (n,)");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"), "non-negative integer");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}"), "leading zero");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}"), "True or False");
  EXPECT_CONTAINS(with("{\"descr\": '<f4', 'fortran_order': False, 'shape': (1,)}"), "expected '''");
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk"), "text after the closing");
  EXPECT_CONTAINS(with("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}"), "an escape");
  std::string no_newline = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
  no_newline[no_newline.size() - 5] = ' ';
  EXPECT_CONTAINS(parse_error(no_newline), "does not end with a newline");
  std::string long_header = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  long_header[6] = 2;  // version 2.0 reads 4 length bytes: 0xffff + (0x7b << 16)
  EXPECT_CONTAINS(parse_error(long_header), "over the limit of 65536");
  std::string rank65 = "(";
  for (int d = 0; d < 65; ++d) rank65 += "1, ";
  EXPECT_CONTAINS(with("{'descr': '<f4', 'fortran_order': False, 'shape': " + rank65 + ")}"), "more than 64 dimensions");
}

TEST(Npy, RefusesHugeShapesWithoutAllocating) {
  // 2**62 * 4 elements overflow int64; 2**40 float32 elements need 4 TiB: the file holds 4 bytes.
  EXPECT_CONTAINS(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 4)),
                  "x.npy");
  EXPECT_CONTAINS(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", 4)),
                  "4398046511104 bytes of data) but the file holds 4 bytes");
  EXPECT_CONTAINS(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4)),
                  "over 2**63 - 1");
  // A zero size: no elements, whatever the other sizes are.
  const HostTensor empty = runner::parse_npy(
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4611686018427387904), }", 0), "empty");
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Npy, RefusesUnsupportedDtypesAndLayouts) {
  for (const char* descr : {">f4", "<u2", "<u4", "<u8", "|O", "<c8", "<f16", "<V2", "=f4", "<U3", "|b2"}) {
    const std::string message =
        parse_error(npy_file(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }", 4));
    EXPECT_CONTAINS(message, std::string("'") + descr + "' is not supported");
  }
  EXPECT_CONTAINS(parse_error(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)),
                  "Fortran-order");
  std::string bool_two = npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 3);
  bool_two.back() = 2;
  EXPECT_CONTAINS(parse_error(bool_two), "bool element 2 holds the byte 2");
}

// Random byte flips, insertions and cuts of valid files: every result parses or raises
// luminal::Error (under ASan in make test-sanitize: no out-of-bounds read either).
TEST(Npy, SurvivesMutatedFiles) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::vector<std::string> seeds = {runner::encode_npy(iota(DType::F32, {2, 3})),
                                          runner::encode_npy(iota(DType::Bool, {5})),
                                          runner::encode_npy(iota(DType::BF16, {}))};
  size_t parsed = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = seeds[next() % seeds.size()];
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t at = next() % bytes.size();
      switch (next() % 4) {
        case 0: bytes[at] = static_cast<char>(next()); break;
        case 1: bytes.insert(at, 1, "0123456789(),' {}:"[next() % 18]); break;
        case 2: bytes.erase(at, 1 + next() % 8); break;
        default: bytes.resize(at); break;
      }
    }
    try {
      const HostTensor t = runner::parse_npy(bytes, "mutated");
      EXPECT_EQ(t.nbytes(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
      EXPECT_LE(t.nbytes(), bytes.size());
      ++parsed;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(refused, 0u);
}

TEST(Npy, ReadsAndWritesFiles) {
  const std::string path = temp_path("io.npy");
  const HostTensor original = iota(DType::I32, {4, 2});
  runner::write_npy(path, original);
  const HostTensor back = runner::read_npy(path);
  EXPECT_EQ(back.sizes(), original.sizes());
  EXPECT_EQ(std::memcmp(back.data(), original.data(), original.nbytes()), 0);
  EXPECT_CONTAINS(error_of([&] { runner::read_npy(path, 16); }), "over the limit of 16");
  std::remove(path.c_str());
  EXPECT_CONTAINS(error_of([&] { runner::read_npy(path); }), "cannot open");
  EXPECT_CONTAINS(error_of([&] { runner::read_npy(::testing::TempDir()); }), "not a regular file");
}

namespace {

using luminal::testing::fixture;
using luminal::testing::read_json;

HostTensor f32_tensor(const nlohmann::json& record) {
  HostTensor t(DType::F32, record.at("sizes").get<std::vector<int64_t>>(), "record");
  const auto values = record.at("values").get<std::vector<float>>();
  EXPECT_EQ(values.size(), static_cast<size_t>(t.numel()));
  std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

}  // namespace

TEST(RunnerModel, DescribesAndRunsTheMlpFixture) {
  const auto model = runner::Model::load(fixture("mlp.pt2"));
  ASSERT_EQ(model.inputs().size(), 1u);
  EXPECT_EQ(model.inputs()[0].dtype, DType::F32);
  ASSERT_EQ(model.outputs().size(), 1u);
  EXPECT_CONTAINS(model.signature_text(), "input 0 ");
  EXPECT_CONTAINS(model.signature_text(), "output 0 ");

  const nlohmann::json expected = read_json(fixture("mlp.expected.json"));
  for (const auto& run : expected.at("runs")) {
    HostTensor input = f32_tensor(run.at("inputs").at(0));
    const HostTensor want = f32_tensor(run.at("outputs").at(0));
    const std::vector<HostTensor> got = model.run({input.view()});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].sizes(), want.sizes());
    ASSERT_EQ(got[0].dtype(), DType::F32);
    const auto* g = reinterpret_cast<const float*>(got[0].data());
    const auto* w = reinterpret_cast<const float*>(want.data());
    for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5 + 1e-5 * std::fabs(w[i])) << i;
  }
}

TEST(RunnerModel, RefusesCallsThatDoNotFit) {
  const auto model = runner::Model::load(fixture("mlp.pt2"));
  HostTensor good(DType::F32, {2, 4}, "x");
  HostTensor wrong_dtype(DType::F64, {2, 4}, "x");
  HostTensor wrong_shape(DType::F32, {2, 5}, "x");
  EXPECT_CONTAINS(error_of([&] { model.run({}); }), "expected 1 tensor inputs, got 0");
  EXPECT_CONTAINS(error_of([&] { model.run({good.view(), good.view()}); }), "expected 1 tensor inputs, got 2");
  EXPECT_CONTAINS(error_of([&] { model.run({wrong_dtype.view()}); }), "must be float32");
  EXPECT_CONTAINS(error_of([&] { model.run({wrong_shape.view()}); }), "input #0");
  runtime::TensorView on_cuda = good.view();
  on_cuda.device.type = runtime::DeviceType::CUDA;
  EXPECT_CONTAINS(error_of([&] { model.run({on_cuda}); }), "takes host memory");
  runtime::TensorView no_data = good.view();
  no_data.data = nullptr;
  EXPECT_CONTAINS(error_of([&] { model.run({no_data}); }), "no data pointer");
  EXPECT_CONTAINS(error_of([&] { runner::Model::load(fixture("missing.pt2")); }), "missing.pt2");
  EXPECT_CONTAINS(error_of([&] { model.run_on_device({good.view()}, {good.view()}, nullptr); }),
                  "this model runs on the CPU");
}

TEST(RunnerModel, ListsShapeSymbols) {
  const auto model = runner::Model::load(fixture("dynamic.pt2"));
  ASSERT_FALSE(model.symbols().empty());
  EXPECT_CONTAINS(model.signature_text(), "symbol " + model.symbols()[0].name + ": ");
  EXPECT_NE(model.inputs()[0].shape[0].find_first_not_of("0123456789"), std::string::npos)
      << "the first dimension is symbolic: " << model.inputs()[0].shape[0];
}

TEST(RunnerModel, TakesStridedInputsAsTheyAre) {
  const auto model = runner::Model::load(fixture("mlp.pt2"));
  HostTensor dense(DType::F32, {2, 4}, "x");
  HostTensor transposed(DType::F32, {4, 2}, "storage");  // x^T in memory: x viewed with strides [1, 2]
  auto* values = reinterpret_cast<float*>(dense.data());
  auto* storage = reinterpret_cast<float*>(transposed.data());
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      values[i * 4 + j] = 0.37f * static_cast<float>(i * 4 + j) - 1.1f;
      storage[j * 2 + i] = values[i * 4 + j];
    }
  }
  runtime::TensorView strided = transposed.view();
  strided.sizes = {2, 4};
  strided.strides = {1, 2};
  const HostTensor from_dense = model.run({dense.view()}).at(0);
  const HostTensor from_strided = model.run({strided}).at(0);
  ASSERT_EQ(from_dense.nbytes(), from_strided.nbytes());
  EXPECT_EQ(std::memcmp(from_dense.data(), from_strided.data(), from_dense.nbytes()), 0);
}

TEST(RunnerModel, WritesInputsUpdatedInPlaceBack) {
  const auto model = runner::Model::load(fixture("inplace.pt2"));
  ASSERT_EQ(model.inputs().size(), 2u);
  ASSERT_EQ(model.updated_inputs(), std::vector<size_t>{0});
  EXPECT_CONTAINS(model.signature_text(), "updates input 0 x in place");
  HostTensor x(DType::F32, {2, 3}, "x"), y(DType::F32, {2, 3}, "y");
  auto* xs = reinterpret_cast<float*>(x.data());
  auto* ys = reinterpret_cast<float*>(y.data());
  for (int i = 0; i < 6; ++i) {
    xs[i] = 0.5f * static_cast<float>(i) - 1.25f;
    ys[i] = 2.0f - 0.75f * static_cast<float>(i);
  }
  std::vector<float> sum(6);
  for (int i = 0; i < 6; ++i) sum[i] = xs[i] + ys[i];
  const std::vector<HostTensor> outputs = model.run({x.view(), y.view()});
  ASSERT_EQ(outputs.size(), 1u) << "the new value of x is no user output";
  const auto* doubled = reinterpret_cast<const float*>(outputs[0].data());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(xs[i], sum[i]) << "x was updated in place, element " << i;
    EXPECT_EQ(doubled[i], 2 * sum[i]) << i;
  }

  // x aliasing y: eager would see the update through y; the runner refuses.
  EXPECT_CONTAINS(error_of([&] { model.run({x.view(), x.view()}); }), "shares memory with input #1");
  // A strided x cannot be written back as one block.
  HostTensor wide(DType::F32, {3, 2}, "storage");
  runtime::TensorView strided = wide.view();
  strided.sizes = {2, 3};
  strided.strides = {1, 2};
  EXPECT_CONTAINS(error_of([&] { model.run({strided, y.view()}); }), "must be contiguous");
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A luminal package (python/luminal/aot.py, format 2) around inplace.pt2 (x.add_(y); return x * 2)
// whose first input x is a buffer of the package, holding `x`: the caller passes y alone.
struct PackageParts {
  nlohmann::json meta;
  nlohmann::json state;
  std::string x_bytes;
};

PackageParts inplace_package_parts(const std::vector<float>& x) {
  const nlohmann::json spec = {{"name", "buffer 'x'"}, {"dtype", "torch.float32"}, {"shape", {2, 3}}, {"device", "cpu"}};
  PackageParts parts;
  parts.meta = {{"format", "luminal-module 2"},
                {"state_names", {"x"}},
                {"state_roles", {"buffer"}},
                {"state_specs", {spec}},
                {"input_specs", {{{"name", "argument [0]"}, {"dtype", "torch.float32"}, {"shape", {2, 3}}, {"device", "cpu"}}}},
                {"options", {{"strict", true}, {"megakernel", true}, {"min_partition_size", 1}}},
                {"cache_entries", nlohmann::json::array()}};
  parts.state = {{"format", "luminal-state 1"},
                 {"tensors",
                  {{{"name", "x"}, {"dtype", "float32"}, {"sizes", {2, 3}}, {"strides", {3, 1}}, {"entry", "state/0.bin"},
                    {"nbytes", 24}}}}};
  parts.x_bytes.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
  return parts;
}

std::string write_package(const PackageParts& parts, const std::string& name) {
  const std::string bytes = luminal::testing::make_zip({{"luminal_module/format", "luminal-module 2", false},
                                               {"luminal_module/meta.json", parts.meta.dump(), false},
                                               {"luminal_module/program.pt2", file_bytes(fixture("inplace.pt2")), false},
                                               {"luminal_module/state.json", parts.state.dump(), false},
                                               {"luminal_module/state/0.bin", parts.x_bytes, false}});
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST(RunnerPackage, BindsItsStateAndKeepsBufferUpdates) {
  const std::vector<float> x = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 1.0f};
  const std::string path = write_package(inplace_package_parts(x), "inplace.luminal");
  const auto model = runner::Model::load(path);
  std::remove(path.c_str());
  EXPECT_TRUE(model.is_package());
  ASSERT_EQ(model.inputs().size(), 1u) << "the buffer is the package's, not the caller's";
  EXPECT_EQ(model.inputs()[0].name, "argument [0]");
  EXPECT_TRUE(model.updated_inputs().empty());
  HostTensor y(DType::F32, {2, 3}, "y");
  auto* ys = reinterpret_cast<float*>(y.data());
  for (int i = 0; i < 6; ++i) ys[i] = 0.25f * static_cast<float>(i) - 0.5f;
  // Each call adds y to the buffer, as the module's own buffer would be updated.
  for (int call = 1; call <= 2; ++call) {
    const std::vector<HostTensor> outputs = model.run({y.view()});
    ASSERT_EQ(outputs.size(), 1u);
    const auto* got = reinterpret_cast<const float*>(outputs[0].data());
    for (int i = 0; i < 6; ++i) {
      float expected = x[i];
      for (int k = 0; k < call; ++k) expected += ys[i];
      EXPECT_EQ(got[i], 2 * expected) << "call " << call << ", element " << i;
    }
  }
  HostTensor wrong(DType::F64, {2, 3}, "y");
  EXPECT_CONTAINS(error_of([&] { model.run({wrong.view()}); }), "input #0 'argument [0]' must be float32");
}

TEST(RunnerPackage, RefusesPackagesWhosePartsDisagree) {
  const std::vector<float> x(6, 1.0f);
  const auto refusal = [&](const std::string& name, const auto& change) {
    PackageParts parts = inplace_package_parts(x);
    change(parts);
    const std::string path = write_package(parts, name);
    std::string error = error_of([&] { runner::Model::load(path); });
    std::remove(path.c_str());
    return error;
  };
  EXPECT_CONTAINS(refusal("old.luminal", [](PackageParts& p) { p.meta["format"] = "luminal-module 1"; }),
                  "load it with luminal.load and save it again");
  EXPECT_CONTAINS(refusal("future.luminal", [](PackageParts& p) { p.meta["format"] = "luminal-module 9"; }),
                  "package format 'luminal-module 9'");
  EXPECT_CONTAINS(refusal("short.luminal", [](PackageParts& p) { p.x_bytes.resize(20); }),
                  "needs 24 bytes, its entry holds 20");
  EXPECT_CONTAINS(refusal("strides.luminal", [](PackageParts& p) { p.state["tensors"][0]["strides"] = {4, 1}; }),
                  "needs 28 bytes, its entry holds 24");
  EXPECT_CONTAINS(refusal("dtype.luminal", [](PackageParts& p) { p.state["tensors"][0]["dtype"] = "int32"; }),
                  "does not match its spec torch.float32");
  EXPECT_CONTAINS(refusal("complex.luminal", [](PackageParts& p) { p.state["tensors"][0]["dtype"] = "complex32"; }),
                  "unsupported dtype 'complex32'");
  EXPECT_CONTAINS(refusal("name.luminal", [](PackageParts& p) { p.state["tensors"][0]["name"] = "z"; }),
                  "holds 'z' where meta.json names 'x'");
  EXPECT_CONTAINS(refusal("entry.luminal", [](PackageParts& p) { p.state["tensors"][0]["entry"] = "../program.pt2"; }),
                  "names the entry '../program.pt2'");
  EXPECT_CONTAINS(refusal("role.luminal", [](PackageParts& p) { p.meta["state_roles"] = {"weight"}; }),
                  "unknown state role 'weight'");
  EXPECT_CONTAINS(refusal("count.luminal", [](PackageParts& p) { p.meta["state_roles"] = nlohmann::json::array(); }),
                  "1 state names, 0 roles");
  EXPECT_CONTAINS(refusal("negative.luminal", [](PackageParts& p) { p.state["tensors"][0]["sizes"] = {-2, 3}; }),
                  "expected non-negative integers");
  EXPECT_CONTAINS(refusal("cache.luminal", [](PackageParts& p) { p.meta["cache_entries"] = {"a/../../x"}; }),
                  "outside the cache");
  EXPECT_CONTAINS(refusal("text.luminal", [](PackageParts& p) { p.meta["state_names"] = "x"; }),
                  "the field 'state_names' is a string");
  // Long hostile strings are checked without recursion (no std::regex).
  EXPECT_CONTAINS(refusal("long_entry.luminal",
                          [](PackageParts& p) { p.state["tensors"][0]["entry"] = "state/" + std::string(200000, '7') + ".bin"; }),
                  "names the entry 'state/777");
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "a/";
  EXPECT_CONTAINS(refusal("long_cache.luminal", [&](PackageParts& p) { p.meta["cache_entries"] = {deep + "b"}; }),
                  "outside the cache");
}

namespace {

bool cuda_device_present() {
#if LUMINAL_HAVE_CUDA
  return cuda::device_available();
#else
  return false;
#endif
}

runner::LoadOptions on_cuda() {
  runner::LoadOptions options;
  options.device = {runtime::DeviceType::CUDA, 0};
  return options;
}

HostTensor ramp(std::vector<int64_t> sizes, float scale, float offset) {
  HostTensor t(DType::F32, std::move(sizes), "ramp");
  auto* values = reinterpret_cast<float*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) values[i] = scale * static_cast<float>(i) + offset;
  return t;
}

runtime::TensorView on_device(const HostTensor& host, const runner::DeviceMemory& memory) {
  runtime::TensorView view = const_cast<HostTensor&>(host).view();
  view.data = memory.get();
  view.device = {runtime::DeviceType::CUDA, 0};
  return view;
}

}  // namespace

// On a machine with a GPU: the host path and the device-pointer path give the same bits, and a
// package's buffer on the device is updated by both. Without one: loading for CUDA says so.
TEST(RunnerCuda, DevicePointersAndHostMemoryGiveTheSameBits) {
  if (!cuda_device_present()) {
    EXPECT_CONTAINS(error_of([] { runner::Model::load(fixture("mlp.pt2"), on_cuda()); }), "no CUDA device");
    return;
  }
  const auto model = runner::Model::load(fixture("mlp.pt2"), on_cuda());
  EXPECT_EQ(runtime::device_name(model.device()), "cuda:0");
  HostTensor x = ramp({2, 4}, 0.37f, -1.1f);
  const std::vector<HostTensor> host = model.run({x.view()});
  ASSERT_EQ(host.size(), 1u);
  const std::vector<std::vector<int64_t>> shapes = model.output_shapes({x.view()});
  ASSERT_EQ(shapes, std::vector<std::vector<int64_t>>{host[0].sizes()});

  const runner::CudaDevice device(0);
  const runner::DeviceMemory x_memory = device.allocate(x.nbytes());
  const runner::DeviceMemory out_memory = device.allocate(host[0].nbytes());
  device.copy_to_device(x_memory.get(), x.data(), x.nbytes(), nullptr);
  HostTensor out(DType::F32, shapes[0], "out");
  const auto integers = model.run_on_device({on_device(x, x_memory)}, {on_device(out, out_memory)}, nullptr);
  ASSERT_EQ(integers.size(), 1u);
  EXPECT_FALSE(integers[0].has_value());
  model.synchronize();
  device.copy_to_host(out.data(), out_memory.get(), out.nbytes(), nullptr);
  device.synchronize(nullptr);
  EXPECT_EQ(std::memcmp(out.data(), host[0].data(), out.nbytes()), 0) << "device pointers vs host memory";
  EXPECT_CONTAINS(error_of([&] { model.run_on_device({x.view()}, {on_device(out, out_memory)}, nullptr); }),
                  "must be device memory on cuda:0");
  HostTensor wrong(DType::F32, {2, 2}, "wrong");
  EXPECT_CONTAINS(error_of([&] { model.run_on_device({on_device(x, x_memory)}, {on_device(wrong, out_memory)}, nullptr); }),
                  "output #0 must be dense device memory");

  // A package whose buffer x the program updates in place: once through host memory, once through
  // device pointers; the second output sees both updates.
  const std::vector<float> start = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 1.0f};
  const std::string path = write_package(inplace_package_parts(start), "inplace_cuda.luminal");
  const auto package = runner::Model::load(path, on_cuda());
  std::remove(path.c_str());
  HostTensor y = ramp({2, 3}, 0.25f, -0.5f);
  package.run({y.view()});
  const runner::DeviceMemory y_memory = device.allocate(y.nbytes());
  const runner::DeviceMemory doubled_memory = device.allocate(y.nbytes());
  device.copy_to_device(y_memory.get(), y.data(), y.nbytes(), nullptr);
  HostTensor doubled(DType::F32, {2, 3}, "doubled");
  package.run_on_device({on_device(y, y_memory)}, {on_device(doubled, doubled_memory)}, nullptr);
  package.synchronize();
  device.copy_to_host(doubled.data(), doubled_memory.get(), doubled.nbytes(), nullptr);
  device.synchronize(nullptr);
  const auto* ys = reinterpret_cast<const float*>(y.data());
  const auto* got = reinterpret_cast<const float*>(doubled.data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], 2 * ((start[i] + ys[i]) + ys[i])) << i;
}
