// safetensors files (the checkpoint format of Hugging Face models): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and
// byte range, then the data. SafetensorsFile indexes and validates a file and reads
// tensors on demand; save_safetensors writes one atomically.
//
// Shapes are row-major (C order), as in PyTorch and NumPy. A linear layer's weight W
// of shape (out, in) stores W[o][i] at element o * in + i, which is the column-major
// in x out matrix Wᵀ: read() and read_matrix() return exactly that, reversing the
// modes instead of moving data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::io {

/// One tensor listed in a safetensors header.
struct TENFOLD_API SafetensorsEntry {
  std::string name;
  std::string dtype;           ///< "F64", "F32", "F16", "BF16", "I64", "U8", "BOOL", ...
  std::vector<index_t> shape;  ///< row-major, as in the file
  std::uint64_t begin = 0;     ///< byte range [begin, end) within the data section
  std::uint64_t end = 0;
};

/// An opened and validated safetensors file. Every entry has a known dtype, a shape
/// whose size matches its byte range, and a range inside the data section that
/// overlaps no other. Tensor data is read on demand from the file kept open.
class TENFOLD_API SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws IoError naming the problem.
  explicit SafetensorsFile(const std::filesystem::path& path);
  /// Indexes and validates a safetensors image held in memory (the bytes are copied).
  static SafetensorsFile from_bytes(std::span<const std::byte> bytes);

  /// The tensors, in the order of their data.
  const std::vector<SafetensorsEntry>& tensors() const { return tensors_; }
  /// The optional "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The entry called `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
  /// The entry called `name`; throws IoError when there is none.
  const SafetensorsEntry& at(std::string_view name) const;

  /// The stored bytes of a tensor of any dtype, bit for bit.
  std::vector<std::byte> read_bytes(std::string_view name) const;
  /// A F64, F32, F16 or BF16 tensor converted to T, as a column-major tensor with the
  /// shape reversed (same memory order). Other dtypes throw IoError.
  template <class T>
  Tensor<T> read(std::string_view name) const;
  /// A 2-D tensor of shape (out, in) as the column-major in x out matrix Wᵀ (same
  /// memory order). Throws IoError if it is not 2-D or not floating point.
  template <class T>
  Matrix<T> read_matrix(std::string_view name) const;

 private:
  class Source;  // where the bytes come from: a file kept open, or a copy in memory
  explicit SafetensorsFile(std::shared_ptr<const Source> source);

  std::shared_ptr<const Source> source_;
  std::uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write: its little-endian bytes are viewed, not copied, and must stay
/// alive until save_safetensors returns.
struct TENFOLD_API SafetensorsTensor {
  std::string name;
  std::string dtype;                 ///< safetensors dtype name, e.g. "F32", "BF16", "I64"
  std::vector<index_t> shape;        ///< row-major
  std::span<const std::byte> bytes;  ///< product(shape) x dtype size bytes
};

/// A view of `x` to write as F32 (float) or F64 (double) with the shape reversed, so
/// that SafetensorsFile::read gives back x.dims() and row-major readers see the same
/// memory (a column-major in x out matrix Wᵀ is written as the (out, in) weight W).
template <class T>
TENFOLD_API SafetensorsTensor safetensors_tensor(std::string name, TensorView<const T> x);

/// Writes `tensors`, with data in the given order, and `metadata` as "__metadata__"
/// (omitted when empty); the header is padded with spaces to a multiple of 8 bytes.
/// Written atomically. Throws InvalidArgument on a duplicate or reserved name or an
/// unknown dtype, DimensionMismatch when bytes and shape disagree, IoError on failure.
TENFOLD_API void save_safetensors(const std::filesystem::path& path,
                                  std::span<const SafetensorsTensor> tensors,
                                  const std::map<std::string, std::string>& metadata = {});

}  // namespace tenfold::io
