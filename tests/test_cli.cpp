// The `tenfold` program, run as a user runs it: exit codes, one-line errors,
// outputs, and inputs left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "temp_dir.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

namespace {

const fs::path kCovid = fs::path(TENFOLD_TEST_DATA_DIR) / "COVID19_data.npy";
const fs::path kIl2 = fs::path(TENFOLD_TEST_DATA_DIR) / "IL2_Response_Tensor.npy";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CliRun {
  int code = -1;
  std::string out, err;
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

// Runs `tenfold ARGS` through the shell, capturing stdout and stderr.
CliRun tenfold_cli(const TempDir& dir, const std::string& args) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = std::string(TENFOLD_CLI) + " " + args + " >" + out.string() + " 2>" +
                          err.string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

std::vector<index_t> npy_shape(const fs::path& p) { return tenfold::io::read_npy_header(p).shape; }

}  // namespace

TEST(Cli, HelpDocumentsEveryFlag) {
  TempDir dir;
  const CliRun top = tenfold_cli(dir, "--help");
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("cp"), std::string::npos);
  EXPECT_NE(top.out.find("tucker"), std::string::npos);
  const CliRun cp = tenfold_cli(dir, "cp --help");
  EXPECT_EQ(cp.code, 0);
  for (const char* flag : {"--rank", "--max-iters", "--tol", "--init", "--seed", "--dtype",
                           "--out", "--quiet", "--backend", "--init-factors"}) {
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
  tenfold::CpOptions<double> o;
  o.rank = 3;
  o.init = tenfold::CpInit::nvecs;
  o.tol = 1e-8;
  o.max_iters = 1000;
  const auto lib = tenfold::cp_als(x, o);
  EXPECT_EQ(report["iterations"], lib.iterations);
  EXPECT_NEAR(report["fit"].get<double>(), lib.fit, 1e-12);

  // factor_0 (samples, NumPy axis 0) is tenfold's last mode.
  const auto f0 = tenfold::io::load_npy<double>(dir / "out/factor_0.npy");
  ASSERT_EQ(f0.dims(), (std::vector<index_t>{438, 3}));
  for (index_t i = 0; i < 438 * 3; ++i) EXPECT_EQ(f0[i], lib.model.factors[2].values()[i]);

  // Warm start from the written factors: already at the optimum.
  const CliRun warm = tenfold_cli(dir, "cp " + kCovid.string() + " --rank 3 --tol 1e-8 -q " +
                                        "--init-factors " + (dir / "out").string() + " --out " +
                                        (dir / "warm").string());
  ASSERT_EQ(warm.code, 0) << warm.err;
  const auto warm_report = nlohmann::json::parse(slurp(dir / "warm/report.json"));
  EXPECT_EQ(warm_report["init"], "given");
  EXPECT_LT(warm_report["iterations"].get<int>(), 10);
  EXPECT_NEAR(warm_report["fit"].get<double>(), lib.fit, 1e-6);
}

TEST(Cli, CpInFloat32AgreesWithFloat64) {
  TempDir dir;
  const std::string common = " --rank 2 --init nvecs --tol 1e-7 --max-iters 500 -q --out ";
  ASSERT_EQ(tenfold_cli(dir, "cp " + kCovid.string() + common + (dir / "d").string()).code, 0);
  ASSERT_EQ(tenfold_cli(dir, "cp " + kCovid.string() + " --dtype float32" + common +
                                 (dir / "f").string())
                .code,
            0);
  const auto d = nlohmann::json::parse(slurp(dir / "d/report.json"));
  const auto f = nlohmann::json::parse(slurp(dir / "f/report.json"));
  EXPECT_EQ(f["dtype"], "float32");
  EXPECT_NEAR(f["fit"].get<double>(), d["fit"].get<double>(), 1e-4);
  EXPECT_EQ(tenfold::io::read_npy_header(dir / "f/weights.npy").dtype,
            tenfold::io::DType::float32);
}

TEST(Cli, TuckerWritesCoreAndFactorsInNumPyAxisOrder) {
  TempDir dir;
  const CliRun r = tenfold_cli(dir, "tucker " + kCovid.string() + " --ranks 20,4,5 -q --out " +
                                     (dir / "t").string());
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
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"cp " + (dir / "missing.npy").string() + " --rank 2" + out, 1, "missing.npy"},
      {"cp " + (dir / "in.npy").string() + " --rank 0" + out, 1, "rank"},
      {"cp " + (dir / "in.npy").string() + " --rank -3" + out, 1, "rank"},
      {"cp " + (dir / "in.npy").string() + out, 2, "--rank is required"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --init svd" + out, 2, "--init"},
      {"cp " + (dir / "cut.npy").string() + " --rank 2" + out, 1, "cut.npy"},
      {"cp " + kIl2.string() + " --rank 2" + out, 1, "NaN) at NumPy index [3, 3, 0, 0]"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --tol -1" + out, 1, "tol"},
      {"cp " + (dir / "in.npy").string() + " --rank 2 --backend cuda -q" + out, 1, "cuda"},
      {"tucker " + (dir / "in.npy").string() + out, 1, "--ranks or --tol"},
      {"tucker " + (dir / "in.npy").string() + " --ranks 2,2" + out, 1, "3 axes"},
      {"tucker " + (dir / "in.npy").string() + " --ranks 2,2,12" + out, 1, "axis 2"},
      {"tucker " + (dir / "in.npy").string() + " --tol 1.5" + out, 1, "eps"},
      {"tucker " + kIl2.string() + " --tol 0.1" + out, 1, "NaN"},
      {"frobnicate", 2, "frobnicate"},
  };
  const std::string input_bytes = slurp(dir / "in.npy");
  for (const Case& c : cases) {
    const CliRun r = tenfold_cli(dir, c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "o/report.json")) << c.args;
  }
  EXPECT_EQ(slurp(dir / "in.npy"), input_bytes);
}

TEST(Cli, RefusesToOverwriteItsInput) {
  TempDir dir;
  fs::create_directories(dir / "d");
  fs::copy_file(kCovid, dir / "d/factor_0.npy");
  const std::string before = slurp(dir / "d/factor_0.npy");
  const CliRun r = tenfold_cli(dir, "cp " + (dir / "d/factor_0.npy").string() + " --rank 2 --out " +
                                     (dir / "d").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is the input file"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "d/factor_0.npy"), before);
}
