// The third round of bad inputs: sparse files, the starts and ranks of CP-APR and GCP,
// hyper-sparse and zero tensors in CP-ALS. Each case failed before its fix.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/cp_apr.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"
#include "tenfold/sparse.hpp"

#ifdef TENFOLD_TEST_ZLIB
#include <zlib.h>
#endif

namespace tenfold {
namespace {

using test::expect_throw_with;

std::filesystem::path write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

// The text of `lines` entries "i j k v" with values that have several digits.
std::string tns_text(int lines) {
  std::string text;
  for (int k = 0; k < lines; ++k) {
    text += std::to_string(k % 7 + 1) + " " + std::to_string(k % 5 + 1) + " " +
            std::to_string(k % 3 + 1) + " " + std::to_string(k) + "72.5\n";
  }
  return text;
}

#ifdef TENFOLD_TEST_ZLIB
std::string gzip(const std::string& text) {
  uLongf size = compressBound(static_cast<uLong>(text.size())) + 32;
  std::string out(size, '\0');
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(BadSparseFiles, TruncatedGzipIsRefused) {
  TempDir dir;
  const std::string whole = gzip(tns_text(2000));
  EXPECT_EQ(io::load_tns<double>(write(dir, "whole.tns.gz", whole)).values(),
            io::load_tns<double>(write(dir, "whole.tns", tns_text(2000))).values());
  for (const std::size_t cut : {whole.size() / 2, whole.size() - 4}) {
    expect_throw_with<IoError>(
        [&] { io::load_tns<double>(write(dir, "cut.tns.gz", whole.substr(0, cut))); },
        "is truncated: its gzip stream ends before the end marker");
  }
}
#endif

TEST(BadSparseFiles, ALongLineIsRefusedInLinearTime) {
  TempDir dir;
  // 64 MiB of digits without a newline: refused at the first MiB, not rescanned.
  expect_throw_with<IoError>(
      [&] { io::load_tns<double>(write(dir, "long.tns", std::string(64 << 20, '7'))); },
      "line 1: longer than 1 MiB without a line break");
  // Lines split across the 1 MiB blocks are read whole.
  const std::string text = tns_text(200000);
  ASSERT_GT(text.size(), 2u << 20);
  const SparseTensor<double> x = io::load_tns<double>(write(dir, "many.tns", text));
  EXPECT_EQ(x.dims(), (std::vector<index_t>{7, 5, 3}));
}

TEST(BadSparseFiles, CommentsByteOrderMarkAndCaseOfTheExtension) {
  TempDir dir;
  const SparseTensor<double> x =
      io::load_sparse_file<double>(write(dir, "C.TNS",
                                         "\xEF\xBB\xBF"
                                         "1 1 1 1.5 # first\n2 2 2 2.5\t# second\n"));
  EXPECT_EQ(x.values(), (std::vector<double>{1.5, 2.5}));
  EXPECT_TRUE(io::is_sparse_file(dir / "X.Tns.GZ"));
  // Y.TFSPARSE is written and read as the binary form.
  io::save_sparse_file(dir / "Y.TFSPARSE", x);
  std::ifstream bytes(dir / "Y.TFSPARSE", std::ios::binary);
  std::string magic(8, '\0');
  bytes.read(magic.data(), 8);
  EXPECT_EQ(magic, "TFSPARSE");
  EXPECT_EQ(io::load_sparse_file<double>(dir / "Y.TFSPARSE").values(), x.values());
  expect_throw_with<IoError>([&] { io::save_sparse_file(dir / "y.txt", x); },
                             "cannot tell the format to write");
}

TEST(BadSparseFiles, MessagesSayWhatIsWrongWithTheField) {
  TempDir dir;
  const auto load = [&](const std::string& text) {
    return [&dir, text] { io::load_tns<double>(write(dir, "b.tns", text)); };
  };
  expect_throw_with<IoError>(load("9223372036854775808 1 1 1\n"),
                             "column 1: index '9223372036854775808' is out of range (at most "
                             "9223372036854775807)");
  expect_throw_with<IoError>(load("1 1 1 1e-400\n"), "column 4: '1e-400' underflows float64");
  expect_throw_with<IoError>(load("1 1 1 1e400\n"), "column 4: '1e400' overflows float64");
  expect_throw_with<IoError>([&] { io::load_tns<float>(write(dir, "f.tns", "1 1 1 1e-50\n")); },
                             "'1e-50' underflows float32");
  expect_throw_with<IoError>(load("1 1 1 nan\n"), "column 4: 'nan' is NaN");
  expect_throw_with<IoError>(load("1 1 1 abc\n"), "column 4: 'abc' is not a number");
  expect_throw_with<IoError>(load(std::string("1 \x00"
                                              "2 1 1\n",
                                              9)),
                             "column 2: '\\x002' is not an index");
  expect_throw_with<IoError>(load("1 2\r3 1 1\n"), "column 2: '2\\x0d3' is not an index");
}

TEST(BadSparseFiles, DuplicatesWhoseSumOverflowsAreRefused) {
  TempDir dir;
  expect_throw_with<IoError>(
      [&] { io::load_tns<double>(write(dir, "d.tns", "1 1 1 1e308\n2 2 2 1\n1 1 1 1e308\n")); },
      "the duplicate entries at index (0, 0, 0) sum to +Inf");
  expect_throw_with<InvalidArgument>(
      [] {
        SparseTensor<float>({2}, {1, 1}, {-3e38f, -3e38f});
      },
      "the duplicate entries at index (1) sum to -Inf: their sum overflows float32");
}

TEST(BadSparseFiles, TnsKeepsTheShapeAndEmptyTensors) {
  TempDir dir;
  const SparseTensor<double> x({10, 5, 5}, {0, 1, 2, 0, 1, 2, 0, 1, 1}, {1.0, 2.0, 3.0});
  const SparseTensor<double> empty({4, 3}, {}, {});
  std::vector<std::string> names = {"x.tns"};
#ifdef TENFOLD_TEST_ZLIB
  names.push_back("x.tns.gz");
#endif
  for (const std::string& name : names) {
    io::save_tns(dir / name, x);
    EXPECT_EQ(io::load_sparse_file<double>(dir / name).dims(), x.dims()) << name;
    io::save_tns(dir / name, empty);
    const SparseTensor<double> e = io::load_sparse_file<double>(dir / name);
    EXPECT_EQ(e.dims(), empty.dims()) << name;
    EXPECT_EQ(e.nnz(), 0) << name;
  }
  // A shape given wins over the file's; a binary file must match it.
  const std::vector<index_t> larger = {12, 6, 5};
  io::save_tns(dir / "x.tns", x);
  EXPECT_EQ(io::load_sparse_file<double>(dir / "x.tns", larger).dims(), larger);
  io::save_sparse(dir / "x.tfsparse", x);
  expect_throw_with<IoError>([&] { io::load_sparse_file<double>(dir / "x.tfsparse", larger); },
                             "holds a tensor of shape (10, 5, 5), not the shape given (12, 6, 5)");
}

// Three nonzeros in distinct fibres: every default start misses them in some mode.
SparseTensor<double> three_nonzeros() {
  return SparseTensor<double>({3, 3, 3}, {0, 1, 2, 0, 1, 2, 1, 2, 0}, {1.0, 2.0, 3.0});
}

TEST(BadCpInputs, HyperSparseTensorsGetANonzeroModel) {
  CpOptions o;
  o.rank = 1;
  const CpResult<double> r = cp_als(three_nonzeros(), o);
  // The best rank-1 model keeps the largest entry: fit 1 - sqrt(1 + 4) / sqrt(14).
  EXPECT_NEAR(r.fit, 1.0 - std::sqrt(5.0 / 14.0), 1e-12);
  EXPECT_NEAR(r.model.weights[0], 3.0, 1e-12);
  // The same from a dense copy.
  const Tensor<double> dense = three_nonzeros().full();
  EXPECT_NEAR(cp_als(dense, o).fit, 1.0 - std::sqrt(5.0 / 14.0), 1e-12);
}

TEST(BadCpInputs, TheZeroTensorIsRefused) {
  CpOptions o;
  o.rank = 1;
  expect_throw_with<InvalidArgument>(
      [&] {
        cp_als(Tensor<double>({3, 4, 2}), o);
      },
      "the tensor is zero");
}

TEST(BadCpInputs, CpAprRefusesStartsThatCannotMoveAndCountsItCannotHold) {
  const SparseTensor<double> x = three_nonzeros();
  CpAprOptions o;
  o.rank = 2;
  std::vector<Matrix<double>> start(3, Matrix<double>(3, 2));
  for (Matrix<double>& f : start)
    for (double& v : f.values()) v = 1.0;
  for (index_t i = 0; i < 3; ++i) start[1](i, 1) = 0.0;
  expect_throw_with<InvalidArgument>([&] { cp_apr(x, o, start); },
                                     "CP-APR: column 1 of initial factor 1 is zero");
  start[1](0, 1) = -1.0;
  expect_throw_with<InvalidArgument>([&] { cp_apr(x, o, start); },
                                     "CP-APR needs a nonnegative start");
  const SparseTensor<double> huge({2, 2}, {0, 1, 0, 1}, {1e308, 1.5e308});
  expect_throw_with<InvalidArgument>([&] { cp_apr(huge, o); }, "scale the counts down");
  o.rank = 10;
  expect_throw_with<InvalidOption>([&] { cp_apr(x, o); }, "rank 10 exceeds 9");
  o.rank = 0;
  expect_throw_with<InvalidOption>([&] { cp_apr(x, o); }, "rank must be at least 1, got 0");
}

TEST(BadCpInputs, GcpRefusesStartsThatCannotMoveAndRanksNoTensorNeeds) {
  const Tensor<double> x = three_nonzeros().full();
  GcpOptions o;
  o.rank = 2;
  std::vector<Matrix<double>> zeros(3, Matrix<double>(3, 2));
  expect_throw_with<InvalidArgument>([&] { gcp(x, o, zeros); },
                                     "column 0 of initial factors 0, 1 and 2 is zero");
  std::vector<Matrix<double>> negative = zeros;
  for (Matrix<double>& f : negative)
    for (double& v : f.values()) v = -0.5;
  o.loss = GcpLoss::gamma;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o, negative); },
                                     "GCP with the gamma loss needs a nonnegative start");
  o.loss = GcpLoss::rayleigh;
  expect_throw_with<InvalidArgument>([&] { gcp(x, o, zeros); }, "could never leave zero");
  o.rank = 100000;
  expect_throw_with<InvalidOption>([&] { gcp(x, o); }, "rank 100000 exceeds 9");
  expect_throw_with<InvalidOption>([&] { gcp(three_nonzeros(), o); }, "rank 100000 exceeds 9");
}

}  // namespace
}  // namespace tenfold
