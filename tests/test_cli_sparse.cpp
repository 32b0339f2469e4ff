// `tenfold cp` on sparse files and `tenfold cp-apr`, run as a user runs them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"

namespace {

// Counts of a rank-2 Poisson model, 1-based .tns and the same tensor as a .npy.
void write_counts(const TempDir& dir) {
  const tenfold::index_t i = 8, j = 7, k = 6;
  tenfold::Tensor<double> x({i, j, k});
  std::ofstream tns(dir / "x.tns");
  for (tenfold::index_t c = 0; c < k; ++c)
    for (tenfold::index_t b = 0; b < j; ++b)
      for (tenfold::index_t a = 0; a < i; ++a) {
        const double v = static_cast<double>(((a < 4) == (b < 3)) * ((a + 2 * b + 3 * c) % 5));
        x(a, b, c) = v;
        if (v != 0) tns << a + 1 << ' ' << b + 1 << ' ' << c + 1 << ' ' << v << '\n';
      }
  tenfold::io::save_npy<double>(dir / "x.npy", x.view());  // Fortran order
}

nlohmann::json report(const TempDir& dir, const std::string& out) {
  return nlohmann::json::parse(slurp(dir / out / "report.json"));
}

TEST(CliSparse, CpOfATnsFileWritesFactorsPerAxis) {
  TempDir dir;
  write_counts(dir);
  const CliRun r = tenfold_cli(
      dir, "cp " + (dir / "x.tns").string() + " --rank 2 -q -o " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = report(dir, "out");
  EXPECT_EQ(j["format"], "sparse");
  EXPECT_EQ(j["shape"], (std::vector<int>{8, 7, 6}));
  const auto f = tenfold::io::load_npy<double>(dir / "out" / "factor_1.npy");
  EXPECT_EQ(f.numel(), 7 * 2);
  // The dense file gives the same fit (same start: nvecs).
  const CliRun d = tenfold_cli(
      dir, "cp " + (dir / "x.npy").string() + " --rank 2 -q -o " + (dir / "dense").string());
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NEAR(j["fit"].get<double>(), report(dir, "dense")["fit"].get<double>(), 1e-8);
}

// --csf one and two: said on stderr and in the report, the fit of --csf all; a dense input
// refuses --csf.
TEST(CliSparse, CsfLayoutsOneAndTwoFitAsAll) {
  TempDir dir;
  write_counts(dir);
  const std::string x = (dir / "x.tns").string();
  for (const char* csf : {"all", "two", "one"}) {
    const CliRun r =
        tenfold_cli(dir, "cp " + x + " --rank 2 --csf " + csf + " -o " + (dir / csf).string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find(std::string("(--csf ") + csf + ")"), std::string::npos) << r.err;
    EXPECT_EQ(report(dir, csf)["csf"], csf);
  }
  for (const char* csf : {"two", "one"}) {
    EXPECT_NEAR(report(dir, csf)["fit"].get<double>(), report(dir, "all")["fit"].get<double>(),
                1e-10)
        << csf;
  }
  const CliRun d = tenfold_cli(
      dir, "cp " + (dir / "x.npy").string() + " --rank 2 --csf one -o " + (dir / "d").string());
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_NE(d.err.find("--csf applies to sparse inputs"), std::string::npos) << d.err;
}

TEST(CliSparse, CpAprOfSparseAndDenseCountsAgree) {
  TempDir dir;
  write_counts(dir);
  for (const char* name : {"x.tns", "x.npy"}) {
    const CliRun r =
        tenfold_cli(dir, std::string("cp-apr ") + (dir / name).string() + " --rank 2 -q -o " +
                             (dir / (std::string(name) + ".out")).string());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const nlohmann::json a = report(dir, "x.tns.out"), b = report(dir, "x.npy.out");
  EXPECT_EQ(a["log_likelihood"], b["log_likelihood"]);  // the same nonzeros, same arithmetic
  EXPECT_EQ(a["nnz"], b["nnz"]);
}

TEST(CliSparse, GcpOfCountsWritesTheModelOnTheLinkScale) {
  TempDir dir;
  write_counts(dir);
  const CliRun r = tenfold_cli(dir, "gcp " + (dir / "x.npy").string() +
                                        " --rank 2 --loss poisson -q -o " + (dir / "g").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = report(dir, "g");
  EXPECT_EQ(j["loss"], "poisson");
  const auto& h = j["objective_history"];
  ASSERT_GE(h.size(), 2u);
  EXPECT_LT(h.back().get<double>(), h.front().get<double>());
  EXPECT_TRUE(std::filesystem::exists(dir / "g" / "factor_2.npy"));
}

// The sparse file through stochastic GCP (epochs), the dense one with NaN as missing
// entries, and the gamma loss's nonnegative factors.
TEST(CliSparse, GcpOfASparseFileAndOfADenseOneWithMissingEntries) {
  TempDir dir;
  write_counts(dir);
  const CliRun s = tenfold_cli(dir, "gcp " + (dir / "x.tns").string() +
                                        " --rank 2 --loss poisson --max-iters 5 --epoch-iters 50 "
                                        "--gradient-samples 100 -q -o " +
                                        (dir / "s").string());
  ASSERT_EQ(s.code, 0) << s.err;
  const nlohmann::json js = report(dir, "s");
  const tenfold::Tensor<double> dense = tenfold::io::load_npy<double>(dir / "x.npy");
  EXPECT_EQ(js["nnz"], tenfold::SparseTensor<double>::from_dense(dense.view()).nnz());
  EXPECT_LE(js["iterations"].get<int>(), 5);
  EXPECT_NE(s.out.find("objective estimate"), std::string::npos) << s.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "s" / "factor_2.npy"));

  tenfold::Tensor<double> x = dense;
  x(1, 2, 3) = std::numeric_limits<double>::quiet_NaN();
  tenfold::io::save_npy<double>(dir / "nan.npy", x.view());
  const CliRun m =
      tenfold_cli(dir, "gcp " + (dir / "nan.npy").string() +
                           " --rank 2 --loss gamma --missing nan -q -o " + (dir / "m").string());
  ASSERT_EQ(m.code, 0) << m.err;
  const nlohmann::json jm = report(dir, "m");
  EXPECT_EQ(jm["observed"], 8 * 7 * 6 - 1);
  EXPECT_TRUE(std::isfinite(jm["objective"].get<double>()));
  const auto f = tenfold::io::load_npy<double>(dir / "m" / "factor_0.npy");
  for (tenfold::index_t i = 0; i < f.numel(); ++i) EXPECT_GE(f[i], 0.0);
}

TEST(CliSparse, BadInputGetsOneLine) {
  TempDir dir;
  std::ofstream(dir / "cols.tns") << "1 1 1 2\n1 2 3\n";
  std::ofstream(dir / "neg.tns") << "1 1 1 2\n1 2 3 -4\n";
  std::ofstream(dir / "zero.tns") << "0 1 1 2\n";
  tenfold::Tensor<double> half({3, 4, 5});
  half(0, 1, 2) = 0.5;
  tenfold::io::save_npy<double>(dir / "half.npy", half.view(), tenfold::io::NpyOrder::c_reversed);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cp " + (dir / "cols.tns").string() + " --rank 1", "line 2: 3 columns, expected 4"},
      {"cp " + (dir / "zero.tns").string() + " --rank 1", "index 0 (.tns indices start at 1)"},
      {"cp-apr " + (dir / "neg.tns").string() + " --rank 1",
       "needs nonnegative counts; the entry at (0, 1, 2) is -4"},
      {"cp " + (dir / "neg.tns").string() + " --rank 1 --missing nan",
       "--missing does not apply to a sparse input"},
      {"cp " + (dir / "neg.tns").string() + " --rank 1 --solver sampled",
       "--solver sampled applies to dense .npy inputs only"},
      // C order: tenfold's (0, 1, 2) is NumPy's [2, 1, 0]
      {"gcp " + (dir / "half.npy").string() + " --rank 1 --loss bernoulli",
       "--loss bernoulli needs binary data (0 or 1); the entry at NumPy index [2, 1, 0]"},
      {"gcp " + (dir / "neg.tns").string() + " --rank 1 --loss rayleigh",
       "rayleigh loss needs nonnegative data; the entry at (0, 1, 2) is -4"},
      {"gcp " + (dir / "neg.tns").string() + " --rank 1 --missing nan",
       "--missing does not apply to a sparse input"},
      {"gcp " + (dir / "half.npy").string() + " --rank 1 --loss huber --huber-delta 0",
       "--huber-delta must be positive, got 0"},
      {"gcp " + (dir / "cols.tns").string() + " --rank 1", "line 2: 3 columns, expected 4"},
  };
  for (const auto& [args, needle] : cases) {
    const CliRun r = tenfold_cli(dir, args + " -o " + (dir / "o").string());
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "o"));
  }
}

// Flags and limits of the sparse commands (third round of bad inputs).
TEST(CliSparse, ShapeFlagRankLimitsAndOutputsCheckedFirst) {
  TempDir dir;
  write_counts(dir);
  const std::string x = (dir / "x.tns").string(), out = (dir / "o").string();
  // --shape keeps trailing empty slices; a .npy has its own shape (usage error).
  CliRun r = tenfold_cli(dir, "cp " + x + " --rank 2 -q --shape 10,7,6 -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(report(dir, "o")["shape"], (std::vector<int>{10, 7, 6}));
  EXPECT_EQ(tenfold::io::load_npy<double>(dir / "o" / "factor_0.npy").numel(), 10 * 2);
  r = tenfold_cli(
      dir, "cp " + (dir / "x.npy").string() + " --rank 2 --shape 8,7,6 -o " + (dir / "d").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--shape applies to sparse inputs"), std::string::npos) << r.err;
  r = tenfold_cli(dir, "cp-apr " + x + " --rank 2 --shape 8,0,6 -o " + (dir / "d").string());
  EXPECT_EQ(r.code, 2) << r.err;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cp-apr " + x + " --rank 0", "--rank must be at least 1, got 0"},
      {"cp-apr " + x + " --rank 100000", "--rank 100000 exceeds 42"},
      {"gcp " + x + " --rank 100000", "--rank 100000 exceeds 42"},
      {"cp-apr " + x + " --rank 2 --tol 0", "--tol must be finite and > 0, got 0"},
      // /proc refuses a new file even to root: refused before any epoch runs.
      {"gcp " + x + " --rank 2 -o /proc/tenfold-test", "cannot create --out '/proc/tenfold-test'"},
  };
  for (const auto& [args, needle] : cases) {
    r = tenfold_cli(dir, args + (args.find(" -o ") == std::string::npos ? " -o " + out + "2" : ""));
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

// ASan reserves more address space than the limit (GCC says so by __SANITIZE_ADDRESS__,
// clang by __has_feature)
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENFOLD_TEST_UNDER_ASAN
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(TENFOLD_TEST_UNDER_ASAN)
TEST(CliSparse, ThreadsTheSystemRefusesAreOneLine) {
  TempDir dir;
  write_counts(dir);
  const std::string cmd = "ulimit -v 8000000; OMP_NUM_THREADS=5000 " + std::string(TENFOLD_CLI) +
                          " cp " + (dir / "x.tns").string() + " --rank 2 -q -o " +
                          (dir / "t").string();
  // (the program runs once for --version, then under the limit: the shell's last command)
  const CliRun t = tenfold_cli(dir, "--version >/dev/null; " + cmd);
  EXPECT_EQ(t.code, 1) << t.err;
  EXPECT_EQ(t.err_lines(), 1) << t.err;
  EXPECT_NE(t.err.find("cannot start thread"), std::string::npos) << t.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "t"));
}
#endif

}  // namespace
