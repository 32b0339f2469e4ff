// NumPy .npy format (numpy.lib.format): the magic "\x93NUMPY", a major and minor
// version byte, the header length (little-endian u16 in version 1, u32 in versions 2
// and 3), then the header: a Python dict literal
//   {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and ended by '\n' (version 3 allows UTF-8 in it), then the data.
#include "io/npy.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/format.hpp"
#include "io/float_codec.hpp"
#include "tenfold/error.hpp"

namespace tenfold::io {
namespace {

using detail::ByteSource;
using detail::fail;

constexpr std::string_view kMagic = "\x93NUMPY";
// Longest header accepted: far beyond any real array (a header of 2^24 bytes lists
// millions of modes) yet small enough to read without further checks.
constexpr std::uint64_t kMaxHeaderLength = std::uint64_t{1} << 24;
// NumPy aligns the data to 64 bytes.
constexpr std::size_t kAlignment = 64;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::size_t dtype_size(DType dtype) { return dtype == DType::float32 ? 4 : 8; }

std::string dtype_descr(DType dtype) { return dtype == DType::float32 ? "<f4" : "<f8"; }

// Header text for messages: printable ASCII only, at most 160 characters, without the
// padding.
std::string excerpt(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  std::string s;
  for (char c : text.substr(0, 160)) s += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 160) s += "...";
  return s;
}

// Parser of the header dict. The grammar is tiny: a dict of exactly the keys 'descr'
// (a string), 'fortran_order' (True or False) and 'shape' (a tuple of non-negative
// integers, "(5,)" for one mode, "()" for none), in any order, with any whitespace
// and an optional trailing comma.
class HeaderParser {
 public:
  HeaderParser(const ByteSource& source, std::string_view text) : source_(source), text_(text) {}

  struct Dict {
    std::string descr;
    bool fortran_order = false;
    std::vector<index_t> shape;
  };

  Dict parse() {
    Dict d;
    bool seen[3] = {false, false, false};
    skip_space();
    expect('{');
    skip_space();
    while (peek() != '}') {
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      int k = 0;
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') error("'descr' is not a simple dtype string");
        d.descr = parse_string();
      } else if (key == "fortran_order") {
        k = 1;
        d.fortran_order = parse_bool();
      } else if (key == "shape") {
        k = 2;
        d.shape = parse_tuple();
      } else {
        error("unexpected key '" + excerpt(key) + "'");
      }
      if (seen[k]) error("key '" + key + "' appears twice");
      seen[k] = true;
      skip_space();
      if (peek() != ',') break;
      ++pos_;
      skip_space();
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) error("unexpected characters after the dict");
    const char* names[3] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k) {
      if (!seen[k]) error(std::string("key '") + names[k] + "' is missing");
    }
    return d;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(source_, "malformed .npy header (" + what + " at character " + std::to_string(pos_) +
                      "): " + excerpt(text_));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  // A quoted string without escapes.
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos) error("escape in string");
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::string_view w = word;
      if (text_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    error("'fortran_order' is not True or False");
  }
  // A non-negative integer (Python 2 files may append 'L').
  index_t parse_size() {
    if (peek() == '-') error("negative size");
    if (peek() < '0' || peek() > '9') error("expected a size");
    index_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (v > (std::numeric_limits<index_t>::max() - digit) / 10) {
        error("size does not fit in 64 bits");
      }
      v = 10 * v + digit;
      ++pos_;
    }
    if (peek() == 'L') ++pos_;
    return v;
  }
  std::vector<index_t> parse_tuple() {
    std::vector<index_t> shape;
    expect('(');
    skip_space();
    bool comma = false;
    while (peek() != ')') {
      shape.push_back(parse_size());
      skip_space();
      comma = peek() == ',';
      if (!comma) break;
      ++pos_;
      skip_space();
    }
    expect(')');
    if (shape.size() == 1 && !comma) error("'shape' is not a tuple (one mode is written (n,))");
    return shape;
  }

  const ByteSource& source_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

DType parse_descr(const ByteSource& source, const std::string& descr) {
  if (descr.size() == 3 && descr[1] == 'f' && (descr[2] == '4' || descr[2] == '8')) {
    if (descr[0] == '>') {
      fail(source,
           "big-endian dtype '" + descr + "' is not supported (store it as '<f" + descr[2] + "')");
    }
    if (descr[0] == '<' || descr[0] == '|' || descr[0] == '=') {
      return descr[2] == '4' ? DType::float32 : DType::float64;
    }
  }
  fail(source, "unsupported dtype '" + excerpt(descr) + "' (Tenfold reads '<f4' and '<f8')");
}

std::uint32_t read_le(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

NpyHeader read_npy_header(const ByteSource& source) {
  const std::uint64_t file_size = source.size();
  // Preamble: magic (6), version (2), header length (2 or 4).
  std::array<unsigned char, 12> pre{};
  const std::size_t have = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 12));
  source.read(0, std::as_writable_bytes(std::span(pre.data(), have)));
  if (have < kMagic.size() || std::memcmp(pre.data(), kMagic.data(), kMagic.size()) != 0) {
    fail(source, "not a .npy file (it does not start with \"\\x93NUMPY\")");
  }
  if (have < 8) {
    fail(source, "truncated .npy header: the file has " + std::to_string(file_size) + " bytes");
  }
  NpyHeader h;
  h.version_major = pre[6];
  if (h.version_major < 1 || h.version_major > 3 || pre[7] != 0) {
    fail(source, "unsupported .npy format version " + std::to_string(pre[6]) + "." +
                     std::to_string(pre[7]) + " (Tenfold reads 1.0, 2.0 and 3.0)");
  }
  const int length_bytes = h.version_major == 1 ? 2 : 4;
  const std::size_t prelude = 8 + static_cast<std::size_t>(length_bytes);
  if (have < prelude) {
    fail(source, "truncated .npy header: the file has " + std::to_string(file_size) + " bytes");
  }
  const std::uint64_t header_length = read_le(pre.data() + 8, length_bytes);
  if (header_length > kMaxHeaderLength) {
    fail(source, "header length " + std::to_string(header_length) + " exceeds the limit " +
                     std::to_string(kMaxHeaderLength));
  }
  if (prelude + header_length > file_size) {
    fail(source, "truncated .npy header: header length " + std::to_string(header_length) +
                     " goes beyond the end of the file (" + std::to_string(file_size) + " bytes)");
  }
  h.data_offset = prelude + static_cast<std::size_t>(header_length);

  std::string text(static_cast<std::size_t>(header_length), '\0');
  source.read(prelude, std::as_writable_bytes(std::span(text)));
  if (text.empty() || text.back() != '\n') {
    fail(source, "malformed .npy header (it does not end with a newline): " + excerpt(text));
  }
  const HeaderParser::Dict dict = HeaderParser(source, text).parse();
  h.dtype = parse_descr(source, dict.descr);
  h.fortran_order = dict.fortran_order;
  h.shape = dict.shape;

  // Size check before anything is allocated: the data must fill the rest exactly.
  index_t numel = 0;
  try {
    numel = checked_numel(h.shape);
  } catch (const InvalidArgument& e) {
    fail(source, std::string("bad shape in the .npy header: ") + e.what());
  }
  const std::uint64_t data_bytes = detail::checked_mul(source, static_cast<std::uint64_t>(numel),
                                                       dtype_size(h.dtype), "data size");
  const std::uint64_t available = file_size - h.data_offset;
  if (data_bytes != available) {
    fail(source, "shape " + tenfold::detail::shape_string(h.shape) + " of dtype '" + dict.descr +
                     "' needs " + std::to_string(data_bytes) + " data bytes, the file has " +
                     std::to_string(available) + " (" + std::to_string(file_size) +
                     " bytes in all, data at offset " + std::to_string(h.data_offset) + ")");
  }
  return h;
}

NpyHeader read_npy_header(const std::filesystem::path& path) {
  return read_npy_header(detail::FileSource(path));
}

template <class T>
Tensor<T> load_npy(const ByteSource& source, NpyHeader* header) {
  NpyHeader h = read_npy_header(source);
  // C order (a, b, c) is the column-major (c, b, a): reverse the modes, keep the memory.
  std::vector<index_t> dims = h.shape;
  if (!h.fortran_order) std::reverse(dims.begin(), dims.end());
  Tensor<T> x(std::move(dims));
  detail::read_floats(source, h.data_offset,
                      h.dtype == DType::float32 ? detail::FloatCodec::f32 : detail::FloatCodec::f64,
                      std::span<T>(x.values()));
  if (header != nullptr) *header = std::move(h);
  return x;
}

template <class T>
Tensor<T> load_npy(const std::filesystem::path& path, NpyHeader* header) {
  return load_npy<T>(detail::FileSource(path), header);
}

std::string npy_header(DType dtype, bool fortran_order, std::span<const index_t> shape) {
  std::string dict = "{'descr': '" + dtype_descr(dtype) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") + ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";  // a 1-tuple is written "(5,)"
  dict += "), }";
  // Pad with spaces and a final newline so that the data starts at a multiple of 64.
  const auto padded = [&](std::size_t prelude) {
    const std::size_t total = prelude + dict.size() + 1;
    return dict + std::string((kAlignment - total % kAlignment) % kAlignment, ' ') + "\n";
  };
  std::string header = padded(10);
  const int version = header.size() <= 0xffff ? 1 : 2;
  if (version == 2) header = padded(12);
  std::string out(kMagic);
  out += static_cast<char>(version);
  out += '\0';
  const std::size_t length = header.size();
  for (int i = 0; i < (version == 1 ? 2 : 4); ++i) out += static_cast<char>(length >> (8 * i));
  return out + header;
}

template <class T>
void save_npy(const std::filesystem::path& path, TensorView<const T> x, NpyOrder order) {
  const bool fortran = order == NpyOrder::fortran;
  std::vector<index_t> shape = x.dims();
  if (!fortran) std::reverse(shape.begin(), shape.end());
  const std::string header =
      npy_header(sizeof(T) == 4 ? DType::float32 : DType::float64, fortran, shape);
  write_file_atomically(path, [&](std::ostream& os) {
    os.write(header.data(), static_cast<std::streamsize>(header.size()));
    os.write(reinterpret_cast<const char*>(x.data()),
             static_cast<std::streamsize>(static_cast<std::size_t>(x.numel()) * sizeof(T)));
  });
}

template Tensor<float> load_npy(const ByteSource&, NpyHeader*);
template Tensor<double> load_npy(const ByteSource&, NpyHeader*);
template Tensor<float> load_npy(const std::filesystem::path&, NpyHeader*);
template Tensor<double> load_npy(const std::filesystem::path&, NpyHeader*);
template void save_npy(const std::filesystem::path&, TensorView<const float>, NpyOrder);
template void save_npy(const std::filesystem::path&, TensorView<const double>, NpyOrder);

}  // namespace tenfold::io
