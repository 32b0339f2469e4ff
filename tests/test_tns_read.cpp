// .tns files read by byte ranges: any split of a file gives the lines and entries of the
// whole, errors name the line in the file, and load_tns (ranges on the thread pool)
// gives the same tensor for any thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "expect_throw.hpp"
#include "sparse/sparse_read.hpp"
#include "temp_dir.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/threads.hpp"

namespace tenfold {
namespace {

using io::detail::ByteRange;
using test::expect_throw_with;

// Entries parsed from ranges: coords per mode and values, in file order.
struct Parsed {
  std::vector<std::vector<index_t>> idx;
  std::vector<double> values;
  std::uint64_t lines = 0;
};

// The ranges [0, s), [s, e), [e, end) counted, then parsed with their first lines' numbers.
Parsed parse_split(const std::filesystem::path& path, std::vector<std::uint64_t> cuts) {
  const io::detail::TnsLayout layout = io::detail::read_tns_layout(path, {});
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(layout.bytes);
  Parsed out;
  out.idx.resize(static_cast<std::size_t>(layout.order));
  for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
    const ByteRange range{cuts[r], cuts[r + 1]};
    const io::detail::LineCount count = io::detail::count_tns_lines(path, range);
    std::vector<std::vector<index_t>> idx(out.idx.size(), std::vector<index_t>(count.entries + 1));
    std::vector<index_t*> ptr;
    for (auto& v : idx) ptr.push_back(v.data());
    std::vector<double> values(count.entries + 1);
    std::vector<index_t> largest(out.idx.size(), 0);
    const std::uint64_t got = io::detail::parse_tns_lines<double>(
        path, layout, range, out.lines + 1, ptr, values.data(), count.entries, largest);
    EXPECT_EQ(got, count.entries);
    for (std::size_t n = 0; n < idx.size(); ++n)
      out.idx[n].insert(out.idx[n].end(), idx[n].begin(), idx[n].begin() + got);
    out.values.insert(out.values.end(), values.begin(), values.begin() + got);
    out.lines += count.lines;
  }
  return out;
}

TEST(TnsRanges, EverySplitGivesTheWholeFile) {
  TempDir dir;
  // A byte order mark, comments, a declared shape, blank and blank-looking lines, CRLF,
  // tabs and a last line without a line break.
  const std::string text =
      "\xEF\xBB\xBF# shape: 4 3 5\n# a comment\n1 1 1 2.5\n\n  \r\n2 3 1 1\r\n"
      "3\t2 5 -4 # trailing\n# 9 9 9 9\n1 1 1 0.5\n4 1 4 -1e-3";
  std::ofstream(dir / "a.tns", std::ios::binary) << text;
  const Parsed whole = parse_split(dir / "a.tns", {});
  EXPECT_EQ(whole.lines, 10u);
  EXPECT_EQ(whole.values, (std::vector<double>{2.5, 1, -4, 0.5, -1e-3}));
  EXPECT_EQ(whole.idx[2], (std::vector<index_t>{0, 0, 4, 0, 3}));
  for (std::uint64_t s = 0; s <= text.size(); ++s) {
    for (std::uint64_t e = s; e <= text.size(); e += 7) {
      const Parsed p = parse_split(dir / "a.tns", {s, e});
      EXPECT_EQ(p.lines, whole.lines) << s << " " << e;
      EXPECT_EQ(p.values, whole.values) << s << " " << e;
      EXPECT_EQ(p.idx, whole.idx) << s << " " << e;
    }
  }
}

TEST(TnsRanges, ErrorsNameTheLineInTheFile) {
  TempDir dir;
  std::ofstream(dir / "b.tns") << "# c\n1 2 3 1\n\n1 2 3 1\n1 2 1\n1 1 1 1\n";
  for (std::uint64_t s = 0; s < 30; ++s) {
    expect_throw_with<IoError>([&] { parse_split(dir / "b.tns", {s}); },
                               "line 5: 3 columns, expected 4");
  }
}

// A file of several of load_tns's 8 MiB ranges, with comments and CRLF lines.
std::string many_lines(std::size_t n, std::size_t bad_line) {
  std::string text = "# shape: 1000 900 800\n";
  for (std::size_t k = 2; k <= n; ++k) {
    if (k == bad_line) {
      text += "1 2 0 1.5\n";
    } else if (k % 1000 == 0) {
      text += "# comment line\r\n";
    } else {
      text += std::to_string(k % 1000 + 1) + " " + std::to_string(k % 900 + 1) + " " +
              std::to_string(k / 1000 % 800 + 1) + " " +
              std::to_string(0.25 * static_cast<double>(k % 17)) + (k % 3 == 0 ? "\r\n" : "\n");
    }
  }
  return text;
}

TEST(TnsRanges, LoadTnsIsTheSameForAnyThreadCount) {
  TempDir dir;
  constexpr std::size_t kLines = 1'200'000;  // about 20 MB: three ranges
  std::ofstream(dir / "big.tns", std::ios::binary) << many_lines(kLines, 0);
  const int threads = num_threads();
  set_num_threads(1);
  const SparseTensor<double> one = io::load_tns<double>(dir / "big.tns");
  set_num_threads(3);
  const SparseTensor<double> three = io::load_tns<double>(dir / "big.tns");
  set_num_threads(threads);
  EXPECT_EQ(one.dims(), (std::vector<index_t>{1000, 900, 800}));
  EXPECT_EQ(one.coords(), three.coords());
  EXPECT_EQ(one.values(), three.values());
  // The bad line in the last range is named by its number in the file.
  std::ofstream(dir / "bad.tns", std::ios::binary) << many_lines(kLines, kLines - 5);
  expect_throw_with<IoError>(
      [&] { io::load_tns<double>(dir / "bad.tns"); },
      "line " + std::to_string(kLines - 5) + ": column 3: index 0 (.tns indices start at 1)");
}

TEST(TnsRanges, ProgressCountsBothPassesOfEveryRange) {
  // Each range of each pass reported once, the bytes done rising to twice the file's size;
  // a gzip file (one range of unknown size) by the compressed bytes read, block by block.
  TempDir dir;
  std::ofstream(dir / "big.tns", std::ios::binary) << many_lines(1'200'000, 0);
  const std::uint64_t size = std::filesystem::file_size(dir / "big.tns");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  const SparseTensor<double> x = io::load_tns<double>(
      dir / "big.tns", {},
      [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(x.dims(), (std::vector<index_t>{1000, 900, 800}));
  ASSERT_EQ(calls.size(), 6u);  // three ranges of about 8 MiB, counted then parsed
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, 2 * size);
    if (i > 0) EXPECT_GT(calls[i].first, calls[i - 1].first);
  }
  EXPECT_EQ(calls.back().first, 2 * size);
#ifdef TENFOLD_TEST_ZLIB
  io::save_tns<double>(dir / "big.tns.gz", x);
  const std::uint64_t packed = std::filesystem::file_size(dir / "big.tns.gz");
  calls.clear();
  const SparseTensor<double> y = io::load_sparse_file<double>(
      dir / "big.tns.gz", {},
      [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(y.values(), x.values());
  // zlib reads the compressed file in blocks of 256 KiB: several reports a pass
  ASSERT_GT(packed, std::uint64_t{4} << 18);
  ASSERT_GE(calls.size(), 8u);
  bool first_pass_done = false;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, 2 * packed);
    if (i > 0) EXPECT_GT(calls[i].first, calls[i - 1].first);
    first_pass_done = first_pass_done || calls[i].first == packed;
  }
  EXPECT_TRUE(first_pass_done) << "no report at the end of the first pass";
  EXPECT_EQ(calls.back().first, 2 * packed);
#endif
}

}  // namespace
}  // namespace tenfold
