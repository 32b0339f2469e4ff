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
#include "sparse/sparse_read.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::io {
namespace detail {

std::string quoted(const std::filesystem::path& p) {
  std::string q(1, '\'');
  q += p.string();
  q += '\'';
  return q;
}

bool ends_with(const std::filesystem::path& p, std::string_view tail) {
  const std::string s = p.string();
  if (s.size() < tail.size()) return false;
  return std::equal(tail.begin(), tail.end(), s.end() - static_cast<std::ptrdiff_t>(tail.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) ==
                             std::tolower(static_cast<unsigned char>(b));
                    });
}

}  // namespace detail

namespace {

using detail::ends_with;
using detail::quoted;

bool gzip_name(const std::filesystem::path& p) { return ends_with(p, ".gz"); }

#ifndef TENFOLD_WITH_ZLIB
[[noreturn]] void no_zlib(const std::filesystem::path& p) {
  throw NotCompiled("cannot read or write " + quoted(p) +
                    ": this build of Tenfold has no zlib (gzip) support; gunzip the file first");
}
#endif

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

namespace detail {

SparseFileHeader read_sparse_header(const std::filesystem::path& path) {
  require_little_endian(path);
  const FileSource src(path);
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
  // The size the header implies, in double (no overflow), against the file's.
  const double expected =
      static_cast<double>(sizeof h) + 8.0 * static_cast<double>(h.order) +
      static_cast<double>(h.nnz) * (8.0 * static_cast<double>(h.order) + h.value_bytes);
  if (expected != static_cast<double>(src.size())) {
    throw IoError(quoted(path) + " has " + std::to_string(src.size()) +
                  " bytes, but its header describes " +
                  std::to_string(static_cast<std::uint64_t>(expected)));
  }
  SparseFileHeader out{static_cast<int>(h.order), static_cast<int>(h.value_bytes), h.nnz,
                       std::vector<index_t>(h.order)};
  src.read(sizeof h, std::as_writable_bytes(std::span(out.dims)));
  return out;
}

template <class T>
void read_sparse_entries(const std::filesystem::path& path, const SparseFileHeader& h, index_t e0,
                         index_t e1, std::vector<index_t>& coords, std::vector<T>& values) {
  const FileSource src(path);
  const auto order = static_cast<std::uint64_t>(h.order);
  const auto nnz = static_cast<std::uint64_t>(h.nnz), k0 = static_cast<std::uint64_t>(e0);
  const auto count = static_cast<std::size_t>(e1 - e0);
  // Header, sizes, then mode n's indices at entry k: 32 + 8 N + 8 (n nnz + k); the values
  // after all the indices.
  const std::uint64_t indices_at = sizeof(BinaryHeader) + 8 * order;
  coords.resize(order * count);
  for (std::uint64_t n = 0; n < order; ++n) {
    src.read(indices_at + 8 * (n * nnz + k0),
             std::as_writable_bytes(std::span(coords.data() + n * count, count)));
  }
  const std::uint64_t values_at = indices_at + 8 * order * nnz + h.value_bytes * k0;
  values.resize(count);
  if (static_cast<std::size_t>(h.value_bytes) == sizeof(T)) {
    src.read(values_at, std::as_writable_bytes(std::span(values)));
  } else if (h.value_bytes == 4) {
    std::vector<float> stored(count);
    src.read(values_at, std::as_writable_bytes(std::span(stored)));
    std::copy(stored.begin(), stored.end(), values.begin());
  } else {
    std::vector<double> stored(count);
    src.read(values_at, std::as_writable_bytes(std::span(stored)));
    for (std::size_t k = 0; k < count; ++k) values[k] = static_cast<T>(stored[k]);
  }
}

}  // namespace detail

template <class T>
SparseTensor<T> load_sparse(const std::filesystem::path& path) {
  const detail::SparseFileHeader h = detail::read_sparse_header(path);
  tenfold::detail::require_host_bytes(sparse_tensor_bytes(h.order, h.nnz, sizeof(T)) * 1.5,
                                      "reading " + quoted(path));
  std::vector<index_t> coords;
  std::vector<T> values;
  detail::read_sparse_entries<T>(path, h, 0, h.nnz, coords, values);
  try {
    return SparseTensor<T>(h.dims, std::move(coords), std::move(values));
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
SparseTensor<T> load_sparse_file(const std::filesystem::path& path, std::span<const index_t> shape,
                                 const ReadProgress& progress) {
  if (ends_with(path, ".tns") || ends_with(path, ".tns.gz"))
    return load_tns<T>(path, shape, progress);
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

#define TENFOLD_INSTANTIATE_SPARSE_IO(T)                                                          \
  template void detail::read_sparse_entries<T>(const std::filesystem::path&,                      \
                                               const detail::SparseFileHeader&, index_t, index_t, \
                                               std::vector<index_t>&, std::vector<T>&);           \
  template void save_tns<T>(const std::filesystem::path&, const SparseTensor<T>&);                \
  template SparseTensor<T> load_sparse<T>(const std::filesystem::path&);                          \
  template void save_sparse<T>(const std::filesystem::path&, const SparseTensor<T>&);             \
  template void save_sparse_file<T>(const std::filesystem::path&, const SparseTensor<T>&);        \
  template SparseTensor<T> load_sparse_file<T>(const std::filesystem::path&,                      \
                                               std::span<const index_t>, const ReadProgress&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_IO)

}  // namespace tenfold::io
