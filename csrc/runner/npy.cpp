#include "runner/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "common/checked.h"
#include "common/error.h"

namespace luminal::runner {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxRank = 64;  // NumPy's NPY_MAXDIMS

struct DescrEntry {
  const char* descr;
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"|V2", DType::BF16}, {"<i8", DType::I64},
    {"<i4", DType::I32}, {"<i2", DType::I16}, {"|i1", DType::I8},  {"|u1", DType::U8},   {"|b1", DType::Bool},
};

// The header's dict literal, parsed strictly: {'descr': '...', 'fortran_order': False|True,
// 'shape': (d0, d1, ...), } with each key once, in any order, and nothing else.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_spaces();
    expect('{');
    while (true) {
      skip_spaces();
      if (peek() == '}') break;
      const std::string key = quoted();
      skip_spaces();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        once(seen_descr, key);
        descr = quoted();
      } else if (key == "fortran_order") {
        once(seen_order, key);
        fortran_order = boolean();
      } else if (key == "shape") {
        once(seen_shape, key);
        shape = tuple();
      } else {
        bad(str_cat("the key '", key, "' is not one of 'descr', 'fortran_order', 'shape'"));
      }
      skip_spaces();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}' after a value");
    }
    expect('}');
    skip_spaces();
    if (pos_ != text_.size()) bad("text after the closing '}'");
    if (!seen_descr || !seen_order || !seen_shape) bad("it lacks one of the keys 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    fail(what_, ": not a valid .npy header (", why, " at byte ", pos_, " of the header)");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_spaces() {
    while (peek() == ' ') ++pos_;
  }
  void expect(char c) {
    if (peek() != c) bad(str_cat("expected '", c, "'"));
    ++pos_;
  }
  void once(bool& seen, const std::string& key) const {
    if (seen) bad(str_cat("the key '", key, "' appears twice"));
    seen = true;
  }
  std::string quoted() {
    expect('\'');
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != '\'') {
      const char c = text_[pos_];
      if (c == '\\' || c < 0x20 || c > 0x7e) bad("an escape or a non-printable character in a string");
      ++pos_;
    }
    const std::string value(text_.substr(start, pos_ - start));
    expect('\'');
    return value;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("'fortran_order' must be True or False");
  }
  int64_t integer() {
    if (peek() < '0' || peek() > '9') bad("a dimension must be a non-negative integer");
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9') {
      bad("a dimension with a leading zero");
    }
    int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) bad("a dimension over 2**63 - 1");
      value = value * 10 + digit;
      ++pos_;
    }
    return value;
  }
  // A Python tuple literal of integers: (), (n,), (a, b) or (a, b,).
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> values;
    bool trailing_comma = false;
    skip_spaces();
    while (peek() != ')') {
      if (values.size() == kMaxRank) bad(str_cat("more than ", kMaxRank, " dimensions"));
      values.push_back(integer());
      skip_spaces();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
        skip_spaces();
      } else if (peek() != ')') {
        bad("expected ',' or ')' in 'shape'");
      }
    }
    if (values.size() == 1 && !trailing_comma) bad("'shape' (n) is not a tuple: write (n,)");
    expect(')');
    return values;
  }

  std::string_view text_;
  const std::string& what_;
  size_t pos_ = 0;
};

DType dtype_of_descr(const std::string& descr, const std::string& what) {
  for (const auto& entry : kDescrs) {
    if (descr == entry.descr) return entry.dtype;
  }
  std::string accepted;
  for (const auto& entry : kDescrs) accepted += str_cat(accepted.empty() ? "" : ", ", entry.descr);
  fail(what, ": the .npy dtype '", valid_utf8(descr), "' is not supported (accepted: ", accepted,
       "; '|V2' holds bfloat16 bits; big-endian data must be converted with astype)");
}

uint32_t little_endian(std::string_view bytes) {
  uint32_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace

const char* npy_descr(DType dtype) {
  for (const auto& entry : kDescrs) {
    if (entry.dtype == dtype) return entry.descr;
  }
  fail("the dtype ", dtype_name(dtype), " has no .npy form");
}

HostTensor parse_npy(std::string_view bytes, const std::string& what) {
  LUMINAL_CHECK(bytes.size() >= kMagic.size() + 2 && bytes.substr(0, kMagic.size()) == kMagic, what,
                ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  LUMINAL_CHECK((major >= 1 && major <= 3) && minor == 0, what, ": .npy format version ", major, ".", minor,
                " is not supported (1.0, 2.0 and 3.0 are)");
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagic.size() + 2 + length_bytes;
  LUMINAL_CHECK(bytes.size() >= prefix, what, ": truncated .npy file (", bytes.size(), " bytes, in the header)");
  const size_t header_length = little_endian(bytes.substr(8, length_bytes));
  LUMINAL_CHECK(header_length <= kMaxNpyHeaderBytes, what, ": the .npy header claims ", header_length,
                " bytes, over the limit of ", kMaxNpyHeaderBytes);
  LUMINAL_CHECK(bytes.size() - prefix >= header_length, what, ": truncated .npy file (the header claims ",
                header_length, " bytes, ", bytes.size() - prefix, " follow)");
  std::string_view header = bytes.substr(prefix, header_length);
  LUMINAL_CHECK(!header.empty() && header.back() == '\n', what, ": not a valid .npy header (it does not end with a newline)");
  header.remove_suffix(1);

  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  HeaderParser(header, what).parse(descr, fortran_order, shape);
  const DType dtype = dtype_of_descr(descr, what);
  LUMINAL_CHECK(!fortran_order, what, ": Fortran-order .npy arrays are not supported (save np.ascontiguousarray(a))");

  const std::string_view data = bytes.substr(prefix + header_length);
  const int64_t count = element_count(shape, what);
  const size_t expected = byte_count(count, dtype, what);
  LUMINAL_CHECK(data.size() == expected, what, ": the .npy header says ", dtype_name(dtype), int_list(shape), " (",
                expected, " bytes of data) but the file holds ", data.size(), " bytes of data");
  HostTensor tensor(dtype, shape, what);
  if (expected > 0) std::memcpy(tensor.data(), data.data(), expected);
  if (dtype == DType::Bool) {
    for (size_t i = 0; i < expected; ++i) {
      LUMINAL_CHECK(tensor.data()[i] <= 1, what, ": bool element ", i, " holds the byte ",
                    static_cast<int>(tensor.data()[i]), " (only 0 and 1 are booleans)");
    }
  }
  return tensor;
}

HostTensor read_npy(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: a FIFO does not wait for a writer (it is then refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  LUMINAL_CHECK(fd >= 0, path, ": cannot open (", std::strerror(errno), ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  LUMINAL_CHECK(::fstat(fd, &info) == 0, path, ": cannot stat (", std::strerror(errno), ")");
  LUMINAL_CHECK(S_ISREG(info.st_mode), path, ": not a regular file");
  const auto size = static_cast<size_t>(info.st_size);
  LUMINAL_CHECK(size <= max_bytes, path, ": ", size, " bytes, over the limit of ", max_bytes);
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, bytes.data() + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    LUMINAL_CHECK(got >= 0, path, ": read failed (", std::strerror(errno), ")");
    if (got == 0) break;  // shrank while being read: parse_npy reports the truncation
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return parse_npy(bytes, path);
}

std::string encode_npy(const HostTensor& tensor) {
  std::string shape = "(";
  for (size_t d = 0; d < tensor.sizes().size(); ++d) shape += str_cat(d ? ", " : "", tensor.sizes()[d]);
  shape += tensor.sizes().size() == 1 ? ",)" : ")";
  std::string header =
      str_cat("{'descr': '", npy_descr(tensor.dtype()), "', 'fortran_order': False, 'shape': ", shape, ", }");
  const size_t prefix = kMagic.size() + 4;
  const size_t unpadded = prefix + header.size() + 1;  // + '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  LUMINAL_CHECK(header.size() <= 65535, "a .npy header of ", header.size(), " bytes does not fit version 1.0");
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.data()), tensor.nbytes());
  return out;
}

void write_npy(const std::string& path, const HostTensor& tensor) {
  const std::string bytes = encode_npy(tensor);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  LUMINAL_CHECK(out.is_open(), path, ": cannot open for writing (", std::strerror(errno), ")");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  LUMINAL_CHECK(!out.fail(), path, ": write failed");
}

}  // namespace luminal::runner
