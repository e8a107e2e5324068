// Reading a luminal package (luminal.compile(...).save(path), python/luminal/aot.py) without
// Python or torch: the zip (csrc/pt2/zip_reader.h: stored entries, CRC-checked) holds
//   luminal_module/format          "luminal-module 2"
//   luminal_module/meta.json       state names, roles and specs, input specs, options, cache entries
//   luminal_module/program.pt2     the PT2 archive; the state tensors are its first inputs
//   luminal_module/state.json      per state tensor: name, dtype, sizes, strides, entry, byte count
//   luminal_module/state/<k>.bin   its bytes over its strides' reach
//   luminal_module/cache/<path>    on-disk cache entries (CUDA kernels, measured choices)
// Everything is checked against everything else (names, dtypes, shapes, byte counts) before it is
// used; a package of format 1 (its state a torch.save pickle) is refused with a message saying how
// to convert it. The archive's byte budget (max_archive_bytes) bounds all the reads together.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "pt2/archive.h"
#include "runner/host_tensor.h"

namespace luminal::runner {

// One parameter or buffer: its storage from the first element over its strides' reach (1-D), and
// the view of it the program binds.
struct StateTensor {
  std::string name;
  HostTensor storage;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool complex_pairs = false;  // a complex64/128 tensor: sizes and strides are its pairs' (last dimension 2)
};

struct Package {
  std::string program;                   // program.pt2's bytes
  std::vector<ir::InputRole> roles;      // per program input: the state's roles, then User
  std::vector<StateTensor> state;        // the program's first inputs, in order
  std::vector<std::string> input_names;  // the user inputs, as luminal.compile names them ("argument [0]")
  bool megakernel = true;                // the compile option the package was saved with
};

// True when the archive is a luminal package (its root folder is luminal_module, with a format entry).
bool is_luminal_package(const pt2::Archive& archive);

// Reads and checks the package. With `install_cache_entries`, its cache entries are copied into the
// cache directory (common/cache_files.h: cache_root(); nothing when caching is off), never over an
// existing file, as luminal.load does: a runner process then takes the kernels and the measured
// choices the saving process used (the same cuBLASLt algorithms: the same bits).
Package read_package(const pt2::Archive& archive, bool install_cache_entries);

}  // namespace luminal::runner
