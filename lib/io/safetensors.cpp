// safetensors format (https://github.com/huggingface/safetensors): u64 little-endian
// header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [0, 24]}, ...}
// padded with spaces, then the data section; offsets are relative to its start.
#include "tenfold/safetensors.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "core/format.hpp"
#include "io/byte_source.hpp"
#include "io/float_codec.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"

namespace tenfold::io {
namespace {

using detail::ByteSource;
using detail::fail;
using detail::FloatCodec;
using Json = nlohmann::json;

struct DtypeInfo {
  std::string_view name;
  std::size_t size;                 // bytes per element
  std::optional<FloatCodec> codec;  // set when readable as floating point
};

constexpr std::array<DtypeInfo, 15> kDtypes = {{
    {"F64", 8, FloatCodec::f64},
    {"F32", 4, FloatCodec::f32},
    {"F16", 2, FloatCodec::f16},
    {"BF16", 2, FloatCodec::bf16},
    {"F8_E5M2", 1, std::nullopt},
    {"F8_E4M3", 1, std::nullopt},
    {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},
    {"I32", 4, std::nullopt},
    {"U32", 4, std::nullopt},
    {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},
    {"I8", 1, std::nullopt},
    {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},
}};

// Header length limit of the reference implementation.
constexpr std::uint64_t kMaxHeaderLength = 100'000'000;

const DtypeInfo* find_dtype(std::string_view name) {
  const auto it = std::find_if(kDtypes.begin(), kDtypes.end(),
                               [&](const DtypeInfo& d) { return d.name == name; });
  return it == kDtypes.end() ? nullptr : &*it;
}

// A JSON value for messages, at most 80 characters.
std::string excerpt(const Json& v) {
  std::string s = v.dump(-1, ' ', true, Json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

// Parses the header, rejecting a tensor name that appears twice.
Json parse_header(const ByteSource& source, const std::string& text) {
  std::set<std::string> names;
  const Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key &&
        !names.insert(parsed.get<std::string>()).second) {
      fail(source, "'" + parsed.get<std::string>() + "' appears twice in the header");
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Json::exception& e) {
    fail(source, std::string("the header is not valid JSON: ") + e.what());
  }
}

std::uint64_t to_u64(const ByteSource& source, const Json& v, const std::string& what) {
  if (!v.is_number_unsigned()) {
    fail(source, what + " is not a non-negative integer: " + excerpt(v));
  }
  return v.get<std::uint64_t>();
}

SafetensorsEntry parse_entry(const ByteSource& source, const std::string& name, const Json& v,
                             std::uint64_t data_size) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) fail(source, where + " is not a JSON object: " + excerpt(v));
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || shape == v.end() || offsets == v.end()) {
    fail(source, where + " lacks one of \"dtype\", \"shape\", \"data_offsets\"");
  }
  SafetensorsEntry e;
  e.name = name;
  if (!dtype->is_string()) fail(source, where + " has a dtype that is not a string");
  e.dtype = dtype->get<std::string>();
  const DtypeInfo* info = find_dtype(e.dtype);
  if (info == nullptr) fail(source, where + " has unknown dtype '" + e.dtype + "'");
  if (!shape->is_array()) fail(source, where + " has a shape that is not an array");
  for (const Json& d : *shape) {
    const std::uint64_t size = to_u64(source, d, where + ": shape entry");
    if (size > static_cast<std::uint64_t>(std::numeric_limits<index_t>::max())) {
      fail(source, where + ": shape entry " + std::to_string(size) + " is too large");
    }
    e.shape.push_back(static_cast<index_t>(size));
  }
  if (!offsets->is_array() || offsets->size() != 2) {
    fail(source, where + ": data_offsets is not a pair [begin, end]: " + excerpt(*offsets));
  }
  e.begin = to_u64(source, (*offsets)[0], where + ": data_offsets begin");
  e.end = to_u64(source, (*offsets)[1], where + ": data_offsets end");
  const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.begin > e.end) fail(source, where + " has data_offsets " + range + " with begin > end");
  if (e.end > data_size) {
    fail(source, where + " has data_offsets " + range + " beyond the data section (" +
                     std::to_string(data_size) + " bytes)");
  }
  index_t numel = 0;
  try {
    numel = checked_numel(e.shape);
  } catch (const InvalidArgument& err) {
    fail(source, where + ": " + err.what());
  }
  const std::uint64_t bytes =
      detail::checked_mul(source, static_cast<std::uint64_t>(numel), info->size, "data size");
  if (bytes != e.end - e.begin) {
    fail(source, where + " of shape " + tenfold::detail::shape_string(e.shape) + " and dtype " +
                     e.dtype + " needs " + std::to_string(bytes) + " bytes, data_offsets " + range +
                     " hold " + std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

class SafetensorsFile::Source {
 public:
  explicit Source(const std::filesystem::path& path)
      : bytes(std::make_unique<detail::FileSource>(path)) {}
  explicit Source(std::span<const std::byte> data)
      : copy(data.begin(), data.end()),
        bytes(std::make_unique<detail::MemorySource>(std::span<const std::byte>(copy))) {}
  const std::vector<std::byte> copy;
  const std::unique_ptr<const ByteSource> bytes;
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : SafetensorsFile(std::make_shared<const Source>(path)) {}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const std::byte> bytes) {
  return SafetensorsFile(std::make_shared<const Source>(bytes));
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const Source> source)
    : source_(std::move(source)) {
  const ByteSource& src = *source_->bytes;
  const std::uint64_t file_size = src.size();
  if (file_size < 8) {
    fail(src, "the file has " + std::to_string(file_size) +
                  " bytes, too few for a safetensors header length (8)");
  }
  // Header length: u64, little-endian.
  std::array<unsigned char, 8> le{};
  src.read(0, std::as_writable_bytes(std::span(le)));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | le[static_cast<std::size_t>(i)];
  if (n > kMaxHeaderLength) {
    fail(src, "header length " + std::to_string(n) + " exceeds the limit " +
                  std::to_string(kMaxHeaderLength));
  }
  if (n > file_size - 8) {
    fail(src, "header length " + std::to_string(n) + " goes beyond the end of the file (" +
                  std::to_string(file_size) + " bytes)");
  }
  data_start_ = 8 + n;
  std::string text(static_cast<std::size_t>(n), '\0');
  src.read(8, std::as_writable_bytes(std::span(text)));
  const Json header = parse_header(src, text);
  if (!header.is_object()) fail(src, "the header is not a JSON object: " + excerpt(header));

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(src, "__metadata__ is not a JSON object: " + excerpt(value));
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(src, "__metadata__ value of '" + k + "' is not a string");
        metadata_.emplace(k, v.get<std::string>());
      }
    } else {
      tensors_.push_back(parse_entry(src, key, value, file_size - data_start_));
    }
  }
  // Data order; non-empty ranges must not overlap (disjoint sorted ranges: each begins
  // at or after the end of the previous one).
  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : tensors_) {
    if (e.begin == e.end) continue;
    if (previous != nullptr && e.begin < previous->end) {
      fail(src, "tensors '" + previous->name + "' and '" + e.name + "' have overlapping data");
    }
    previous = &e;
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsEntry& SafetensorsFile::at(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) fail(*source_->bytes, "no tensor named '" + std::string(name) + "'");
  return *e;
}

std::vector<std::byte> SafetensorsFile::read_bytes(std::string_view name) const {
  const SafetensorsEntry& e = at(name);
  std::vector<std::byte> bytes(static_cast<std::size_t>(e.end - e.begin));
  source_->bytes->read(data_start_ + e.begin, bytes);
  return bytes;
}

template <class T>
Tensor<T> SafetensorsFile::read(std::string_view name) const {
  const SafetensorsEntry& e = at(name);
  const DtypeInfo* info = find_dtype(e.dtype);
  if (!info->codec) {
    fail(*source_->bytes, "tensor '" + e.name + "' has dtype " + e.dtype +
                              ", which is not floating point (readable: F64, F32, F16, BF16)");
  }
  // Row-major (a, b, c) is the column-major (c, b, a).
  Tensor<T> x(std::vector<index_t>(e.shape.rbegin(), e.shape.rend()));
  detail::read_floats(*source_->bytes, data_start_ + e.begin, *info->codec,
                      std::span<T>(x.values()));
  return x;
}

template <class T>
Matrix<T> SafetensorsFile::read_matrix(std::string_view name) const {
  const SafetensorsEntry& e = at(name);
  if (e.shape.size() != 2) {
    fail(*source_->bytes, "tensor '" + e.name + "' of shape " +
                              tenfold::detail::shape_string(e.shape) + " is not a matrix");
  }
  Tensor<T> x = read<T>(name);
  return Matrix<T>(x.dim(0), x.dim(1), std::move(x.values()));
}

template <class T>
SafetensorsTensor safetensors_tensor(std::string name, TensorView<const T> x) {
  return {std::move(name), sizeof(T) == 4 ? "F32" : "F64",
          std::vector<index_t>(x.dims().rbegin(), x.dims().rend()),
          std::as_bytes(std::span(x.data(), static_cast<std::size_t>(x.numel())))};
}

void save_safetensors(const std::filesystem::path& path, std::span<const SafetensorsTensor> tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == "__metadata__") throw InvalidArgument("tensor name '__metadata__' is reserved");
    if (header.contains(t.name)) {
      throw InvalidArgument("tensor name '" + t.name + "' appears twice");
    }
    const DtypeInfo* info = find_dtype(t.dtype);
    if (info == nullptr) {
      throw InvalidArgument("tensor '" + t.name + "' has unknown dtype '" + t.dtype + "'");
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(checked_numel(t.shape)), info->size,
                               &bytes) ||
        bytes != t.bytes.size()) {
      throw DimensionMismatch("tensor '" + t.name + "' of shape " +
                              tenfold::detail::shape_string(t.shape) + " and dtype " + t.dtype +
                              " needs " + std::to_string(bytes) + " bytes, got " +
                              std::to_string(t.bytes.size()));
    }
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    throw InvalidArgument(std::string("tensor names and metadata must be valid UTF-8: ") +
                          e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  write_file_atomically(path, [&](std::ostream& os) {
    for (int i = 0; i < 8; ++i)
      os.put(static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i)));
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafetensorsTensor& t : tensors) {
      os.write(reinterpret_cast<const char*>(t.bytes.data()),
               static_cast<std::streamsize>(t.bytes.size()));
    }
  });
}

template Tensor<float> SafetensorsFile::read(std::string_view) const;
template Tensor<double> SafetensorsFile::read(std::string_view) const;
template Matrix<float> SafetensorsFile::read_matrix(std::string_view) const;
template Matrix<double> SafetensorsFile::read_matrix(std::string_view) const;
template SafetensorsTensor safetensors_tensor(std::string, TensorView<const float>);
template SafetensorsTensor safetensors_tensor(std::string, TensorView<const double>);

}  // namespace tenfold::io
