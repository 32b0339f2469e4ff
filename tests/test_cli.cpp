// The `tenfold` program, run as a user runs it: exit codes, one-line errors,
// outputs, and inputs left untouched (cp, tucker, option errors, the reference backend).
// The attention command is in test_cli_attention.cpp and test_cli_attention_families.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "cp_test_util.hpp"
#include "scoped_env.hpp"
#include "temp_dir.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"
#include "tiny_bert.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

#if defined(TENFOLD_BLAS_OPENBLAS)
// OpenBLAS's name for the kernels this process runs (cblas.h of every OpenBLAS build).
extern "C" char* openblas_get_corename(void);
#endif

namespace {

const fs::path kCovid = fs::path(TENFOLD_TEST_DATA_DIR) / "COVID19_data.npy";
const fs::path kIl2 = fs::path(TENFOLD_TEST_DATA_DIR) / "IL2_Response_Tensor.npy";

std::vector<index_t> npy_shape(const fs::path& p) { return tenfold::io::read_npy_header(p).shape; }

// A command line that must fail with `code` and one stderr line holding `message`.
struct RefusedCase {
  std::string args;
  int code;
  std::string message;
};

// Runs each case (with `tail` appended): its exit code, one line naming the problem, and
// no output folder dir/o.
void expect_refused(const TempDir& dir, const std::vector<RefusedCase>& cases,
                    const std::string& tail) {
  for (const RefusedCase& c : cases) {
    const CliRun r = tenfold_cli(dir, c.args + tail);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "o")) << c.args;
  }
}

}  // namespace

TEST(Cli, HelpDocumentsEveryFlag) {
  TempDir dir;
  const CliRun top = tenfold_cli(dir, "--help");
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("cp"), std::string::npos);
  EXPECT_NE(top.out.find("tucker"), std::string::npos);
  const CliRun cp = tenfold_cli(dir, "cp --help");
  EXPECT_EQ(cp.code, 0);
  for (const char* flag : {"--rank", "--max-iters", "--tol", "--init", "--seed", "--dtype", "--out",
                           "--quiet", "--backend", "--init-factors"}) {
    EXPECT_NE(cp.out.find(flag), std::string::npos) << flag;
  }
  const CliRun tucker = tenfold_cli(dir, "tucker --help");
  for (const char* flag : {"--ranks", "--tol", "--method", "--max-iters", "--dtype", "--out"}) {
    EXPECT_NE(tucker.out.find(flag), std::string::npos) << flag;
  }
}

TEST(Cli, CpOnRealDataWritesFactorsInNumPyAxisOrder) {
  TempDir dir;
  const std::string before = slurp(kCovid);
  // Bit-for-bit agreement needs the same BLAS kernels: the program would otherwise switch
  // to AVX2 kernels where OpenBLAS falls back to generic ones (tools/main.cpp).
#if defined(TENFOLD_BLAS_OPENBLAS)
  const ScopedEnv same_kernels("OPENBLAS_CORETYPE", openblas_get_corename());
#endif
  const CliRun r = tenfold_cli(dir, "cp " + kCovid.string() + " --rank 3 --init nvecs --tol 1e-8 " +
                                        "--max-iters 1000 --out " + (dir / "out").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(kCovid), before);  // the input is never modified
  EXPECT_EQ(npy_shape(dir / "out/factor_0.npy"), (std::vector<index_t>{438, 3}));
  EXPECT_EQ(npy_shape(dir / "out/factor_1.npy"), (std::vector<index_t>{6, 3}));
  EXPECT_EQ(npy_shape(dir / "out/factor_2.npy"), (std::vector<index_t>{11, 3}));
  EXPECT_EQ(npy_shape(dir / "out/weights.npy"), (std::vector<index_t>{3}));
  const auto report = nlohmann::json::parse(slurp(dir / "out/report.json"));
  EXPECT_EQ(report["rank"], 3);
  EXPECT_EQ(report["shape"], (std::vector<index_t>{438, 6, 11}));

  // Same answer as the library on the same data and options.
  const auto x = tenfold::io::load_npy<double>(kCovid);
  tenfold::CpOptions o;
  o.rank = 3;
  o.init = tenfold::CpInit::nvecs;
  o.tol = 1e-8;
  o.max_iters = 1000;
  o.layout = tenfold::Layout::row_major;  // a C-order file, as the program passes it
  const auto lib = tenfold::cp_als(x, o);
  EXPECT_EQ(report["iterations"], lib.iterations);
  EXPECT_NEAR(report["fit"].get<double>(), lib.fit, 1e-12);

  // factor_0 (samples, NumPy axis 0) is tenfold's last mode.
  const auto f0 = tenfold::io::load_npy<double>(dir / "out/factor_0.npy");
  ASSERT_EQ(f0.dims(), (std::vector<index_t>{438, 3}));
  for (index_t i = 0; i < 438 * 3; ++i) EXPECT_EQ(f0[i], lib.model.factors[2].values()[i]);

  // Warm start from the written factors: it resumes at the fit reached (from NumPy
  // axis 0 on, the run creeps through a swamp, gaining about 2e-8 per iteration).
  const CliRun warm =
      tenfold_cli(dir, "cp " + kCovid.string() + " --rank 3 --tol 1e-8 -q " + "--init-factors " +
                           (dir / "out").string() + " --out " + (dir / "warm").string());
  ASSERT_EQ(warm.code, 0) << warm.err;
  const auto warm_report = nlohmann::json::parse(slurp(dir / "warm/report.json"));
  EXPECT_EQ(warm_report["init"], "given");
  EXPECT_GE(warm_report["fit_history"][0].get<double>(), lib.fit - 1e-12);
  EXPECT_NEAR(warm_report["fit"].get<double>(), lib.fit, 1e-5);
}

TEST(Cli, CpInFloat32AgreesWithFloat64) {
  TempDir dir;
  const std::string common = " --rank 2 --init nvecs --tol 1e-7 --max-iters 500 -q --out ";
  ASSERT_EQ(tenfold_cli(dir, "cp " + kCovid.string() + common + (dir / "d").string()).code, 0);
  ASSERT_EQ(
      tenfold_cli(dir, "cp " + kCovid.string() + " --dtype float32" + common + (dir / "f").string())
          .code,
      0);
  const auto d = nlohmann::json::parse(slurp(dir / "d/report.json"));
  const auto f = nlohmann::json::parse(slurp(dir / "f/report.json"));
  EXPECT_EQ(f["dtype"], "float32");
  EXPECT_NEAR(f["fit"].get<double>(), d["fit"].get<double>(), 1e-4);
  EXPECT_EQ(tenfold::io::read_npy_header(dir / "f/weights.npy").dtype, tenfold::io::DType::float32);
}

TEST(Cli, TuckerWritesCoreAndFactorsInNumPyAxisOrder) {
  TempDir dir;
  const CliRun r = tenfold_cli(
      dir, "tucker " + kCovid.string() + " --ranks 20,4,5 -q --out " + (dir / "t").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(npy_shape(dir / "t/core.npy"), (std::vector<index_t>{20, 4, 5}));
  EXPECT_EQ(npy_shape(dir / "t/factor_0.npy"), (std::vector<index_t>{438, 20}));
  EXPECT_EQ(npy_shape(dir / "t/factor_2.npy"), (std::vector<index_t>{11, 5}));
  // Rebuild the tensor from the files and compare with the reported error.
  tenfold::TTensor<double> m;
  m.core = tenfold::io::load_npy<double>(dir / "t/core.npy");  // modes reversed, like the input
  for (int ax = 2; ax >= 0; --ax) {
    const auto f = tenfold::io::load_npy<double>(dir / ("t/factor_" + std::to_string(ax) + ".npy"));
    m.factors.emplace_back(f.dim(0), f.dim(1), f.values());
  }
  const auto x = tenfold::io::load_npy<double>(kCovid);
  const auto y = m.full();
  double diff = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) diff += (x[i] - y[i]) * (x[i] - y[i]);
  const auto report = nlohmann::json::parse(slurp(dir / "t/report.json"));
  EXPECT_NEAR(std::sqrt(diff) / tenfold::norm<double>(x), report["relative_error"].get<double>(),
              1e-10);
  EXPECT_EQ(report["ranks"], (std::vector<index_t>{20, 4, 5}));

  const CliRun eps = tenfold_cli(dir, "tucker " + kCovid.string() + " --tol 0.2 --method hooi -q " +
                                          "--out " + (dir / "e").string());
  ASSERT_EQ(eps.code, 0) << eps.err;
  EXPECT_LE(nlohmann::json::parse(slurp(dir / "e/report.json"))["relative_error"].get<double>(),
            0.2);
}

TEST(Cli, BadInputGivesOneLineAndNoOutput) {
  TempDir dir;
  fs::copy_file(kCovid, dir / "in.npy");
  {
    std::ofstream cut(dir / "cut.npy", std::ios::binary);
    cut << slurp(kCovid).substr(0, 5000);
  }
  const std::string out = " --out " + (dir / "o").string();
  const std::vector<RefusedCase> cases = {
      {"cp " + (dir / "missing.npy").string() + " --rank 2" + out, 1, "missing.npy"},
      {"cp " + (dir / "in.npy").string() + " --rank 0" + out, 1, "rank"},
      {"cp " + (dir / "in.npy").string() + " --rank -3" + out, 1, "rank"},
      {"cp " + (dir / "in.npy").string() + out, 2, "--rank is required"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --init svd" + out, 2, "--init"},
      {"cp " + (dir / "cut.npy").string() + " --rank 2" + out, 1, "cut.npy"},
      {"cp " + kIl2.string() + " --rank 2" + out, 1, "NaN) at NumPy index [3, 3, 0, 0]"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --tol -1" + out, 1, "tol"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --backend cuda -q" + out, 1, "cuda"},
      {"tucker " + (dir / "in.npy").string() + out, 2, "--ranks or --tol"},
      {"tucker " + (dir / "in.npy").string() + " --ranks 2,2" + out, 1, "3 axes"},
      {"tucker " + (dir / "in.npy").string() + " --ranks 2,2,12" + out, 1, "axis 2"},
      {"tucker " + (dir / "in.npy").string() + " --tol 1.5" + out, 1, "--tol must be in (0, 1)"},
      {"tucker " + kIl2.string() + " --tol 0.1" + out, 1, "NaN"},
      {"frobnicate", 2, "frobnicate"},
  };
  const std::string input_bytes = slurp(dir / "in.npy");
  expect_refused(dir, cases, "");
  EXPECT_EQ(slurp(dir / "in.npy"), input_bytes);
}

TEST(Cli, RefusesToOverwriteItsInput) {
  TempDir dir;
  fs::create_directories(dir / "d");
  fs::copy_file(kCovid, dir / "d/factor_0.npy");
  const std::string before = slurp(dir / "d/factor_0.npy");
  const CliRun r = tenfold_cli(
      dir, "cp " + (dir / "d/factor_0.npy").string() + " --rank 2 --out " + (dir / "d").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "d/factor_0.npy"), before);
}

// Every bad option is named by the flag the user typed (the library names its option
// fields, which the program maps), with its numbers as typed.
TEST(Cli, OptionErrorsNameTheFlag) {
  TempDir dir;
  fs::copy_file(kCovid, dir / "in.npy");
  TinyBert(1).save(dir / "model.safetensors");
  const std::string cp = "cp " + (dir / "in.npy").string() + " -q --rank 2 ";
  const std::string tucker = "tucker " + (dir / "in.npy").string() + " -q ";
  const std::string model = (dir / "model.safetensors").string();
  const std::string compress = "attention compress " + model + " -q --heads 2 --shared-dim 3 ";
  const std::string out = " --out " + (dir / "o").string();
  const std::vector<RefusedCase> cases = {
      {cp + "--max-iters -1", 1, "tenfold cp: error: --max-iters must be >= 0, got -1"},
      {cp + "--tol -1", 1, "tenfold cp: error: --tol must be finite and >= 0, got -1"},
      {cp + "--tol nan", 1, "--tol must be finite and >= 0, got nan"},
      {cp + "--ridge -1", 1, "tenfold cp: error: --ridge must be finite and >= 0, got -1"},
      {cp + "--ridge -1e-300", 1, "--ridge must be finite and >= 0, got -1e-300"},
      {cp + "--time-limit -1", 1, "tenfold cp: error: --time-limit must be >= 0, got -1"},
      {"cp " + (dir / "in.npy").string() + " --rank 0", 1, "--rank must be at least 1, got 0"},
      {cp + "--init random --init-factors " + dir.path().string(), 2,
       "--init random contradicts --init-factors"},
      {cp + "--init nvecs --init-factors " + dir.path().string(), 2,
       "--init nvecs contradicts --init-factors"},
      {cp + "--line-search --nonnegative", 2,
       "--line-search cannot be combined with --nonnegative"},
      {cp + "--line-search --missing nan", 2,
       "--line-search cannot be combined with --missing nan"},
      {cp + "--compress on --nonnegative", 2,
       "--compress on cannot be combined with --nonnegative"},
      {cp + "--compress on --missing nan", 2,
       "--compress on cannot be combined with --missing nan"},
      {cp + "--missing nan --missing-solver weighted --nonnegative", 2,
       "--missing-solver weighted cannot be combined with --nonnegative"},
      {tucker + "--tol 1.5", 1, "tenfold tucker: error: --tol must be in (0, 1), got 1.5"},
      {tucker + "--ranks 2,2,2 --method hooi --max-iters 0", 1,
       "--max-iters must be at least 1, got 0"},
      {tucker + "--ranks 2,,2", 2, "--ranks: item 2 of '2,,2' is empty"},
      {tucker + "--ranks 2,2,", 2, "--ranks: item 3 of '2,2,' is empty"},
      {tucker + "--ranks ,2,2", 2, "--ranks: item 1 of ',2,2' is empty"},
      {"attention compress " + model + " -q --heads 0 --shared-dim 3", 2,
       "--heads: must be at least 1, got 0"},
      {"attention analyze " + model + " --heads 0", 2, "--heads: must be at least 1, got 0"},
      {"attention compress " + model + " -q --heads 2 --shared-dim 0", 1,
       "shared dimension 0 is outside [1, 8]"},
      {"attention compress " + model + " -q --heads 2 --shared-dim 9", 1,
       "shared dimension 9 is outside [1, 8]"},
      {compress + "--max-iters 0", 1, "--max-iters must be at least 1, got 0"},
      {compress + "--tol -0.5", 1, "--tol must be finite and >= 0, got -0.5"},
  };
  expect_refused(dir, cases, out);
  // A list split by commas or spaces, and --init auto with a start, still run.
  ASSERT_EQ(tenfold_cli(dir, tucker + "--ranks 2 2 2" + out).code, 0);
  EXPECT_EQ(tenfold_cli(dir, cp + "--max-iters 2 --out " + (dir / "a").string()).code, 0);
  EXPECT_EQ(tenfold_cli(dir, cp + "--max-iters 2 --init auto --init-factors " +
                                 (dir / "a").string() + " --out " + (dir / "b").string())
                .code,
            0);
  // --max-iters 0 writes the start itself.
  EXPECT_EQ(tenfold_cli(dir, cp + "--max-iters 0 --out " + (dir / "s").string()).code, 0);
  EXPECT_TRUE(fs::exists(dir / "s" / "weights.npy"));
}

// --backend reference (plain loops in double) gives the cpu backend's answer to the
// precision's rounding: CP from the same random start, HOOI, and the attention adapter.
TEST(Cli, ReferenceBackendAgreesWithCpu) {
  TempDir dir;
  const auto planted = tenfold::test::planted({9, 8, 7}, 3, 0.0, 0.05, 17);
  tenfold::io::save_npy<double>(dir / "x.npy", planted.tensor.view());
  TinyBert(2).save(dir / "model.safetensors");
  for (const std::string dtype : {"float64", "float32"}) {
    const double tol = dtype == "float64" ? 1e-10 : 1e-4;
    // Runs `command` with --out (and --report for attention) under dtype_backend.
    const auto run = [&](const std::string& command, const std::string& backend) {
      const fs::path out =
          dir / (command.substr(0, command.find(' ')) + "_" + dtype + "_" + backend);
      const bool attention = command.starts_with("attention");
      const CliRun r = tenfold_cli(
          dir, command + " --dtype " + dtype + " --backend " + backend + " -q --out " +
                   out.string() + (attention ? " --report " + out.string() + ".json" : ""));
      EXPECT_EQ(r.code, 0) << r.err;
      return nlohmann::json::parse(
          slurp(attention ? fs::path(out.string() + ".json") : out / "report.json"));
    };
    const std::string cp = "cp " + (dir / "x.npy").string() +
                           " --rank 3 --init random --seed 5 --max-iters 15 --tol 0";
    const auto cp_cpu = run(cp, "cpu"), cp_ref = run(cp, "reference");
    EXPECT_EQ(cp_ref["backend"], "reference");
    ASSERT_EQ(cp_ref["fit_history"].size(), 15u);
    for (std::size_t i = 0; i < 15; ++i)
      EXPECT_NEAR(cp_ref["fit_history"][i].get<double>(), cp_cpu["fit_history"][i].get<double>(),
                  tol)
          << dtype << " iteration " << i + 1;
    for (const char* file : {"weights.npy", "factor_0.npy", "factor_1.npy", "factor_2.npy"}) {
      const auto got = tenfold::io::load_npy<double>(dir / ("cp_" + dtype + "_reference") / file);
      const auto want = tenfold::io::load_npy<double>(dir / ("cp_" + dtype + "_cpu") / file);
      EXPECT_LT(tenfold::test::rel_diff(got.values(), want.values()), tol) << dtype << " " << file;
    }

    // Eigenvectors are defined up to sign: compare what does not depend on it.
    const std::string tucker =
        "tucker " + (dir / "x.npy").string() + " --ranks 3,2,2 --method hooi";
    const auto tucker_cpu = run(tucker, "cpu"), tucker_ref = run(tucker, "reference");
    EXPECT_NEAR(tucker_ref["relative_error"].get<double>(),
                tucker_cpu["relative_error"].get<double>(), tol)
        << dtype;
    for (std::size_t ax = 0; ax < 3; ++ax)
      EXPECT_LT(tenfold::test::rel_diff(tucker_ref["eigenvalues"][ax].get<std::vector<double>>(),
                                        tucker_cpu["eigenvalues"][ax].get<std::vector<double>>()),
                tol)
          << dtype << " axis " << ax;

    const std::string attention =
        "attention compress " + (dir / "model.safetensors").string() + " --heads 2 --shared-dim 3";
    const auto attention_cpu = run(attention, "cpu"), attention_ref = run(attention, "reference");
    for (std::size_t l = 0; l < 2; ++l)
      EXPECT_NEAR(attention_ref["layers"][l]["relative_error"].get<double>(),
                  attention_cpu["layers"][l]["relative_error"].get<double>(), tol)
          << dtype << " layer " << l;
  }
}
