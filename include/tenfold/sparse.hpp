// Sparse tensors in coordinate form, and their files (FROSTT .tns text, a binary form).
//
// A SparseTensor holds the nonzero entries of a tensor of any order N >= 1 as N index
// arrays (one per mode, 64-bit, 0-based) and a value array. Mode n of a sparse tensor
// is column n of its coordinates and NumPy axis n (pydata sparse.COO.coords is the same
// (N, nnz) array): there is no memory order to reverse, unlike dense arrays. Nothing in
// the library ever forms the dense tensor; the algorithms (cp_als, cp_apr) build their
// own compressed layouts from it (docs/sparse.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

namespace detail {
template <class T>
class TakenEntries;
}  // namespace detail

/// A sparse tensor: entry k has index coords[n * nnz + k] in mode n and value values[k].
/// Canonical: entries sorted with mode 0 slowest (lexicographic), every coordinate at
/// most once, no explicit zeros.
template <class T>
class TENFOLD_API SparseTensor {
 public:
  using value_type = T;

  SparseTensor() = default;
  /// Takes the entries: `coords` is mode-major (N x nnz, as sparse.COO.coords), 0-based.
  /// Duplicate coordinates are summed (as the Tensor Toolbox's sptensor does) and entries
  /// that are then exactly zero dropped. Throws InvalidArgument for a size < 1, a
  /// coordinate array whose length is not a multiple of N, fewer coordinates than
  /// N * values.size(), an index out of range (naming the entry, mode and size) or a
  /// non-finite value.
  SparseTensor(std::vector<index_t> dims, std::vector<index_t> coords, std::vector<T> values);

  /// The nonzero entries of a dense tensor (checked finite).
  static SparseTensor from_dense(TensorView<const T> x);

  int order() const { return static_cast<int>(dims_.size()); }
  index_t dim(int n) const { return dims_[static_cast<std::size_t>(n)]; }
  const std::vector<index_t>& dims() const { return dims_; }
  /// Number of stored (nonzero) entries.
  index_t nnz() const { return static_cast<index_t>(values_.size()); }
  /// The indices of mode n, one per entry.
  std::span<const index_t> indices(int n) const {
    return {coords_.data() + static_cast<std::size_t>(n) * values_.size(), values_.size()};
  }
  /// All coordinates, mode-major (N x nnz).
  const std::vector<index_t>& coords() const { return coords_; }
  const std::vector<T>& values() const { return values_; }

  /// Frobenius norm, accumulated in double (the same for any thread count).
  double norm() const;
  /// Dense copy (prod I_n entries; throws MemoryError when it cannot fit). For tests and
  /// small tensors only: no algorithm calls it.
  Tensor<T> full() const;

 private:
  // cp_als(SparseTensor&&) takes the arrays, so that they go as its CSF trees are built.
  friend class detail::TakenEntries<T>;
  std::vector<index_t> dims_;
  std::vector<index_t> coords_;
  std::vector<T> values_;
};

/// Bytes a SparseTensor<T> of this order and number of entries occupies.
TENFOLD_API double sparse_tensor_bytes(int order, index_t nnz, std::size_t value_bytes);

namespace io {

/// Progress of a file's read: the bytes of its passes done so far and their total. A plain
/// .tns file is read twice (its lines counted, then parsed), so `total` is twice its size,
/// reported after each range of about 8 MiB; a .gz file (one range) by its compressed
/// bytes read, after each block of 256 KiB; a .tfsparse file (read in bulk) reports
/// nothing. Called by one of the library's threads at a time, never after the read
/// returns; it must not throw.
using ReadProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Reads a FROSTT .tns file: one entry per line, N 1-based indices then the value,
/// separated by spaces or tabs; '#' starts a comment (to the end of the line), and
/// lines left blank are skipped. A name ending in .gz (any case, as every extension
/// here) is read through zlib (gzip); a stream cut short is an error. The order is the
/// first entry's column count minus one; the shape is `shape` when given (every index
/// checked against it), else the one a "# shape: I_0 I_1 ..." line before the entries
/// declares (save_tns writes it), else the largest index of each mode. Duplicates are
/// summed (see SparseTensor). A plain file is read in byte ranges of about 8 MiB on the
/// library's threads: each range's lines and entries counted, the memory for the tensor
/// checked, then each range parsed straight into its place (no second copy of the
/// entries); a .gz file is one range. The time is linear in the file's size. Throws
/// IoError naming the file, line and column for a wrong column count, an index < 1, past
/// the shape or past 2^63 - 1, a value that is not a number or over- or underflows T, or
/// a line longer than 1 MiB. `progress`, when set, follows the read (ReadProgress).
template <class T>
TENFOLD_API SparseTensor<T> load_tns(const std::filesystem::path& path,
                                     std::span<const index_t> shape = {},
                                     const ReadProgress& progress = {});

/// Writes x as a .tns file (a "# shape:" comment line, then the entries: 1-based
/// indices, values shortest round-trip; gzip when the name ends in .gz), atomically.
/// Throws IoError.
template <class T>
TENFOLD_API void save_tns(const std::filesystem::path& path, const SparseTensor<T>& x);

/// Reads the binary sparse format (docs/sparse-files.md): little-endian
/// header "TFSPARSE", version, order, value type, nnz, the sizes, then the coordinates
/// mode-major as int64 and the values, read in bulk. The file's size is checked against
/// its header before anything is allocated. Values stored as the other float type are
/// converted. The entries are validated as by the SparseTensor constructor.
template <class T>
TENFOLD_API SparseTensor<T> load_sparse(const std::filesystem::path& path);

/// Writes x in the binary sparse format, atomically.
template <class T>
TENFOLD_API void save_sparse(const std::filesystem::path& path, const SparseTensor<T>& x);

/// Whether `path` names a sparse tensor file by its extension: .tns, .tns.gz or .tfsparse.
TENFOLD_API bool is_sparse_file(const std::filesystem::path& path);

/// save_tns or save_sparse by extension (see is_sparse_file); throws IoError for a
/// name that is none of them.
template <class T>
TENFOLD_API void save_sparse_file(const std::filesystem::path& path, const SparseTensor<T>& x);

/// load_tns or load_sparse by extension (see is_sparse_file), with the shape given
/// (empty: the file's own) and the progress of a .tns file's read. A .tfsparse file's
/// stored shape must equal a shape given.
template <class T>
TENFOLD_API SparseTensor<T> load_sparse_file(const std::filesystem::path& path,
                                             std::span<const index_t> shape = {},
                                             const ReadProgress& progress = {});

}  // namespace io
}  // namespace tenfold
