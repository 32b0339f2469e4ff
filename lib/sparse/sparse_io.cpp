// Sparse tensor files: FROSTT .tns text (optionally gzip) and the binary .tfsparse form.
#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#ifdef TENFOLD_WITH_ZLIB
#include <zlib.h>
#endif

#include "core/instantiate.hpp"
#include "io/byte_source.hpp"
#include "sparse/entry_order.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::io {
namespace {

std::string quoted(const std::filesystem::path& p) {
  std::string q(1, '\'');
  q += p.string();
  q += '\'';
  return q;
}

// Whether the name ends in `tail`, letters compared without case (C.TNS is a .tns file).
bool ends_with(const std::filesystem::path& p, std::string_view tail) {
  const std::string s = p.string();
  if (s.size() < tail.size()) return false;
  return std::equal(tail.begin(), tail.end(), s.end() - static_cast<std::ptrdiff_t>(tail.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) ==
                             std::tolower(static_cast<unsigned char>(b));
                    });
}

bool gzip_name(const std::filesystem::path& p) { return ends_with(p, ".gz"); }

#ifndef TENFOLD_WITH_ZLIB
[[noreturn]] void no_zlib(const std::filesystem::path& p) {
  throw NotCompiled("cannot read or write " + quoted(p) +
                    ": this build of Tenfold has no zlib (gzip) support; gunzip the file first");
}
#endif

// Bytes of a file, plain or gzip-compressed, read front to back in blocks.
class TextStream {
 public:
  explicit TextStream(const std::filesystem::path& path) : path_(path) {
    if (gzip_name(path)) {
#ifdef TENFOLD_WITH_ZLIB
      gz_ = gzopen(path.c_str(), "rb");
      if (gz_ == nullptr) throw IoError("cannot open " + quoted(path));
      gzbuffer(gz_, 1 << 18);
#else
      no_zlib(path);
#endif
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      if (file_ == nullptr) throw IoError("cannot open " + quoted(path));
    }
  }
  ~TextStream() {
    if (file_ != nullptr) std::fclose(file_);
#ifdef TENFOLD_WITH_ZLIB
    if (gz_ != nullptr) gzclose(gz_);
#endif
  }
  TextStream(const TextStream&) = delete;
  TextStream& operator=(const TextStream&) = delete;

  // Up to n bytes into buf; 0 at the end. Throws IoError on a read error.
  std::size_t read(char* buf, std::size_t n) {
    if (file_ != nullptr) {
      const std::size_t got = std::fread(buf, 1, n, file_);
      if (got < n && std::ferror(file_)) throw IoError("cannot read " + quoted(path_));
      return got;
    }
#ifdef TENFOLD_WITH_ZLIB
    const int got = gzread(gz_, buf, static_cast<unsigned>(n));
    int code = Z_OK;
    const char* what = gzerror(gz_, &code);
    if (got < 0) throw IoError("cannot decompress " + quoted(path_) + ": " + what);
    // zlib reads a stream cut short up to the cut, then reports Z_BUF_ERROR.
    if (code == Z_BUF_ERROR) {
      throw IoError(quoted(path_) +
                    " is truncated: its gzip stream ends before the end marker (was the file "
                    "cut short while copying?)");
    }
    return static_cast<std::size_t>(got);
#else
    return 0;
#endif
  }

  // Calls line(text, number) for every line (without its '\n' or '\r'), in time linear
  // in the file's size: each byte is searched for '\n' once. Throws IoError for a line
  // longer than kMaxLine (no .tns entry is).
  template <class Line>
  void for_each_line(Line&& line) {
    constexpr std::size_t kBlock = 1 << 20;
    std::string buf;
    std::size_t number = 0;
    for (;;) {
      const std::size_t kept = buf.size();  // the start of a line, searched already
      buf.resize(kept + kBlock);
      const std::size_t got = read(buf.data() + kept, kBlock);
      buf.resize(kept + got);
      std::size_t begin = 0;
      for (std::size_t from = kept;;) {
        const std::size_t end = buf.find('\n', from);
        if (end == std::string::npos) break;
        std::size_t stop = end;
        if (stop > begin && buf[stop - 1] == '\r') --stop;
        line(std::string_view(buf).substr(begin, stop - begin), ++number);
        begin = from = end + 1;
      }
      buf.erase(0, begin);
      if (buf.size() > kMaxLine) {
        throw IoError(quoted(path_) + " line " + std::to_string(number + 1) +
                      ": longer than 1 MiB without a line break (not a .tns entry; is this a "
                      "text file?)");
      }
      if (got == 0) {
        if (!buf.empty()) line(std::string_view(buf), ++number);
        return;
      }
    }
  }

  static constexpr std::size_t kMaxLine = 1 << 20;

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
#ifdef TENFOLD_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

// The part of a line before a '#' (the rest is a comment), and without a UTF-8 byte
// order mark at the start of the file.
std::string_view entry_text(std::string_view s, std::size_t line) {
  if (line == 1 && s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
  return s.substr(0, s.find('#'));
}

// A field as it may be printed in a message: bytes outside printable ASCII as \xNN, at
// most 40 characters.
std::string printable(std::string_view f) {
  std::string out;
  for (const char ch : f.substr(0, 40)) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(ch);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
    }
  }
  if (f.size() > 40) out += "...";
  return out;
}

// The shape a file written by save_tns declares in its "# shape: I_0 I_1 ..." line, or
// an empty vector when the line is something else.
std::vector<index_t> declared_shape(std::string_view s) {
  constexpr std::string_view kTag = "# shape:";
  std::vector<index_t> shape;
  if (!s.starts_with(kTag)) return shape;
  s.remove_prefix(kTag.size());
  while (true) {
    const std::size_t at = s.find_first_not_of(" \t");
    if (at == std::string_view::npos) return shape;
    s.remove_prefix(at);
    index_t d = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || d < 1 || (end != s.data() + s.size() && *end != ' ' && *end != '\t'))
      return {};
    shape.push_back(d);
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
  }
}

// The blank-separated fields of a line.
void split_fields(std::string_view s, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == s.size()) break;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
}

constexpr char kMagic[8] = {'T', 'F', 'S', 'P', 'A', 'R', 'S', 'E'};
constexpr std::uint32_t kVersion = 1;

struct BinaryHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t order;
  std::uint32_t value_bytes;  // 4: float32, 8: float64
  std::uint32_t reserved;
  std::int64_t nnz;
};
static_assert(sizeof(BinaryHeader) == 32);

void require_little_endian(const std::filesystem::path& path) {
  if constexpr (std::endian::native != std::endian::little) {
    throw IoError("cannot read or write " + quoted(path) +
                  ": the binary sparse format is "
                  "little-endian and this machine is not");
  }
}

}  // namespace

bool is_sparse_file(const std::filesystem::path& path) {
  return ends_with(path, ".tns") || ends_with(path, ".tns.gz") || ends_with(path, ".tfsparse");
}

// Why a .tns value field is refused, in float type T: it is not a number, or it is a
// number beyond T's range (past its largest finite value, or below its smallest).
template <class T>
std::string bad_value(std::string_view f) {
  const char* type = sizeof(T) == 4 ? "float32" : "float64";
  long double wide = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), wide);
  const bool number =
      end == f.data() + f.size() && (ec == std::errc() || ec == std::errc::result_out_of_range);
  const std::string shown = "'" + printable(f) + "'";
  if (!number) return shown + " is not a number";
  if (std::isnan(wide)) return shown + " is NaN (values must be finite)";
  if (std::isinf(wide)) return shown + " is infinite (values must be finite)";
  // from_chars of long double reports a range error for what long double cannot hold.
  const bool tiny = ec == std::errc::result_out_of_range
                        ? f.find_first_of("eE") != std::string_view::npos &&
                              f.find('-', f.find_first_of("eE")) != std::string_view::npos
                        : std::fabs(wide) < static_cast<long double>(std::numeric_limits<T>::max());
  return shown + (tiny ? " underflows " : " overflows ") + type + " (its magnitudes run from " +
         (sizeof(T) == 4 ? "1.4e-45 to 3.4e+38" : "4.9e-324 to 1.8e+308") + ")";
}

template <class T>
SparseTensor<T> load_tns(const std::filesystem::path& path, std::span<const index_t> shape) {
  // Pass 1: an upper bound on the entries (lines), for the memory check.
  std::size_t lines = 0;
  {
    TextStream in(path);
    in.for_each_line([&](std::string_view, std::size_t) { ++lines; });
  }
  TextStream in(path);
  std::vector<std::string_view> fields;
  std::vector<std::vector<index_t>> idx;  // per mode
  std::vector<index_t> largest;
  std::vector<T> values;
  std::vector<index_t> dims(shape.begin(), shape.end());
  bool given = !dims.empty();  // by the caller, or by a "# shape:" line before the entries
  int order = 0;
  const auto fail = [&](std::size_t line, const std::string& what) {
    throw IoError(quoted(path) + " line " + std::to_string(line) + ": " + what);
  };
  // The order, and the memory for the entries, once it is known.
  const auto start = [&](int n, std::size_t line) {
    order = n;
    if (given && dims.size() != static_cast<std::size_t>(order)) {
      fail(line, "the entries have " + std::to_string(order) + " indices but the shape " +
                     (shape.empty() ? "declared" : "given") + " has " +
                     std::to_string(dims.size()) + " sizes");
    }
    tenfold::detail::require_host_bytes(
        2.0 * sparse_tensor_bytes(order, static_cast<index_t>(lines), sizeof(T)),
        "reading " + quoted(path) + " (" + std::to_string(lines) + " lines)");
    idx.resize(static_cast<std::size_t>(order));
    for (auto& v : idx) v.reserve(lines);
    values.reserve(lines);
    largest.assign(static_cast<std::size_t>(order), 0);
  };
  in.for_each_line([&](std::string_view raw, std::size_t line) {
    if (order == 0 && !given) {
      dims = declared_shape(raw);
      given = !dims.empty();
    }
    split_fields(entry_text(raw, line), fields);
    if (fields.empty()) return;
    if (order == 0) {
      if (fields.size() < 2) {
        fail(line, std::to_string(fields.size()) +
                       " column, expected the indices of an entry then its value");
      }
      start(static_cast<int>(fields.size()) - 1, line);
    }
    if (fields.size() != static_cast<std::size_t>(order) + 1) {
      fail(line, std::to_string(fields.size()) + " columns, expected " + std::to_string(order + 1) +
                     " (" + std::to_string(order) +
                     " indices and a value, as on the first entry's line)");
    }
    for (int n = 0; n < order; ++n) {
      const std::string_view f = fields[static_cast<std::size_t>(n)];
      const std::string column = "column " + std::to_string(n + 1) + ": ";
      index_t i = 0;
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), i);
      const bool digits = end == f.data() + f.size();
      if (ec == std::errc::result_out_of_range && digits) {
        fail(line, column + "index '" + printable(f) + "' is out of range (at most " +
                       std::to_string(std::numeric_limits<index_t>::max()) + ")");
      }
      if (ec != std::errc() || !digits) {
        fail(line, column + "'" + printable(f) + "' is not an index (a whole number)");
      }
      if (i < 1) fail(line, column + "index " + std::to_string(i) + " (.tns indices start at 1)");
      if (given && i > dims[static_cast<std::size_t>(n)]) {
        fail(line, column + "index " + std::to_string(i) + " exceeds the size " +
                       std::to_string(dims[static_cast<std::size_t>(n)]) + " of mode " +
                       std::to_string(n));
      }
      idx[static_cast<std::size_t>(n)].push_back(i - 1);
      largest[static_cast<std::size_t>(n)] =
          std::max<index_t>(largest[static_cast<std::size_t>(n)], i);
    }
    const std::string_view f = fields.back();
    T value{};
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
    if (ec != std::errc() || end != f.data() + f.size() || !std::isfinite(value)) {
      fail(line, "column " + std::to_string(order + 1) + ": " + bad_value<T>(f));
    }
    values.push_back(value);
  });
  if (order == 0) {
    if (!given)
      throw IoError(quoted(path) + " holds no entries (no line with indices and a value)");
    start(static_cast<int>(dims.size()), lines);  // an empty tensor of the declared shape
  }
  if (!given) dims = largest;
  const std::size_t nnz = values.size();
  std::vector<index_t> coords;
  coords.reserve(nnz * static_cast<std::size_t>(order));
  for (auto& v : idx) {
    coords.insert(coords.end(), v.begin(), v.end());
    std::vector<index_t>().swap(v);
  }
  try {
    return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
  } catch (const InvalidArgument& e) {
    throw IoError(quoted(path) + ": " + e.what());
  }
}

template <class T>
void save_tns(const std::filesystem::path& path, const SparseTensor<T>& x) {
  // The text of entries [k0, k1).
  const auto text = [&](index_t k0, index_t k1, std::string& out) {
    out.clear();
    char num[64];
    for (index_t k = k0; k < k1; ++k) {
      for (int n = 0; n < x.order(); ++n) {
        const auto r =
            std::to_chars(num, num + sizeof num, x.indices(n)[static_cast<std::size_t>(k)] + 1);
        out.append(num, r.ptr);
        out.push_back(' ');
      }
      const auto r = std::to_chars(num, num + sizeof num, x.values()[static_cast<std::size_t>(k)]);
      out.append(num, r.ptr);
      out.push_back('\n');
    }
  };
  // A comment line first that declares the shape (load_tns reads it back; other .tns
  // readers skip '#' lines), so trailing empty slices and empty tensors survive.
  const auto header = [&] {
    std::string h = "# shape:";
    for (index_t d : x.dims()) h += " " + std::to_string(d);
    return h + "\n";
  };
  constexpr index_t kBlock = 1 << 14;
  if (!gzip_name(path)) {
    write_file_atomically(path, [&](std::ostream& os) {
      std::string block = header();
      os.write(block.data(), static_cast<std::streamsize>(block.size()));
      for (index_t k = 0; k < x.nnz(); k += kBlock) {
        text(k, std::min(x.nnz(), k + kBlock), block);
        os.write(block.data(), static_cast<std::streamsize>(block.size()));
      }
    });
    return;
  }
#ifdef TENFOLD_WITH_ZLIB
  write_file_atomically(path, [&](std::ostream& os) {
    z_stream z{};
    // windowBits 15 + 16: a gzip header and trailer.
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw IoError("cannot start gzip compression for " + quoted(path));
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, deflateEnd);
    std::vector<unsigned char> outbuf(1 << 18);
    std::string block = header();
    const auto pump = [&](int flush) {
      do {
        z.next_out = outbuf.data();
        z.avail_out = static_cast<uInt>(outbuf.size());
        const int rc = deflate(&z, flush);
        if (rc == Z_STREAM_ERROR) throw IoError("gzip compression failed for " + quoted(path));
        os.write(reinterpret_cast<const char*>(outbuf.data()),
                 static_cast<std::streamsize>(outbuf.size() - z.avail_out));
      } while (z.avail_out == 0);
    };
    z.next_in = reinterpret_cast<Bytef*>(block.data());
    z.avail_in = static_cast<uInt>(block.size());
    pump(Z_NO_FLUSH);
    for (index_t k = 0; k < x.nnz(); k += kBlock) {
      text(k, std::min(x.nnz(), k + kBlock), block);
      z.next_in = reinterpret_cast<Bytef*>(block.data());
      z.avail_in = static_cast<uInt>(block.size());
      pump(Z_NO_FLUSH);
    }
    z.next_in = nullptr;
    z.avail_in = 0;
    pump(Z_FINISH);
  });
#else
  no_zlib(path);
#endif
}

template <class T>
SparseTensor<T> load_sparse(const std::filesystem::path& path) {
  require_little_endian(path);
  const detail::FileSource src(path);
  BinaryHeader h{};
  if (src.size() < sizeof h) throw IoError(quoted(path) + " is too short for a sparse tensor file");
  src.read(0, std::as_writable_bytes(std::span(&h, 1)));
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    throw IoError(quoted(path) + " is not a Tenfold sparse tensor file (no TFSPARSE magic)");
  if (h.version != kVersion) {
    throw IoError(quoted(path) + ": sparse format version " + std::to_string(h.version) +
                  " is not supported (this build reads version 1)");
  }
  if (h.order < 1 || h.order > 64 || (h.value_bytes != 4 && h.value_bytes != 8) || h.nnz < 0) {
    throw IoError(quoted(path) + ": malformed header (order " + std::to_string(h.order) +
                  ", value size " + std::to_string(h.value_bytes) + ", nnz " +
                  std::to_string(h.nnz) + ")");
  }
  const auto order = static_cast<std::size_t>(h.order);
  const auto nnz = static_cast<std::size_t>(h.nnz);
  // The size the header implies, in double (no overflow), against the file's.
  const double expected =
      static_cast<double>(sizeof h) + 8.0 * static_cast<double>(order) +
      static_cast<double>(nnz) * (8.0 * static_cast<double>(order) + h.value_bytes);
  if (expected != static_cast<double>(src.size())) {
    throw IoError(quoted(path) + " has " + std::to_string(src.size()) +
                  " bytes, but its header describes " +
                  std::to_string(static_cast<std::uint64_t>(expected)));
  }
  tenfold::detail::require_host_bytes(
      sparse_tensor_bytes(static_cast<int>(order), h.nnz, sizeof(T)) * 1.5,
      "reading " + quoted(path));
  std::vector<index_t> dims(order);
  std::uint64_t at = sizeof h;
  src.read(at, std::as_writable_bytes(std::span(dims)));
  at += 8 * order;
  std::vector<index_t> coords(order * nnz);
  src.read(at, std::as_writable_bytes(std::span(coords)));
  at += 8 * order * nnz;
  std::vector<T> values(nnz);
  if (h.value_bytes == sizeof(T)) {
    src.read(at, std::as_writable_bytes(std::span(values)));
  } else if (h.value_bytes == 4) {
    std::vector<float> stored(nnz);
    src.read(at, std::as_writable_bytes(std::span(stored)));
    std::copy(stored.begin(), stored.end(), values.begin());
  } else {
    std::vector<double> stored(nnz);
    src.read(at, std::as_writable_bytes(std::span(stored)));
    for (std::size_t k = 0; k < nnz; ++k) values[k] = static_cast<T>(stored[k]);
  }
  try {
    return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
  } catch (const InvalidArgument& e) {
    throw IoError(quoted(path) + ": " + e.what());
  }
}

template <class T>
void save_sparse(const std::filesystem::path& path, const SparseTensor<T>& x) {
  require_little_endian(path);
  BinaryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.order = static_cast<std::uint32_t>(x.order());
  h.value_bytes = sizeof(T);
  h.nnz = x.nnz();
  write_file_atomically(path, [&](std::ostream& os) {
    const auto put = [&os](const auto& data, std::size_t bytes) {
      os.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    };
    put(&h, sizeof h);
    put(x.dims().data(), x.dims().size() * sizeof(index_t));
    put(x.coords().data(), x.coords().size() * sizeof(index_t));
    put(x.values().data(), x.values().size() * sizeof(T));
  });
}

template <class T>
SparseTensor<T> load_sparse_file(const std::filesystem::path& path,
                                 std::span<const index_t> shape) {
  if (ends_with(path, ".tns") || ends_with(path, ".tns.gz")) return load_tns<T>(path, shape);
  if (!ends_with(path, ".tfsparse")) {
    throw IoError("cannot tell the format of " + quoted(path) +
                  " (sparse tensor files end in .tns, .tns.gz or .tfsparse)");
  }
  SparseTensor<T> x = load_sparse<T>(path);
  if (!shape.empty() && !std::equal(shape.begin(), shape.end(), x.dims().begin(), x.dims().end())) {
    std::string given, stored;
    for (index_t d : shape) given += (given.empty() ? "" : ", ") + std::to_string(d);
    for (index_t d : x.dims()) stored += (stored.empty() ? "" : ", ") + std::to_string(d);
    throw IoError(quoted(path) + " holds a tensor of shape (" + stored +
                  "), not the shape given (" + given + ")");
  }
  return x;
}

template <class T>
void save_sparse_file(const std::filesystem::path& path, const SparseTensor<T>& x) {
  if (ends_with(path, ".tfsparse")) return save_sparse<T>(path, x);
  if (ends_with(path, ".tns") || ends_with(path, ".tns.gz")) return save_tns<T>(path, x);
  throw IoError("cannot tell the format to write " + quoted(path) +
                " from its name (sparse tensor files end in .tns, .tns.gz or .tfsparse)");
}

#define TENFOLD_INSTANTIATE_SPARSE_IO(T)                                                        \
  template SparseTensor<T> load_tns<T>(const std::filesystem::path&, std::span<const index_t>); \
  template void save_tns<T>(const std::filesystem::path&, const SparseTensor<T>&);              \
  template SparseTensor<T> load_sparse<T>(const std::filesystem::path&);                        \
  template void save_sparse<T>(const std::filesystem::path&, const SparseTensor<T>&);           \
  template void save_sparse_file<T>(const std::filesystem::path&, const SparseTensor<T>&);      \
  template SparseTensor<T> load_sparse_file<T>(const std::filesystem::path&,                    \
                                               std::span<const index_t>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_IO)

}  // namespace tenfold::io
