// `tenfold cp` with missing values, a non-negative model, several starts and the line
// search: flags, report.json fields and messages.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "temp_dir.hpp"
#include "tenfold/io.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kCovid = fs::path(TENFOLD_TEST_DATA_DIR) / "COVID19_data.npy";
const fs::path kIl2 = fs::path(TENFOLD_TEST_DATA_DIR) / "IL2_Response_Tensor.npy";

nlohmann::json report(const TempDir& dir) {
  return nlohmann::json::parse(slurp(dir / "o/report.json"));
}

// `tenfold cp` of the COVID-19 tensor with `flags`, quiet, into DIR/o (replacing an
// earlier result): its report, or an empty one (and a failure) when the run fails.
nlohmann::json covid_cp(const TempDir& dir, const std::string& flags) {
  fs::remove_all(dir / "o");
  const CliRun r =
      tenfold_cli(dir, "cp " + kCovid.string() + " " + flags + " -q --out " + (dir / "o").string());
  EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
  return r.code == 0 ? report(dir) : nlohmann::json::object();
}

// `tenfold cp` of the COVID-19 tensor with `flags` is refused with one line saying `says`.
// Flags that cannot be combined: a usage error naming both.
void expect_covid_cp_refused(const TempDir& dir, const std::string& flags,
                             const std::string& says) {
  const CliRun bad =
      tenfold_cli(dir, "cp " + kCovid.string() + " " + flags + " -q --out " + (dir / "p").string());
  EXPECT_EQ(bad.code, 2) << flags;
  EXPECT_EQ(bad.err_lines(), 1) << bad.err;
  EXPECT_NE(bad.err.find(says), std::string::npos) << bad.err;
}

TEST(CliCpVariants, Il2WithMissingValues) {
  TempDir dir;
  // Without the flag a NaN is refused, and the message names the flag.
  const CliRun refused =
      tenfold_cli(dir, "cp " + kIl2.string() + " --rank 3 -q --out " + (dir / "o").string());
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.err_lines(), 1) << refused.err;
  EXPECT_NE(refused.err.find("--missing nan"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir / "o/report.json"));

  const CliRun r = tenfold_cli(dir, "cp " + kIl2.string() +
                                        " --rank 3 --missing nan --max-iters 2000 --tol 1e-10 "
                                        "-q --out " +
                                        (dir / "o").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = report(dir);
  EXPECT_EQ(j["missing"], "nan");
  EXPECT_EQ(j["observed_entries"], 13 * 4 * 12 * 8 - 192);
  EXPECT_EQ(j["init"], "nvecs");
  // The library test measures 0.7637 at rank 3 with the same settings.
  EXPECT_NEAR(j["fit"].get<double>(), 0.7637, 0.01);
  const tenfold::Tensor<double> f0 = tenfold::io::load_npy<double>(dir / "o/factor_0.npy");
  for (double v : f0.values()) EXPECT_TRUE(std::isfinite(v));
}

TEST(CliCpVariants, DegenerateSolutionIsReported) {
  TempDir dir;
  const std::string out = " --max-iters 1000 --tol 1e-8 -q --out " + (dir / "o").string();
  // COVID-19 at rank 3 has no best approximation: two components grow and cancel.
  const CliRun degenerate = tenfold_cli(dir, "cp " + kCovid.string() + " --rank 3" + out);
  ASSERT_EQ(degenerate.code, 0) << degenerate.err;
  nlohmann::json j = report(dir)["most_negative_congruence"];
  EXPECT_LT(j["congruence"].get<double>(), -0.85);
  EXPECT_EQ(degenerate.err_lines(), 1) << degenerate.err;
  EXPECT_NE(degenerate.err.find("nearly cancel"), std::string::npos) << degenerate.err;
  // At rank 2 the components are far from cancelling: no warning.
  fs::remove_all(dir / "o");
  const CliRun clean = tenfold_cli(dir, "cp " + kCovid.string() + " --rank 2" + out);
  ASSERT_EQ(clean.code, 0) << clean.err;
  EXPECT_GT(report(dir)["most_negative_congruence"]["congruence"].get<double>(), -0.5);
  EXPECT_EQ(clean.err, "");
}

TEST(CliCpVariants, NonnegativeStartsAndLineSearch) {
  TempDir dir;
  nlohmann::json j = covid_cp(dir, "--rank 3 --nonnegative --max-iters 50");
  EXPECT_EQ(j["nonnegative"], true);
  for (int a = 0; a < 3; ++a) {
    const auto f = tenfold::io::load_npy<double>(dir / ("o/factor_" + std::to_string(a) + ".npy"));
    for (double v : f.values()) EXPECT_GE(v, 0.0);
  }
  j = covid_cp(dir, "--rank 3 --init random --n-starts 3 --max-iters 30");
  EXPECT_EQ(j["n_starts"], 3);
  ASSERT_EQ(j["start_fits"].size(), 3u);
  EXPECT_EQ(j["fit"], j["start_fits"][j["best_start"].get<int>()]);
  j = covid_cp(dir, "--rank 3 --line-search --max-iters 60");
  EXPECT_EQ(j["line_search"], true);
  EXPECT_GE(j["line_search_accepted"].get<int>(), 0);

  expect_covid_cp_refused(dir, "--rank 3 --line-search --nonnegative",
                          "--line-search cannot be combined with --nonnegative");
}

TEST(CliCpVariants, SampledSolver) {
  // COVID-19 at rank 3 (fit about 0.52, so much noise): the sampled solver comes within
  // 3 % of exact ALS's fit from the same start (the sampled least squares inflate the
  // squared residual by about R / S), reports its solver, and is refused where it does
  // not apply.
  TempDir dir;
  const double exact = covid_cp(dir, "--rank 3 --init random --max-iters 200")["fit"];
  nlohmann::json j =
      covid_cp(dir, "--rank 3 --init random --max-iters 200 --solver sampled --fit-check-every 2");
  EXPECT_EQ(j["solver"], "sampled");
  EXPECT_EQ(j["iterations"].get<int>() % 2, 0);
  EXPECT_GE(j["fit"].get<double>(), 0.97 * exact);
  expect_covid_cp_refused(dir, "--rank 3 --solver sampled --nonnegative",
                          "--solver sampled cannot be combined with --nonnegative");
  expect_covid_cp_refused(dir, "--rank 3 --solver sampled --n-starts 2",
                          "--solver sampled cannot be combined with --n-starts 2");
  expect_covid_cp_refused(dir, "--rank 3 --solver sampled --fit-check-every -1",
                          "--fit-check-every");
  expect_covid_cp_refused(dir, "--rank 3 --solver sampled --missing nan",
                          "--solver sampled cannot be combined with --missing nan");
}

TEST(CliCpVariants, CompressionReportsItsPhases) {
  TempDir dir;
  // The default (auto) leaves a tensor this small alone.
  nlohmann::json j = covid_cp(dir, "--rank 3 --max-iters 50");
  EXPECT_EQ(j["compress"], "auto");
  EXPECT_EQ(j["compressed"], false);
  EXPECT_TRUE(j["compression_ranks"].empty());
  // 438 x 6 x 11 at rank 12: the core is 12 x 6 x 11, given per NumPy axis.
  j = covid_cp(dir, "--rank 12 --compress on --max-iters 3000");
  EXPECT_EQ(j["compressed"], true);
  EXPECT_EQ(j["compression_ranks"], nlohmann::json::array({12, 6, 11}));
  EXPECT_GT(j["compressed_iterations"].get<int>(), 0);
  EXPECT_GT(j["iterations"].get<int>(), j["compressed_iterations"].get<int>());
  EXPECT_GT(j["timings"]["compress"].get<double>(), 0.0);
  EXPECT_EQ(j["fit_history"].size(), j["iterations"].get<std::size_t>());

  expect_covid_cp_refused(dir, "--rank 3 --compress on --nonnegative",
                          "--compress on cannot be combined with --nonnegative");
}

}  // namespace
