// Reading sparse tensor files in parts: a .tns file by byte ranges (each range counted,
// then parsed, on its own: in parallel by load_tns, by one process each in tenfold::mpi)
// and a .tfsparse file by ranges of entries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::io::detail {

/// 'path', quoted as in every message about a file.
std::string quoted(const std::filesystem::path& path);

/// Whether the name ends in `tail`, letters compared without case (C.TNS is a .tns file).
bool ends_with(const std::filesystem::path& path, std::string_view tail);

/// Bytes [begin, end) of a file. The lines of a range are those that start in it: from
/// the first line beginning at or after `begin` (begin 0: the file's start) to the last
/// line beginning before `end`, which is read to its end even past `end`.
struct ByteRange {
  static constexpr std::uint64_t kWhole = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t begin = 0;
  std::uint64_t end = kWhole;
};

/// What the lines before the first entry of a .tns file say.
struct TnsLayout {
  int order = 0;              ///< indices per entry (the first entry's columns minus one)
  std::vector<index_t> dims;  ///< the shape given or declared ("# shape:"), else empty
  std::uint64_t bytes = 0;    ///< the file's size (gzip: ByteRange::kWhole, read whole)
};

/// Reads the lines up to the first entry: its order, and the shape `shape` (when not
/// empty) or the one a "# shape:" line before it declares. Throws IoError as load_tns for
/// a file that cannot be opened, holds no entries (and declares no shape), or whose first
/// entry has one column or another number of indices than the shape has sizes.
TnsLayout read_tns_layout(const std::filesystem::path& path, std::span<const index_t> shape);

/// Told, for a gzip file, the compressed bytes read since it was last called (after each
/// block); empty: not told.
using CompressedRead = std::function<void(std::uint64_t bytes)>;

/// The lines of a range, and how many of them hold an entry (fields outside a comment); a
/// line longer than 1 MiB ends the count (parse_tns_lines reports it).
struct LineCount {
  std::uint64_t lines = 0;
  std::uint64_t entries = 0;
};
LineCount count_tns_lines(const std::filesystem::path& path, ByteRange range,
                          const CompressedRead& compressed = {});

/// Parses the entries of a range, whose first line is line `first_line` of the file (as
/// counted by count_tns_lines over the ranges before it), into idx[n][k] (0-based) and
/// values[k], k from 0 to at most `capacity`; largest[n] becomes the largest 1-based index
/// of mode n seen. Returns the entries parsed. Throws IoError naming the file, line and
/// column, as load_tns does.
template <class T>
std::uint64_t parse_tns_lines(const std::filesystem::path& path, const TnsLayout& layout,
                              ByteRange range, std::uint64_t first_line,
                              std::span<index_t* const> idx, T* values, std::uint64_t capacity,
                              std::span<index_t> largest, const CompressedRead& compressed = {});

/// The header of a .tfsparse file (checked against the file's size) and its sizes.
struct SparseFileHeader {
  int order = 0;
  int value_bytes = 8;  ///< 4: float32, 8: float64
  index_t nnz = 0;
  std::vector<index_t> dims;
};
SparseFileHeader read_sparse_header(const std::filesystem::path& path);

/// Entries [e0, e1) of a .tfsparse file: coords mode-major ((e1 - e0) per mode) and values,
/// read at their offsets (values of the other float type converted). Not validated.
template <class T>
void read_sparse_entries(const std::filesystem::path& path, const SparseFileHeader& h, index_t e0,
                         index_t e1, std::vector<index_t>& coords, std::vector<T>& values);

}  // namespace tenfold::io::detail
