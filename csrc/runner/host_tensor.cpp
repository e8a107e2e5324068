#include "runner/host_tensor.h"

#include <algorithm>

#include "common/checked.h"
#include "common/error.h"

namespace luminal::runner {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> sizes, const std::string& what)
    : dtype_(dtype), sizes_(std::move(sizes)) {
  numel_ = element_count(sizes_, what);
  nbytes_ = feasible_tensor_bytes(sizes_, dtype_, what);  // refuses more than this machine could hold
  storage_.assign(std::max<size_t>(nbytes_, 1), 0);
}

runtime::TensorView HostTensor::view() {
  runtime::TensorView view;
  view.data = storage_.data();
  view.dtype = dtype_;
  view.sizes = sizes_;
  view.strides = runtime::contiguous_strides(sizes_);
  return view;
}

std::string HostTensor::describe() const { return str_cat(dtype_name(dtype_), int_list(sizes_)); }

}  // namespace luminal::runner
