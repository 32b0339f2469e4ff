// The `tenfold parafac2` and `tenfold cmtf` commands: results and reports, and bad input
// refused with one line and no output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_run.hpp"
#include "random_matrix.hpp"
#include "temp_dir.hpp"
#include "tenfold/io.hpp"
#include "tenfold/ktensor.hpp"

namespace tenfold::test {
namespace {

namespace fs = std::filesystem;

// A C-order .npy of NumPy shape `shape` from values in C order.
void save_c_order(const fs::path& path, std::vector<index_t> shape, const std::vector<double>& v) {
  std::reverse(shape.begin(), shape.end());
  io::save_npy<double>(path, TensorView<const double>(v.data(), shape), io::NpyOrder::c_reversed);
}

// Slices X_k = P_k B diag(a_k) C^T (rank 2, J = 6) as slice_<k>.npy, C order.
void write_slices(const fs::path& dir, int count, index_t j) {
  fs::create_directories(dir);
  std::mt19937_64 gen(3);
  const Matrix<double> b = gaussian<double>(2, 2, 1.0, gen), c = gaussian<double>(j, 2, 1.0, gen);
  for (int k = 0; k < count; ++k) {
    const index_t ik = 7 + k % 4;
    const Matrix<double> p = orthonormal(ik, 2, gen);
    const double a[2] = {1.0 + 0.1 * k, 2.0 - 0.1 * k};
    std::vector<double> v(static_cast<std::size_t>(ik * j));
    for (index_t i = 0; i < ik; ++i)
      for (index_t jj = 0; jj < j; ++jj)
        for (index_t q = 0; q < 2; ++q)
          v[static_cast<std::size_t>(jj + j * i)] +=
              (p(i, 0) * b(0, q) + p(i, 1) * b(1, q)) * a[q] * c(jj, q);
    save_c_order(dir / ("slice_" + std::to_string(k) + ".npy"), {ik, j}, v);
  }
}

TEST(CliParafac2, FitsAFolderOfSlices) {
  TempDir dir;
  write_slices(dir / "slices", 12, 6);
  const CliRun r = tenfold_cli(
      dir, "parafac2 " + (dir / "slices").string() + " --rank 2 -q --out " + (dir / "r").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir / "r" / "report.json"));
  EXPECT_LT(j["relative_error"].get<double>(), 1e-6);
  EXPECT_EQ(j["slices"][10], "slice_10.npy");  // natural order
  EXPECT_TRUE(fs::exists(dir / "r" / "projection_11.npy"));
  io::NpyHeader h = io::read_npy_header(dir / "r" / "A.npy");
  EXPECT_EQ(h.shape, (std::vector<index_t>{12, 2}));
}

// CRC-32 (ZIP's), bit by bit.
std::uint32_t crc32_of(const std::string& s) {
  std::uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A stored (uncompressed) ZIP of the folder's files, as numpy.savez writes an .npz.
void write_npz(const fs::path& folder, const fs::path& npz) {
  std::string out, directory;
  const auto put = [](std::string& s, std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  int count = 0;
  for (int k = 0; fs::exists(folder / ("slice_" + std::to_string(k) + ".npy")); ++k, ++count) {
    const std::string name = "arr_" + std::to_string(k) + ".npy";
    const std::string data = slurp(folder / ("slice_" + std::to_string(k) + ".npy"));
    const auto offset = static_cast<std::uint32_t>(out.size());
    const std::uint32_t crc = crc32_of(data), size = static_cast<std::uint32_t>(data.size());
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4), put(out, crc, 4);
    put(out, size, 4), put(out, size, 4), put(out, static_cast<std::uint32_t>(name.size()), 2);
    put(out, 0, 2);
    out += name + data;
    put(directory, 0x02014b50, 4);
    put(directory, 20, 2), put(directory, 20, 2), put(directory, 0, 2), put(directory, 0, 2);
    put(directory, 0, 4), put(directory, crc, 4), put(directory, size, 4), put(directory, size, 4);
    put(directory, static_cast<std::uint32_t>(name.size()), 2), put(directory, 0, 2);
    put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 4);
    put(directory, offset, 4);
    directory += name;
  }
  const auto at = static_cast<std::uint32_t>(out.size());
  out += directory;
  put(out, 0x06054b50, 4), put(out, 0, 2), put(out, 0, 2);
  put(out, static_cast<std::uint32_t>(count), 2), put(out, static_cast<std::uint32_t>(count), 2);
  put(out, static_cast<std::uint32_t>(directory.size()), 4), put(out, at, 4), put(out, 0, 2);
  std::ofstream(npz, std::ios::binary) << out;
}

TEST(CliParafac2, ReadsAnNpzArchiveAsItsFolder) {
  TempDir dir;
  write_slices(dir / "slices", 12, 6);
  write_npz(dir / "slices", dir / "s.npz");
  const auto run = [&](const std::string& input, const std::string& out) {
    const CliRun r = tenfold_cli(dir, "parafac2 " + input + " --rank 2 -q --out " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(slurp(fs::path(out) / "report.json"));
  };
  const auto folder = run((dir / "slices").string(), (dir / "a").string());
  const auto npz = run((dir / "s.npz").string(), (dir / "b").string());
  EXPECT_EQ(npz["slices"][11], "arr_11.npy");
  EXPECT_EQ(npz["error_history"], folder["error_history"]);
}

TEST(CliCmtf, FitsACoupledTensorAndMatrix) {
  TempDir dir;
  std::mt19937_64 gen(5);
  const index_t i = 8, j = 5, k = 4, m = 6;
  const Matrix<double> a = gaussian<double>(i, 2, 1.0, gen), b = gaussian<double>(j, 2, 1.0, gen),
                       c = gaussian<double>(k, 2, 1.0, gen), v = gaussian<double>(m, 2, 1.0, gen);
  std::vector<double> x(static_cast<std::size_t>(i * j * k)), y(static_cast<std::size_t>(i * m));
  for (index_t q = 0; q < 2; ++q) {
    for (index_t s = 0; s < i; ++s) {
      for (index_t t = 0; t < j; ++t)
        for (index_t u = 0; u < k; ++u)
          x[static_cast<std::size_t>(u + k * (t + j * s))] += a(s, q) * b(t, q) * c(u, q);
      for (index_t t = 0; t < m; ++t) y[static_cast<std::size_t>(t + m * s)] += a(s, q) * v(t, q);
    }
  }
  save_c_order(dir / "x.npy", {i, j, k}, x);
  save_c_order(dir / "y.npy", {i, m}, y);
  const CliRun r = tenfold_cli(dir, "cmtf " + (dir / "x.npy").string() + " " +
                                        (dir / "y.npy").string() + " --rank 2 --tol 1e-14 " +
                                        "--max-iters 500 -q --out " + (dir / "r").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rep = nlohmann::json::parse(slurp(dir / "r" / "report.json"));
  EXPECT_LT(rep["relative_error"].get<double>(), 1e-5);
  EXPECT_EQ(io::read_npy_header(dir / "r" / "V.npy").shape, (std::vector<index_t>{m, 2}));
}

TEST(CliParafac2Cmtf, BadInputGivesOneLineAndNoOutput) {
  TempDir dir;
  write_slices(dir / "ragged", 3, 6);
  save_c_order(dir / "ragged" / "slice_3.npy", {4, 5}, std::vector<double>(20, 1.0));
  write_slices(dir / "ok", 3, 6);
  write_slices(dir / "nan", 3, 6);
  save_c_order(dir / "nan" / "slice_3.npy", {2, 6}, {1, 2, 3, NAN, 5, 6, 7, 8, 9, 10, 11, 12});
  save_c_order(dir / "x.npy", {4, 3, 2}, std::vector<double>(24, 1.0));
  save_c_order(dir / "y.npy", {5, 2}, std::vector<double>(10, 1.0));
  const std::string out = " --out " + (dir / "o").string();
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"parafac2 " + (dir / "ragged").string() + " --rank 2", "slice 3 has 5 columns"},
      {"parafac2 " + (dir / "nan").string() + " --rank 2", "slice 'slice_3.npy': "},
      {"parafac2 " + (dir / "ok").string() + " --rank 7", "J = 6, got 7"},
      {"cmtf " + (dir / "x.npy").string() + " " + (dir / "y.npy").string() + " --rank 2",
       "share their first axis"},
  };
  for (const Case& c : cases) {
    const CliRun r = tenfold_cli(dir, c.args + out);
    EXPECT_EQ(r.code, 1) << c.args;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
}

}  // namespace
}  // namespace tenfold::test
