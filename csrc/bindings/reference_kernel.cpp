#include "bindings/reference_kernel.h"

#include <torch/extension.h>

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#if LUMINAL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "common/error.h"
#if LUMINAL_HAVE_CUDA
#include "runtime/cuda/standalone_kernel.h"
#endif

namespace py = pybind11;

namespace luminal::bindings {

#if LUMINAL_HAVE_CUDA
namespace {

// A launch dimension given as an int or a sequence of up to three ints.
void read_dimension(const py::handle& value, const char* what, unsigned out[3]) {
  std::vector<int64_t> sizes;
  if (PyLong_Check(value.ptr())) {
    sizes.push_back(value.cast<int64_t>());
  } else {
    sizes = value.cast<std::vector<int64_t>>();
  }
  LUMINAL_CHECK(!sizes.empty() && sizes.size() <= 3, what, " must be an int or 1 to 3 ints, got ", sizes.size());
  for (size_t d = 0; d < 3; ++d) {
    const int64_t size = d < sizes.size() ? sizes[d] : 1;
    LUMINAL_CHECK(size > 0 && size <= 0x7fffffff, what, "[", d, "] must be a positive 32-bit size, got ", size);
    out[d] = static_cast<unsigned>(size);
  }
}

class PyReferenceKernel {
 public:
  PyReferenceKernel(std::string source, std::string name)
      : kernel_(std::make_unique<cuda::StandaloneKernel>(std::move(source), std::move(name))) {}

  // Arguments: CUDA tensors (their data pointers; all on one device, the launch's), Python ints
  // (`long long` parameters) and floats (`float` parameters), in the kernel's parameter order.
  void launch(const py::handle& grid, const py::handle& block, int64_t shared_bytes, const py::list& args) {
    cuda::LaunchShape shape;
    read_dimension(grid, "grid", shape.grid);
    read_dimension(block, "block", shape.block);
    LUMINAL_CHECK(shared_bytes >= 0 && shared_bytes <= 0x7fffffff, "shared_bytes must be a non-negative 32-bit size, got ",
                  shared_bytes);
    shape.shared_bytes = static_cast<unsigned>(shared_bytes);
    thread_local std::vector<cuda::KernelArgument> arguments;
    arguments.clear();
    std::optional<c10::DeviceIndex> device;
    for (size_t k = 0; k < args.size(); ++k) {
      PyObject* value = args[k].ptr();
      if (THPVariable_Check(value)) {
        const at::Tensor& tensor = THPVariable_Unpack(value);
        LUMINAL_CHECK(tensor.defined() && tensor.is_cuda(), "kernel ", kernel_->name(), ": argument ", k,
                      " is not a CUDA tensor (", tensor.defined() ? tensor.device().str() : "undefined", ")");
        if (!device) device = tensor.get_device();
        LUMINAL_CHECK(tensor.get_device() == *device, "kernel ", kernel_->name(), ": argument ", k, " is on cuda:",
                      tensor.get_device(), ", an earlier tensor argument on cuda:", *device);
        arguments.push_back(cuda::KernelArgument::pointer(tensor.data_ptr()));
      } else if (PyBool_Check(value)) {
        fail("kernel ", kernel_->name(), ": argument ", k, " is a bool; pass an int for a long long parameter");
      } else if (PyLong_Check(value)) {
        int overflow = 0;
        const long long integer = PyLong_AsLongLongAndOverflow(value, &overflow);
        LUMINAL_CHECK(overflow == 0, "kernel ", kernel_->name(), ": argument ", k, " does not fit 64 bits");
        arguments.push_back(cuda::KernelArgument::int64(integer));
      } else if (PyFloat_Check(value)) {
        arguments.push_back(cuda::KernelArgument::float32(static_cast<float>(PyFloat_AsDouble(value))));
      } else {
        fail("kernel ", kernel_->name(), ": argument ", k, " is a ", Py_TYPE(value)->tp_name,
             "; expected a CUDA tensor, an int or a float");
      }
    }
    LUMINAL_CHECK(device.has_value(), "kernel ", kernel_->name(), ": no tensor argument says which device to launch on");
#if LUMINAL_TORCH_CUDA
    const CUstream stream = c10::cuda::getCurrentCUDAStream(*device).stream();
    kernel_->launch(*device, shape, stream, arguments);
#else
    fail("kernel ", kernel_->name(), ": this luminal was built against a CPU-only torch");
#endif
  }

  const std::string& name() const { return kernel_->name(); }

 private:
  std::unique_ptr<cuda::StandaloneKernel> kernel_;
};

}  // namespace

void register_reference_kernel(py::module_& m) {
  py::class_<PyReferenceKernel>(m, "_ReferenceKernel",
                                "A hand-written CUDA kernel (extern \"C\" __global__) compiled with NVRTC at its first "
                                "launch and launched on torch's current stream; for benchmarks' reference rows.")
      .def(py::init<std::string, std::string>(), py::arg("source"), py::arg("name"))
      .def("launch", &PyReferenceKernel::launch, py::arg("grid"), py::arg("block"), py::arg("shared_bytes"),
           py::arg("args"),
           "Enqueues the kernel. args: CUDA tensors (pointers), ints (long long) and floats (float), in parameter "
           "order; their count and sizes are checked against the kernel's where the driver can say.")
      .def_property_readonly("name", &PyReferenceKernel::name)
      .def_static("check_compiles", &cuda::StandaloneKernel::check_compiles, py::arg("source"), py::arg("name"),
                  py::arg("arch"),
                  "Compiles the source with NVRTC for arch (e.g. 'sm_90'; no GPU needed) and checks the entry point "
                  "is there; returns the cubin's size.");
}
#else
void register_reference_kernel(py::module_&) {}
#endif

}  // namespace luminal::bindings
