// File formats: NumPy .npy arrays, and atomic file replacement.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "tenfold/export.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::io {

/// Element types Tenfold reads and writes.
enum class DType { float32, float64 };

/// What a .npy header says.
struct TENFOLD_API NpyHeader {
  int version_major = 1;         ///< format version 1, 2 or 3
  DType dtype = DType::float64;  ///< '<f4' or '<f8' (also '|' / '=' on little-endian hosts)
  bool fortran_order = false;
  std::vector<index_t> shape;   ///< as NumPy shows it
  std::size_t data_offset = 0;  ///< byte offset of the data in the file
};

/// Reads and validates the header of a .npy file (magic, version, dict, dtype,
/// byte order, shape against the file size). Throws IoError naming the problem.
TENFOLD_API NpyHeader read_npy_header(const std::filesystem::path& path);

/// Loads a .npy file as a column-major tensor of element type T (converting from
/// the stored dtype when it differs). A C-order array of NumPy shape (a, b, c)
/// becomes a tensor of shape (c, b, a) holding the same memory order (modes
/// reversed, no transposition); a Fortran-order array keeps its shape.
/// `header`, when given, receives the file's header. Throws IoError.
template <class T>
TENFOLD_API Tensor<T> load_npy(const std::filesystem::path& path, NpyHeader* header = nullptr);

/// How save_npy describes the column-major memory of a tensor of shape (d_0, ..., d_{N-1}).
enum class NpyOrder {
  fortran,     ///< Fortran order, NumPy shape (d_0, ..., d_{N-1}): NumPy sees the same array
  c_reversed,  ///< C order, NumPy shape (d_{N-1}, ..., d_0): the inverse of loading a C-order file
};

/// Writes `x` as a .npy file (version 1 when the header fits, else 2) without
/// copying or transposing: `order` only chooses how the header describes the memory.
/// Written atomically. Throws IoError.
template <class T>
TENFOLD_API void save_npy(const std::filesystem::path& path, TensorView<const T> x,
                          NpyOrder order = NpyOrder::fortran);

/// Writes a file atomically: `writer` fills a temporary file in the same folder (which
/// is created if missing), which is flushed and renamed over `path` only if writer
/// returns normally and
/// every write succeeded; otherwise the temporary file is removed and `path` is
/// untouched. Throws IoError (or what writer throws).
TENFOLD_API void write_file_atomically(const std::filesystem::path& path,
                                       const std::function<void(std::ostream&)>& writer);

/// Writes a folder of files as one unit: `writer` fills a new temporary folder beside
/// `dir` (hidden, in the same parent, which is created if missing); when it returns
/// normally the folder is flushed and takes the place of `dir` (symlinks in it followed)
/// by a rename. An existing
/// `dir` is replaced as a whole, with everything in it (atomically exchanged where the
/// file system supports it, else moved aside first), so a reader finds the old folder,
/// the new one, or (only on the fallback path, and only for the instant between two
/// renames) none, never a mixture. If writer throws, the temporary folder is removed and
/// `dir` is untouched. A process killed while writing leaves at most the hidden
/// ".<name>.tmp.*" sibling. Throws IoError (or what writer throws).
TENFOLD_API void write_folder_atomically(
    const std::filesystem::path& dir,
    const std::function<void(const std::filesystem::path&)>& writer);

}  // namespace tenfold::io
