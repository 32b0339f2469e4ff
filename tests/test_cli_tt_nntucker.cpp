// `tenfold tt` and `tenfold nntucker`, run as a user runs them: outputs in NumPy axis order
// that rebuild the reported error, and one-line errors with no output.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "temp_dir.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tensor_train.hpp"
#include "tenfold/tucker.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

namespace {

const fs::path kCovid = fs::path(TENFOLD_TEST_DATA_DIR) / "COVID19_data.npy";  // (438, 6, 11)
const fs::path kIl2 = fs::path(TENFOLD_TEST_DATA_DIR) / "IL2_Response_Tensor.npy";

std::vector<index_t> npy_shape(const fs::path& p) { return tenfold::io::read_npy_header(p).shape; }

double relative_difference(const tenfold::Tensor<double>& y, const tenfold::Tensor<double>& x) {
  double diff = 0.0;
  for (index_t i = 0; i < x.numel(); ++i) diff += (x[i] - y[i]) * (x[i] - y[i]);
  return std::sqrt(diff) / tenfold::norm<double>(x);
}

TEST(CliTensorTrain, WritesCoresInNumPyAxisOrder) {
  TempDir dir;
  const CliRun r =
      tenfold_cli(dir, "tt " + kCovid.string() + " --rank 4 -q --out " + (dir / "t").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(npy_shape(dir / "t/core_0.npy"), (std::vector<index_t>{1, 438, 4}));
  EXPECT_EQ(npy_shape(dir / "t/core_1.npy"), (std::vector<index_t>{4, 6, 4}));
  EXPECT_EQ(npy_shape(dir / "t/core_2.npy"), (std::vector<index_t>{4, 11, 1}));
  // A C-order core file loads as its reversed view: the cores of the reversed tensor.
  tenfold::TensorTrain<double> tt;
  for (int ax = 2; ax >= 0; --ax) {
    tt.cores.push_back(
        tenfold::io::load_npy<double>(dir / ("t/core_" + std::to_string(ax) + ".npy")));
  }
  const auto report = nlohmann::json::parse(slurp(dir / "t/report.json"));
  EXPECT_NEAR(relative_difference(tt.full(), tenfold::io::load_npy<double>(kCovid)),
              report["relative_error"].get<double>(), 1e-10);
  EXPECT_EQ(report["ranks"], (std::vector<index_t>{1, 4, 4, 1}));

  const CliRun eps =
      tenfold_cli(dir, "tt " + kCovid.string() + " --tol 0.2 -q --out " + (dir / "e").string());
  ASSERT_EQ(eps.code, 0) << eps.err;
  EXPECT_LE(nlohmann::json::parse(slurp(dir / "e/report.json"))["relative_error"].get<double>(),
            0.2);
}

TEST(CliNonnegativeTucker, WritesModelAndErrors) {
  TempDir dir;
  for (const std::string method : {"hals", "multiplicative"}) {
    const fs::path out = dir / method;
    const CliRun r = tenfold_cli(dir, "nntucker " + kCovid.string() +
                                          " --ranks 3,2,3 --max-iters 6 --tol 0 -q --method " +
                                          method + " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(npy_shape(out / "core.npy"), (std::vector<index_t>{3, 2, 3}));
    EXPECT_EQ(npy_shape(out / "factor_0.npy"), (std::vector<index_t>{438, 3}));
    tenfold::TTensor<double> m;
    m.core = tenfold::io::load_npy<double>(out / "core.npy");
    for (int ax = 2; ax >= 0; --ax) {
      const auto f = tenfold::io::load_npy<double>(out / ("factor_" + std::to_string(ax) + ".npy"));
      m.factors.emplace_back(f.dim(0), f.dim(1), f.values());
      for (double v : f.values()) EXPECT_GE(v, 0.0);
    }
    const auto report = nlohmann::json::parse(slurp(out / "report.json"));
    EXPECT_EQ(report["iterations"].get<int>(), 6);
    EXPECT_EQ(report["error_history"].size(), 6u);
    EXPECT_NEAR(relative_difference(m.full(), tenfold::io::load_npy<double>(kCovid)),
                report["relative_error"].get<double>(), 1e-10);
  }
}

TEST(CliTensorTrainAndNonnegativeTucker, BadInputGivesOneLineAndNoOutput) {
  TempDir dir;
  const std::string in = kCovid.string(), out = " --out " + (dir / "o").string();
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"tt " + in + out, 2, "give one of --rank, --ranks or --tol"},
      {"tt " + in + " --ranks 1,2,1" + out, 1, "input's 3 axes has 4"},
      {"tt " + in + " --ranks 1,0,2,1" + out, 1, "--ranks: r_1 = 0 must be at least 1"},
      {"tt " + in + " --tol 1.5" + out, 1, "--tol must be in (0, 1)"},
      {"tt " + in + " --rank 2 --tol 0.1" + out, 2, "excludes"},
      {"tt " + kIl2.string() + " --rank 2" + out, 1, "NaN) at NumPy index"},
      {"nntucker " + in + " --ranks 2,2" + out, 1, "3 axes"},
      {"nntucker " + in + " --ranks 2,7,2" + out, 1, "rank 7 of axis 1 is outside [1, 6]"},
      {"nntucker " + in + " --ranks 2,2,2 --tol -1" + out, 1, "--tol must be finite and >= 0"},
      {"nntucker " + in + " --ranks 2,2,2 --method mu" + out, 2, "--method"},
      {"nntucker " + kIl2.string() + " --ranks 2,2,2,2" + out, 1, "NaN) at NumPy index"},
  };
  const std::string before = slurp(kCovid);
  for (const auto& [args, code, message] : cases) {
    const CliRun r = tenfold_cli(dir, args);
    EXPECT_EQ(r.code, code) << args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "o")) << args;
  }
  EXPECT_EQ(slurp(kCovid), before);
}

}  // namespace
