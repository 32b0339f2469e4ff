// FROSTT .tns text files read by byte ranges: the lines before the first entry give
// the order and a declared shape; every range is then counted (lines, entries) and
// parsed on its own, so that load_tns parses the ranges of one file on the thread pool
// and tenfold::mpi gives each process its own range. A .tns.gz file is one range.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef TENFOLD_WITH_ZLIB
#include <zlib.h>
#endif

#include "core/instantiate.hpp"
#include "core/thread_pool.hpp"
#include "sparse/entry_order.hpp"
#include "sparse/sparse_read.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::io::detail {
namespace {

bool gzip_name(const std::filesystem::path& p) { return ends_with(p, ".gz"); }

// A line longer than TextStream::kMaxLine, and its number.
struct LongLine {
  std::uint64_t line;
  [[noreturn]] void raise(const std::filesystem::path& path) const {
    throw IoError(quoted(path) + " line " + std::to_string(line) +
                  ": longer than 1 MiB without a line break (not a .tns entry; is this a "
                  "text file?)");
  }
};

// The lines of a byte range of a file, plain or gzip-compressed (gzip: whole files only),
// read front to back in blocks.
class TextStream {
 public:
  TextStream(const std::filesystem::path& path, ByteRange range) : path_(path), range_(range) {
    if (gzip_name(path)) {
#ifdef TENFOLD_WITH_ZLIB
      gz_ = gzopen(path.c_str(), "rb");
      if (gz_ == nullptr) throw IoError("cannot open " + quoted(path));
      gzbuffer(gz_, 1 << 18);
#else
      throw NotCompiled("cannot read " + quoted(path) +
                        ": this build of Tenfold has no zlib (gzip) support; gunzip the file "
                        "first");
#endif
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      if (file_ == nullptr) throw IoError("cannot open " + quoted(path));
      // From the byte before the range: the line it ends (or the '\n' itself) is skipped.
      skip_first_ = range.begin > 0;
      offset_ = skip_first_ ? range.begin - 1 : 0;
      if (skip_first_ && fseeko(file_, static_cast<off_t>(offset_), SEEK_SET) != 0)
        throw IoError("cannot read " + quoted(path));
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

  // gzip: called after each block with the compressed bytes read since the last call.
  void on_compressed(const CompressedRead* read) { compressed_ = read; }

  // Calls line(text, number, at_file_start) for every line of the range (without its '\n'
  // or '\r'), numbered from first_number, until it returns false; time linear in the
  // range's size (each byte is searched for '\n' once). Throws LongLine for a line longer
  // than kMaxLine (no .tns entry is).
  template <class Line>
  void for_each_line(std::uint64_t first_number, Line&& line) {
    constexpr std::size_t kBlock = 1 << 20;
    std::string buf;
    std::uint64_t number = first_number - 1;
    // Reports the line buf[begin, stop) unless it is the skipped one; false: stop.
    const auto report = [&](std::size_t begin, std::size_t stop) {
      if (skip_first_) {
        skip_first_ = false;
        return true;
      }
      if (offset_ + begin >= range_.end) return false;
      return static_cast<bool>(
          line(std::string_view(buf).substr(begin, stop - begin), ++number, offset_ + begin == 0));
    };
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
        if (!report(begin, stop)) return;
        begin = from = end + 1;
      }
      if (skip_first_) begin = buf.size();  // inside the line before the range
      buf.erase(0, begin);
      offset_ += begin;
      if (buf.size() > kMaxLine) throw LongLine{number + 1};
      if (got == 0) {
        if (!buf.empty()) (void)report(0, buf.size());
        return;
      }
    }
  }

  static constexpr std::size_t kMaxLine = 1 << 20;

 private:
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
    if (compressed_ != nullptr && *compressed_) {
      const auto at = static_cast<std::uint64_t>(std::max<z_off_t>(0, gzoffset(gz_)));
      if (at > compressed_at_) {
        (*compressed_)(at - compressed_at_);
        compressed_at_ = at;
      }
    }
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

  std::filesystem::path path_;
  ByteRange range_;
  bool skip_first_ = false;
  std::uint64_t offset_ = 0;  // of buf[0] in the file
  std::FILE* file_ = nullptr;
  const CompressedRead* compressed_ = nullptr;
  std::uint64_t compressed_at_ = 0;
#ifdef TENFOLD_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

// The part of a line before a '#' (the rest is a comment), and without a UTF-8 byte
// order mark at the start of the file.
std::string_view entry_text(std::string_view s, bool at_file_start) {
  if (at_file_start && s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
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

[[noreturn]] void fail(const std::filesystem::path& path, std::uint64_t line,
                       const std::string& what) {
  throw IoError(quoted(path) + " line " + std::to_string(line) + ": " + what);
}

// The ranges load_tns parses side by side: pieces of about kChunk bytes (one for gzip).
std::vector<ByteRange> chunks_of(const TnsLayout& layout) {
  constexpr std::uint64_t kChunk = 8 << 20;
  if (layout.bytes == ByteRange::kWhole) return {ByteRange{}};
  const std::uint64_t n = std::max<std::uint64_t>(1, (layout.bytes + kChunk - 1) / kChunk);
  std::vector<ByteRange> chunks;
  for (std::uint64_t c = 0; c < n; ++c)
    chunks.push_back({layout.bytes * c / n, layout.bytes * (c + 1) / n});
  return chunks;
}

// The bytes of the ranges done across both passes, reported to a ReadProgress one range
// at a time (the ranges finish on several threads).
class ProgressTally {
 public:
  ProgressTally(ReadProgress progress, std::uint64_t total)
      : progress_(std::move(progress)), total_(total) {}
  void add(const ByteRange& range) { add(range.end - range.begin); }
  void add(std::uint64_t bytes) {
    if (!progress_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = std::min(total_, done_ + bytes);
    progress_(done_, total_);
  }
  // The bytes of a pass done: what its reports left out (gzip's last buffer) added.
  void finish_pass(int pass) {
    if (!progress_) return;
    const std::uint64_t at = total_ / 2 * static_cast<std::uint64_t>(pass);
    if (done_ < at) add(at - done_);
  }

 private:
  ReadProgress progress_;
  std::uint64_t total_ = 0, done_ = 0;
  std::mutex mutex_;
};

}  // namespace

TnsLayout read_tns_layout(const std::filesystem::path& path, std::span<const index_t> shape) {
  TnsLayout layout;
  layout.dims.assign(shape.begin(), shape.end());
  bool given = !shape.empty();  // by the caller, or by a "# shape:" line before the entries
  std::vector<std::string_view> fields;
  TextStream in(path, {});
  try {
    in.for_each_line(1, [&](std::string_view raw, std::uint64_t line, bool at_file_start) {
      if (!given) {
        layout.dims = declared_shape(raw);
        given = !layout.dims.empty();
      }
      split_fields(entry_text(raw, at_file_start), fields);
      if (fields.empty()) return true;
      if (fields.size() < 2) {
        fail(path, line,
             std::to_string(fields.size()) +
                 " column, expected the indices of an entry then its value");
      }
      layout.order = static_cast<int>(fields.size()) - 1;
      if (given && layout.dims.size() != fields.size() - 1) {
        fail(path, line,
             "the entries have " + std::to_string(layout.order) + " indices but the shape " +
                 (shape.empty() ? "declared" : "given") + " has " +
                 std::to_string(layout.dims.size()) + " sizes");
      }
      return false;
    });
  } catch (const LongLine& e) {
    e.raise(path);
  }
  if (layout.order == 0) {
    if (!given)
      throw IoError(quoted(path) + " holds no entries (no line with indices and a value)");
    layout.order = static_cast<int>(layout.dims.size());  // an empty tensor of that shape
  }
  layout.bytes = gzip_name(path) ? ByteRange::kWhole : std::filesystem::file_size(path);
  return layout;
}

LineCount count_tns_lines(const std::filesystem::path& path, ByteRange range,
                          const CompressedRead& compressed) {
  LineCount count;
  TextStream in(path, range);
  in.on_compressed(&compressed);
  try {
    in.for_each_line(1, [&](std::string_view raw, std::uint64_t, bool at_file_start) {
      ++count.lines;
      if (entry_text(raw, at_file_start).find_first_not_of(" \t") != std::string_view::npos)
        ++count.entries;
      return true;
    });
  } catch (const LongLine&) {
    // counted up to that line: parsing the range reports it with its number in the file
  }
  return count;
}

template <class T>
std::uint64_t parse_tns_lines(const std::filesystem::path& path, const TnsLayout& layout,
                              ByteRange range, std::uint64_t first_line,
                              std::span<index_t* const> idx, T* values, std::uint64_t capacity,
                              std::span<index_t> largest, const CompressedRead& compressed) {
  const int order = layout.order;
  const bool given = !layout.dims.empty();
  std::vector<std::string_view> fields;
  std::uint64_t k = 0;
  TextStream in(path, range);
  in.on_compressed(&compressed);
  try {
    in.for_each_line(first_line, [&](std::string_view raw, std::uint64_t line, bool at_file_start) {
      split_fields(entry_text(raw, at_file_start), fields);
      if (fields.empty()) return true;
      if (fields.size() != static_cast<std::size_t>(order) + 1) {
        fail(path, line,
             std::to_string(fields.size()) + " columns, expected " + std::to_string(order + 1) +
                 " (" + std::to_string(order) +
                 " indices and a value, as on the first entry's line)");
      }
      if (k == capacity) fail(path, line, "the file changed while it was being read");
      for (int n = 0; n < order; ++n) {
        const auto ns = static_cast<std::size_t>(n);
        const std::string_view f = fields[ns];
        const auto column = [n] { return "column " + std::to_string(n + 1) + ": "; };
        index_t i = 0;
        const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), i);
        const bool digits = end == f.data() + f.size();
        if (ec == std::errc::result_out_of_range && digits) {
          fail(path, line,
               column() + "index '" + printable(f) + "' is out of range (at most " +
                   std::to_string(std::numeric_limits<index_t>::max()) + ")");
        }
        if (ec != std::errc() || !digits) {
          fail(path, line, column() + "'" + printable(f) + "' is not an index (a whole number)");
        }
        if (i < 1)
          fail(path, line, column() + "index " + std::to_string(i) + " (.tns indices start at 1)");
        if (given && i > layout.dims[ns]) {
          fail(path, line,
               column() + "index " + std::to_string(i) + " exceeds the size " +
                   std::to_string(layout.dims[ns]) + " of mode " + std::to_string(n));
        }
        idx[ns][k] = i - 1;
        largest[ns] = std::max<index_t>(largest[ns], i);
      }
      const std::string_view f = fields.back();
      T value{};
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
      if (ec != std::errc() || end != f.data() + f.size() || !std::isfinite(value))
        fail(path, line, "column " + std::to_string(order + 1) + ": " + bad_value<T>(f));
      values[k++] = value;
      return true;
    });
  } catch (const LongLine& e) {
    e.raise(path);
  }
  return k;
}

}  // namespace tenfold::io::detail

namespace tenfold::io {

template <class T>
SparseTensor<T> load_tns(const std::filesystem::path& path, std::span<const index_t> shape,
                         const ReadProgress& progress) {
  using namespace detail;
  const TnsLayout layout = read_tns_layout(path, shape);
  // gzip: one range of unknown size, followed by the compressed bytes read
  const bool plain = layout.bytes != ByteRange::kWhole;
  ProgressTally tally(progress, 2 * (plain ? layout.bytes : std::filesystem::file_size(path)));
  const CompressedRead compressed =
      plain || !progress ? CompressedRead() : [&](std::uint64_t bytes) { tally.add(bytes); };
  const auto order = static_cast<std::size_t>(layout.order);
  // Pass 1, the ranges side by side: their lines (the first line number of each range)
  // and entries (where each range's entries go).
  const std::vector<ByteRange> chunks = chunks_of(layout);
  const auto n_chunks = static_cast<index_t>(chunks.size());
  std::vector<LineCount> counts(chunks.size());
  tenfold::detail::parallel_for(n_chunks, [&](index_t c) {
    counts[static_cast<std::size_t>(c)] =
        count_tns_lines(path, chunks[static_cast<std::size_t>(c)], compressed);
    if (plain) tally.add(chunks[static_cast<std::size_t>(c)]);
  });
  tally.finish_pass(1);
  std::vector<std::uint64_t> first_line(chunks.size()), first_entry(chunks.size());
  std::uint64_t lines = 0, nnz = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    first_line[c] = lines + 1;
    first_entry[c] = nnz;
    lines += counts[c].lines;
    nnz += counts[c].entries;
  }
  tenfold::detail::require_host_bytes(
      sparse_tensor_bytes(layout.order, static_cast<index_t>(nnz), sizeof(T)),
      "reading " + quoted(path) + " (" + std::to_string(lines) + " lines)");
  // Pass 2: each range parsed straight into its place in the tensor's arrays; the error of
  // the first failing range (the first bad line of the file) is thrown.
  std::vector<index_t> coords(order * nnz);
  std::vector<T> values(nnz);
  std::vector<std::vector<index_t>> largest(chunks.size(), std::vector<index_t>(order, 0));
  std::vector<std::exception_ptr> errors(chunks.size());
  tenfold::detail::parallel_for(n_chunks, [&](index_t ci) {
    const auto c = static_cast<std::size_t>(ci);
    std::vector<index_t*> idx(order);
    for (std::size_t n = 0; n < order; ++n) idx[n] = coords.data() + n * nnz + first_entry[c];
    try {
      const std::uint64_t got = parse_tns_lines<T>(path, layout, chunks[c], first_line[c], idx,
                                                   values.data() + first_entry[c],
                                                   counts[c].entries, largest[c], compressed);
      if (got != counts[c].entries)
        throw IoError(quoted(path) + " changed while it was being read");
      if (plain) tally.add(chunks[c]);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  tally.finish_pass(2);
  std::vector<index_t> dims = layout.dims;
  if (dims.empty()) {
    dims.assign(order, 0);
    for (const auto& l : largest)
      for (std::size_t n = 0; n < order; ++n) dims[n] = std::max(dims[n], l[n]);
  }
  try {
    return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
  } catch (const InvalidArgument& e) {
    throw IoError(quoted(path) + ": " + e.what());
  }
}

#define TENFOLD_INSTANTIATE_TNS_READ(T)                                                         \
  template std::uint64_t detail::parse_tns_lines<T>(                                            \
      const std::filesystem::path&, const detail::TnsLayout&, detail::ByteRange, std::uint64_t, \
      std::span<index_t* const>, T*, std::uint64_t, std::span<index_t>,                         \
      const detail::CompressedRead&);                                                           \
  template SparseTensor<T> load_tns<T>(const std::filesystem::path&, std::span<const index_t>,  \
                                       const ReadProgress&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_TNS_READ)

}  // namespace tenfold::io
