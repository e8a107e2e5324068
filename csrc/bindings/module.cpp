// luminal._C: glue between torch tensors and the torch-free core. Converts tensors to views,
// allocates outputs with torch's allocator, writes in-place mutations back, maps errors.
#include <torch/extension.h>

#include <pybind11/stl.h>

#include <limits>

#include "common/env.h"
#include "common/error.h"
#include "frontend/translate.h"
#include "runtime/compiled.h"

namespace py = pybind11;
using namespace luminal;

namespace {

DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBool: return DType::Bool;
    case at::kByte: return DType::U8;
    case at::kChar: return DType::I8;
    case at::kShort: return DType::I16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    default: fail("tensors of dtype ", c10::toString(type), " are not supported");
  }
}

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return at::kBool;
    case DType::U8: return at::kByte;
    case DType::I8: return at::kChar;
    case DType::I16: return at::kShort;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
  }
  fail("invalid dtype");
}

runtime::TensorView to_view(const at::Tensor& t, size_t position) {
  LUMINAL_CHECK(t.defined(), "input #", position, " is an undefined tensor");
  LUMINAL_CHECK(t.layout() == at::kStrided, "input #", position, " is not a strided tensor");
  runtime::TensorView view;
  view.data = t.data_ptr();
  view.dtype = to_dtype(t.scalar_type());
  view.sizes = t.sizes().vec();
  view.strides = t.strides().vec();
  if (t.is_cuda()) {
    view.device = runtime::Device{runtime::DeviceType::CUDA, t.get_device()};
  } else {
    LUMINAL_CHECK(t.is_cpu(), "input #", position, " is on unsupported device ", t.device().str());
  }
  return view;
}

void poison(at::Tensor& t) {
  if (at::isFloatingType(t.scalar_type())) {
    t.fill_(std::numeric_limits<double>::quiet_NaN());
  } else if (t.scalar_type() == at::kBool) {
    t.view(at::kByte).fill_(0x5A);  // not a valid bool: reads as true, and never as what eager wrote
  } else {
    t.fill_(-1);
  }
}

runtime::CompileOptions compile_options(const std::vector<std::string>& roles) {
  runtime::CompileOptions options;
  for (const std::string& role : roles) {
    if (role == "parameter") {
      options.input_roles.push_back(ir::InputRole::Parameter);
    } else if (role == "buffer") {
      options.input_roles.push_back(ir::InputRole::Buffer);
    } else if (role == "user") {
      options.input_roles.push_back(ir::InputRole::User);
    } else {
      fail("unknown input role '", role, "' (expected user, parameter or buffer)");
    }
  }
  return options;
}

class PyCompiledGraph {
 public:
  explicit PyCompiledGraph(std::shared_ptr<runtime::CompiledGraph> core) : core_(std::move(core)) {}

  // Runs the graph; returns the user outputs (tensors and ints) in order. Mutated inputs are
  // updated in place.
  py::list run(const std::vector<at::Tensor>& inputs) const {
    std::vector<runtime::TensorView> views;
    views.reserve(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) views.push_back(to_view(inputs[k], k));
    const runtime::SymbolValues symbols = core_->bind(views);

    const auto& infos = core_->outputs();
    std::vector<at::Tensor> tensors(infos.size());
    std::vector<runtime::TensorView> out_views(infos.size());
    const at::Device device = inputs.empty() ? at::Device(at::kCPU) : inputs.front().device();
    for (size_t k = 0; k < infos.size(); ++k) {
      if (!infos[k].is_tensor) continue;
      tensors[k] = at::empty(core_->output_shape(k, symbols),
                             at::TensorOptions().dtype(to_scalar_type(infos[k].dtype)).device(device));
      if (poison_enabled()) poison(tensors[k]);
      out_views[k] = to_view(tensors[k], k);
    }
    {
      py::gil_scoped_release no_gil;
      core_->run(views, out_views, symbols);
    }
    py::list results;
    for (size_t k = 0; k < infos.size(); ++k) {
      if (infos[k].mutated_input >= 0) {
        at::Tensor target = inputs.at(infos[k].mutated_input);
        target.copy_(tensors[k]);
        continue;
      }
      if (infos[k].is_tensor) {
        results.append(tensors[k]);
      } else {
        results.append(py::int_(core_->int_output(k, symbols)));
      }
    }
    return results;
  }

  std::string ir(bool optimized) const { return core_->ir_text(optimized); }

  py::dict stats() const {
    const runtime::Stats s = core_->stats();
    py::dict d;
    d["ir_nodes"] = s.ir_nodes;
    d["kernels"] = s.kernels;
    d["matmuls"] = s.matmuls;
    d["inputs"] = s.inputs;
    d["constants"] = s.constants;
    d["engine"] = "cpu";
    return d;
  }

  std::vector<std::string> input_names() const {
    std::vector<std::string> names;
    for (size_t k = 0; k < core_->num_inputs(); ++k) names.push_back(core_->input(k).name);
    return names;
  }

  size_t num_user_outputs() const {
    size_t n = 0;
    for (const auto& info : core_->outputs()) n += info.mutated_input < 0;
    return n;
  }

 private:
  std::shared_ptr<runtime::CompiledGraph> core_;
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "luminal core: PT2 archives compiled to a CPU (and later CUDA) program";

  py::register_exception<Error>(m, "LuminalError", PyExc_RuntimeError);

  py::class_<PyCompiledGraph>(m, "CompiledGraph")
      .def("run", &PyCompiledGraph::run, py::arg("inputs"),
           "Runs the graph on the given tensors; returns the user outputs, writes mutated inputs back.")
      .def("ir", &PyCompiledGraph::ir, py::arg("optimized") = true, "The IR as text.")
      .def("stats", &PyCompiledGraph::stats)
      .def_property_readonly("input_names", &PyCompiledGraph::input_names)
      .def_property_readonly("num_user_outputs", &PyCompiledGraph::num_user_outputs);

  m.def(
      "compile",
      [](py::bytes archive, const std::vector<std::string>& input_roles) {
        std::string bytes = archive;  // copies out of the Python object before releasing the GIL
        const runtime::CompileOptions options = compile_options(input_roles);
        std::shared_ptr<runtime::CompiledGraph> core;
        {
          py::gil_scoped_release no_gil;
          core = runtime::CompiledGraph::from_archive_bytes(std::move(bytes), options);
        }
        return PyCompiledGraph(std::move(core));
      },
      py::arg("archive"), py::arg("input_roles") = std::vector<std::string>{},
      "Compiles a PT2 archive (bytes). input_roles: 'user'/'parameter'/'buffer' per tensor input.");

  m.def(
      "load",
      [](const std::string& path) {
        py::gil_scoped_release no_gil;
        return PyCompiledGraph(runtime::CompiledGraph::from_archive_file(path, {}));
      },
      py::arg("path"), "Compiles a .pt2 file written by torch.export.save (weights taken from the archive).");

  m.def("supported_targets", [] { return frontend::Registry::instance().targets(); },
        "ATen targets with a translator.");
}
