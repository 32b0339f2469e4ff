// The `tenfold` program, run as a user runs it: exit codes, one-line errors,
// outputs, and inputs left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>

#include "attention/checkpoint_parts.hpp"
#include "cli_run.hpp"
#include "cp_test_util.hpp"
#include "scoped_env.hpp"
#include "temp_dir.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

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

namespace {

// A small BERT-named checkpoint: `layers` attention layers (H = 2 heads of width 4 over
// D = 8), plus tensors that must be copied through (embeddings, an I64 buffer).
struct TinyBert {
  std::vector<std::vector<float>> data;
  std::vector<tenfold::io::SafetensorsTensor> tensors;
  std::vector<std::int64_t> ids = {0, 1, 2, 3, 4, 5};

  explicit TinyBert(int layers, const std::string& prefix = "bert.") {
    std::uint64_t s = 12345;
    const auto next = [&s] {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>(static_cast<double>(s >> 11) * 0x1.0p-53 - 0.5);
    };
    const auto add = [&](const std::string& name, std::vector<index_t> shape) {
      std::vector<float> v(static_cast<std::size_t>(tenfold::checked_numel(shape)));
      for (float& x : v) x = next();
      data.push_back(std::move(v));
      tensors.push_back({name, "F32", shape, std::as_bytes(std::span<const float>(data.back()))});
    };
    data.reserve(64);
    add(prefix + "embeddings.word_embeddings.weight", {10, 8});
    for (int l = 0; l < layers; ++l) {
      const std::string p = prefix + "encoder.layer." + std::to_string(l) + ".attention.";
      add(p + "self.query.weight", {8, 8});
      add(p + "self.query.bias", {8});
      add(p + "self.key.weight", {8, 8});
      add(p + "self.key.bias", {8});
      add(p + "self.value.weight", {8, 8});
      add(p + "output.dense.weight", {8, 8});
    }
    tensors.push_back({prefix + "embeddings.position_ids",
                       "I64",
                       {1, 6},
                       std::as_bytes(std::span<const std::int64_t>(ids))});
  }
  void save(const fs::path& p) const {
    tenfold::io::save_safetensors(p, tensors, {{"format", "pt"}});
  }
};

}  // namespace

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

TEST(Cli, AttentionCompressRewritesQueryKeyAndCopiesTheRest) {
  TempDir dir;
  const TinyBert model(2);
  model.save(dir / "model.safetensors");
  const std::string before = slurp(dir / "model.safetensors");
  for (const int rank : {8, 3}) {
    const std::string out = (dir / ("r" + std::to_string(rank) + ".safetensors")).string();
    const CliRun r =
        tenfold_cli(dir, "attention compress " + (dir / "model.safetensors").string() +
                             " --shared-dim " + std::to_string(rank) + " --heads 2 -q --out " +
                             out + " --report " + (dir / "report.json").string());
    ASSERT_EQ(r.code, 0) << r.err;
    const tenfold::io::SafetensorsFile in(dir / "model.safetensors"), res(out);
    for (const auto& e : in.tensors()) {
      const bool qk =
          e.name.find(".query.") != std::string::npos || e.name.find(".key.") != std::string::npos;
      if (qk) {
        EXPECT_EQ(res.find(e.name), nullptr) << e.name;
      } else {
        EXPECT_EQ(res.read_bytes(e.name), in.read_bytes(e.name)) << e.name;
      }
    }
    const std::string p = "bert.encoder.layer.1.attention.self.";
    EXPECT_EQ(res.at(p + "collab.mixing").shape, (std::vector<index_t>{2, rank}));
    EXPECT_EQ(res.at(p + "collab.query.weight").shape, (std::vector<index_t>{rank, 8}));
    EXPECT_EQ(res.at(p + "collab.key.weight").shape, (std::vector<index_t>{rank, 8}));
    EXPECT_EQ(res.at(p + "collab.content_bias.weight").shape, (std::vector<index_t>{2, 8}));
    EXPECT_EQ(res.metadata().at("tenfold.shared_dim"), std::to_string(rank));
    EXPECT_EQ(res.metadata().at("tenfold.heads"), "2");
    EXPECT_EQ(res.metadata().at("tenfold.head_dim"), "4");
    EXPECT_EQ(res.metadata().at("tenfold.scale_convention"),
              "scale folded into mixing and content_bias");
    EXPECT_EQ(res.metadata().at("format"), "pt");

    // The report's error is the library's on the same layer, and is 0 at full rank.
    const auto report = nlohmann::json::parse(slurp(dir / "report.json"));
    ASSERT_EQ(report["layers"].size(), 2u);
    const auto names = tenfold::attention::find_layers(in);
    const auto layer = tenfold::attention::load_layer<float>(in, names[1], 2);
    tenfold::attention::CompressOptions o;
    o.rank = rank;
    const auto lib = tenfold::attention::compress(layer, o);
    EXPECT_NEAR(report["layers"][1]["relative_error"].get<double>(), lib.relative_error, 1e-6);
    if (rank == 8) EXPECT_LT(lib.relative_error, 1e-6);
    // The written collaborative layer reproduces the reported error.
    tenfold::attention::CollaborativeLayer<float> c;
    const auto mixing_t = res.read_matrix<float>(p + "collab.mixing");  // R x H
    c.mixing = tenfold::Matrix<float>(2, rank);
    for (index_t h = 0; h < 2; ++h)
      for (index_t j = 0; j < rank; ++j) c.mixing(h, j) = mixing_t(j, h);
    c.query = res.read_matrix<float>(p + "collab.query.weight");
    c.key = res.read_matrix<float>(p + "collab.key.weight");
    c.content = res.read_matrix<float>(p + "collab.content_bias.weight");
    EXPECT_NEAR(tenfold::attention::qk_error(layer, c),
                report["layers"][1]["relative_error"].get<double>(), 1e-5);
  }
  EXPECT_EQ(slurp(dir / "model.safetensors"), before);

  const CliRun analyze = tenfold_cli(
      dir, "attention analyze " + (dir / "model.safetensors").string() + " --heads 2 --json");
  ASSERT_EQ(analyze.code, 0) << analyze.err;
  const auto j = nlohmann::json::parse(analyze.out);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_LE(j["layers"][0]["products"]["dim99"].get<int>(), 8);
}

TEST(Cli, AttentionReadsHeadsFromConfigAndDistilBertNames) {
  TempDir dir;
  TinyBert model(1, "");
  // DistilBERT names: transformer.layer.<n>.attention.{q_lin,k_lin}.
  for (auto& t : model.tensors) {
    std::string& n = t.name;
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"encoder.layer", "transformer.layer"},
             {"attention.self.query", "attention.q_lin"},
             {"attention.self.key", "attention.k_lin"}}) {
      if (const auto at = n.find(from); at != std::string::npos) n.replace(at, from.size(), to);
    }
  }
  model.save(dir / "model.safetensors");
  std::ofstream(dir / "config.json") << R"({"n_heads": 2, "dim": 8})";
  const CliRun r =
      tenfold_cli(dir, "attention compress " + (dir / "model.safetensors").string() +
                           " --shared-dim 4 -q --out " + (dir / "o.safetensors").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const tenfold::io::SafetensorsFile res(dir / "o.safetensors");
  EXPECT_NE(res.find("transformer.layer.0.attention.collab.mixing"), nullptr);
  EXPECT_EQ(res.find("transformer.layer.0.attention.q_lin.weight"), nullptr);
}

namespace {

// Renames a TinyBert's tensors (first match of each pair, in order).
void rename(TinyBert& model, const std::vector<std::pair<std::string, std::string>>& map) {
  for (auto& t : model.tensors) {
    for (const auto& [from, to] : map) {
      if (const auto at = t.name.find(from); at != std::string::npos) {
        t.name.replace(at, from.size(), to);
        break;
      }
    }
  }
}

std::vector<float> floats(const tenfold::io::SafetensorsFile& f, const std::string& name) {
  const std::vector<std::byte> b = f.read_bytes(name);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace

// ALBERT's shared layer group and ViT/DeiT's two spellings compress to the same
// collaborative tensors as the BERT-named file with the same weights.
TEST(Cli, AttentionReadsAlbertAndVitNames) {
  TempDir dir;
  TinyBert bert(1, "");
  bert.save(dir / "bert.safetensors");
  const auto compress = [&](const std::string& in, const std::string& out) {
    const CliRun r =
        tenfold_cli(dir, "attention compress " + (dir / in).string() +
                             " --heads 2 --shared-dim 3 -q --out " + (dir / out).string());
    EXPECT_EQ(r.code, 0) << in << ": " << r.err;
    return tenfold::io::SafetensorsFile(dir / out);
  };
  const auto ref = compress("bert.safetensors", "bert_out.safetensors");
  const std::string bert_p = "encoder.layer.0.attention.self.";
  struct Case {
    std::string file, prefix;
    std::vector<std::pair<std::string, std::string>> map;
  };
  const std::vector<Case> cases = {
      {"albert",
       "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.",
       {{"encoder.layer.0.attention.self.",
         "albert.encoder.albert_layer_groups.0.albert_layers.0.attention."}}},
      {"vit",
       "vit.encoder.layer.0.attention.attention.",
       {{"encoder.layer.0.attention.self.", "vit.encoder.layer.0.attention.attention."}}},
      {"vit_proj",
       "vit.encoder.layer.0.attention.",
       {{"encoder.layer.0.attention.self.query", "vit.encoder.layer.0.attention.q_proj"},
        {"encoder.layer.0.attention.self.key", "vit.encoder.layer.0.attention.k_proj"}}},
  };
  for (const Case& c : cases) {
    TinyBert model(1, "");
    rename(model, c.map);
    model.save(dir / (c.file + ".safetensors"));
    const auto res = compress(c.file + ".safetensors", c.file + "_out.safetensors");
    const auto layers = tenfold::attention::find_layers(
        tenfold::io::SafetensorsFile(dir / (c.file + ".safetensors")));
    ASSERT_EQ(layers.size(), 1u) << c.file;
    EXPECT_EQ(layers[0].prefix, c.prefix);
    EXPECT_EQ(layers[0].index, 0);
    for (const char* t : {"collab.mixing", "collab.query.weight", "collab.key.weight",
                          "collab.content_bias.weight"}) {
      EXPECT_EQ(res.read_bytes(c.prefix + t), ref.read_bytes(bert_p + t)) << c.file << " " << t;
    }
    EXPECT_EQ(res.find(layers[0].query_weight), nullptr) << c.file;
    EXPECT_EQ(res.find(layers[0].key_weight), nullptr) << c.file;
  }
}

namespace {

// GPT-2 names for a TinyBert's layers: transformer.h.<n>.attn.c_attn, a fused Conv1D
// (in, 3 out) = [W_Q^T | W_K^T | W_V^T] with its bias (the value third a constant).
struct TinyGpt2 {
  std::vector<std::vector<float>> data;  // per layer: the fused weight, then its bias
  std::vector<tenfold::io::SafetensorsTensor> tensors;

  explicit TinyGpt2(const tenfold::io::SafetensorsFile& sep) {
    data.reserve(4);
    for (int l = 0; l < 2; ++l) {
      const std::string b = "encoder.layer." + std::to_string(l) + ".attention.self.";
      std::vector<float> w(8 * 24), bias(24);
      const char* parts[3] = {"query", "key", "value"};
      for (int part = 0; part < 3; ++part) {
        const std::vector<float> pw = floats(sep, b + parts[part] + ".weight");  // (out, in)
        // TinyBert has no value bias: the value third gets a constant one.
        const std::vector<float> pb =
            part < 2 ? floats(sep, b + parts[part] + ".bias") : std::vector<float>(8, 0.25f);
        for (int o = 0; o < 8; ++o) {
          for (int i = 0; i < 8; ++i)
            w[static_cast<std::size_t>(i * 24 + part * 8 + o)] = pw[o * 8 + i];
          bias[static_cast<std::size_t>(part * 8 + o)] = pb[static_cast<std::size_t>(o)];
        }
      }
      data.push_back(std::move(w));
      data.push_back(std::move(bias));
      const std::string p = "transformer.h." + std::to_string(l) + ".attn.";
      tensors.push_back({p + "c_attn.weight",
                         "F32",
                         {8, 24},
                         std::as_bytes(std::span<const float>(data[data.size() - 2]))});
      tensors.push_back(
          {p + "c_attn.bias", "F32", {24}, std::as_bytes(std::span<const float>(data.back()))});
    }
  }
};

}  // namespace

// GPT-2's fused Conv1D c_attn: the layer read from it is the one of the separate
// weights, the value third is written out as value.{weight,bias} bit for bit, and the
// config's n_head gives the head count.
TEST(Cli, AttentionReadsGpt2FusedConv1D) {
  TempDir dir;
  TinyBert bert(2, "");
  bert.save(dir / "bert.safetensors");
  const tenfold::io::SafetensorsFile sep(dir / "bert.safetensors");
  const TinyGpt2 gpt2(sep);
  const auto& data = gpt2.data;
  tenfold::io::save_safetensors(dir / "model.safetensors", gpt2.tensors, {{"format", "pt"}});
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2", "n_head": 2, "n_embd": 8})";

  const tenfold::io::SafetensorsFile fused(dir / "model.safetensors");
  const auto layers = tenfold::attention::find_layers(fused);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_TRUE(layers[1].fused_qkv);
  EXPECT_EQ(layers[1].prefix, "transformer.h.1.attn.");
  const auto a = tenfold::attention::load_layer<float>(fused, layers[1], 2);
  const auto b =
      tenfold::attention::load_layer<float>(sep, tenfold::attention::find_layers(sep)[1], 2);
  EXPECT_EQ(a.query_weight.values(), b.query_weight.values());
  EXPECT_EQ(a.key_weight.values(), b.key_weight.values());
  EXPECT_EQ(a.query_bias, b.query_bias);
  EXPECT_EQ(a.key_bias, b.key_bias);

  const CliRun r =
      tenfold_cli(dir, "attention compress " + (dir / "model.safetensors").string() +
                           " --shared-dim 8 -q --out " + (dir / "o.safetensors").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const tenfold::io::SafetensorsFile res(dir / "o.safetensors");
  EXPECT_EQ(res.metadata().at("tenfold.heads"), "2");
  EXPECT_EQ(res.find("transformer.h.1.attn.c_attn.weight"), nullptr);
  EXPECT_EQ(res.find("transformer.h.1.attn.c_attn.bias"), nullptr);
  EXPECT_EQ(res.at("transformer.h.1.attn.value.weight").shape, (std::vector<index_t>{8, 8}));
  const std::vector<float> v = floats(res, "transformer.h.1.attn.value.weight");
  const std::vector<float> vb = floats(res, "transformer.h.1.attn.value.bias");
  for (int i = 0; i < 8; ++i) {
    for (int o = 0; o < 8; ++o) EXPECT_EQ(v[i * 8 + o], data[2][i * 24 + 16 + o]);
    EXPECT_EQ(vb[i], data[3][16 + i]);
  }
  EXPECT_EQ(res.at("transformer.h.1.attn.collab.mixing").shape, (std::vector<index_t>{2, 8}));

  const CliRun analyze =
      tenfold_cli(dir, "attention analyze " + (dir / "model.safetensors").string() + " --json");
  ASSERT_EQ(analyze.code, 0) << analyze.err;
  EXPECT_EQ(nlohmann::json::parse(analyze.out)["layers"].size(), 2u);
}

TEST(Cli, AttentionBadCheckpointsGiveOneLineAndWriteNothing) {
  TempDir dir;
  TinyBert(2).save(dir / "good.safetensors");
  const std::string good = slurp(dir / "good.safetensors");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  // Header length field pointing past the end, a header that is not JSON.
  std::string beyond = good;
  beyond[0] = '\xff';
  beyond[1] = '\xff';
  std::string bad_json = good;
  bad_json[8] = '[';
  TinyBert no_key(1);
  no_key.tensors.erase(no_key.tensors.begin() + 3);  // layer 0's key.weight
  no_key.save(dir / "nokey.safetensors");
  TinyBert no_query(2);
  // Layer 0's query weight and bias.
  no_query.tensors.erase(no_query.tensors.begin() + 1, no_query.tensors.begin() + 3);
  no_query.save(dir / "noquery.safetensors");
  TinyBert no_attention(0);
  no_attention.save(dir / "noattn.safetensors");
  TinyBert odd_dtype(1);
  odd_dtype.tensors[1].dtype = "F8_E4M3";
  odd_dtype.tensors[1].shape = {8, 32};
  odd_dtype.save(dir / "odd.safetensors");

  const std::string g = (dir / "good.safetensors").string();
  const std::string out = " --out " + (dir / "out.safetensors").string();
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {write("cut.safetensors", good.substr(0, good.size() - 10)) + " --heads 2",
       "cut.safetensors"},
      {write("beyond.safetensors", beyond) + " --heads 2", "header"},
      {write("json.safetensors", bad_json) + " --heads 2", "JSON"},
      {(dir / "nokey.safetensors").string() + " --heads 2", "key.weight"},
      // Layer 0 would be left as it was, layer 1 compressed: no usable checkpoint.
      {(dir / "noquery.safetensors").string() + " --heads 2",
       "layer 0 has 'bert.encoder.layer.0.attention.self.key.weight' but no "
       "'bert.encoder.layer.0.attention.self.query.weight'"},
      {(dir / "noattn.safetensors").string() + " --heads 2", "no attention layers"},
      {(dir / "odd.safetensors").string() + " --heads 2", "query.weight"},
      {g + " --heads 3", "not divisible by 3 heads"},
      {g, "head count"},
      {g + " --heads 2 --shared-dim 9", "outside [1, 8]"},
  };
  for (const Case& c : cases) {
    std::string args = "attention compress " + c.args + out;
    if (c.args.find("--shared-dim") == std::string::npos) args += " --shared-dim 4";
    const CliRun r = tenfold_cli(dir, args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "out.safetensors")) << args;
  }
  const CliRun zero =
      tenfold_cli(dir, "attention compress " + g + " --heads 2 --shared-dim 0" + out);
  EXPECT_EQ(zero.code, 1);
  EXPECT_NE(zero.err.find("outside [1, 8]"), std::string::npos) << zero.err;
  const CliRun same =
      tenfold_cli(dir, "attention compress " + g + " --heads 2 --shared-dim 4 --out " + g);
  EXPECT_EQ(same.code, 1);
  EXPECT_EQ(slurp(dir / "good.safetensors"), good);
}

// --dtype float64 computes and writes the new tensors in float64, like the older
// --float64; the two spellings cannot be combined.
TEST(Cli, AttentionCompressDtype) {
  TempDir dir;
  TinyBert(1).save(dir / "model.safetensors");
  const std::string base = "attention compress " + (dir / "model.safetensors").string() +
                           " --heads 2 --shared-dim 3 -q --out ";
  const std::string p = "bert.encoder.layer.0.attention.self.collab.mixing";
  const CliRun f32 = tenfold_cli(dir, base + (dir / "f32.safetensors").string());
  ASSERT_EQ(f32.code, 0) << f32.err;
  EXPECT_EQ(tenfold::io::SafetensorsFile(dir / "f32.safetensors").at(p).dtype, "F32");
  const CliRun f64 =
      tenfold_cli(dir, base + (dir / "f64.safetensors").string() + " --dtype float64");
  ASSERT_EQ(f64.code, 0) << f64.err;
  EXPECT_EQ(tenfold::io::SafetensorsFile(dir / "f64.safetensors").at(p).dtype, "F64");
  const CliRun old = tenfold_cli(dir, base + (dir / "old.safetensors").string() + " --float64");
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_EQ(slurp(dir / "old.safetensors"), slurp(dir / "f64.safetensors"));
  const CliRun both =
      tenfold_cli(dir, base + (dir / "both.safetensors").string() + " --float64 --dtype float32");
  EXPECT_NE(both.code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "both.safetensors"));
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

TEST(Cli, AttentionCompressWithCalibration) {
  TempDir dir;
  TinyBert(2).save(dir / "model.safetensors");
  // Moments diag(1, 2, ..., 8) for both layers.
  std::vector<double> m(64, 0.0);
  for (int i = 0; i < 8; ++i) m[static_cast<std::size_t>(9 * i)] = i + 1.0;
  const auto bytes = std::as_bytes(std::span<const double>(m));
  std::vector<tenfold::io::SafetensorsTensor> t;
  for (int l = 0; l < 2; ++l) {
    t.push_back({"bert.encoder.layer." + std::to_string(l) + ".attention.self.input_moment",
                 "F64",
                 {8, 8},
                 bytes});
  }
  tenfold::io::save_safetensors(
      dir / "stats.safetensors", t,
      {{"tenfold.calibration.tokens", "99"}, {"tenfold.calibration.source", "diagonal"}});
  const std::string base = "attention compress " + (dir / "model.safetensors").string() +
                           " --heads 2 --shared-dim 3 -q --out " +
                           (dir / "out.safetensors").string();
  const CliRun r =
      tenfold_cli(dir, base + " --calibration " + (dir / "stats.safetensors").string() +
                           " --damping 0.1 --report " + (dir / "report.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data rel. error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data-aware: 99 calibration tokens (diagonal), damping 0.1"),
            std::string::npos)
      << r.out;
  const auto report = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(report["objective"], "data");
  EXPECT_EQ(report["calibration"]["tokens"], 99);
  EXPECT_EQ(report["calibration"]["damping"], 0.1);
  const tenfold::io::SafetensorsFile out(dir / "out.safetensors");
  const auto data = nlohmann::json::parse(out.metadata().at("tenfold.calibration.relative_errors"));
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(report["layers"][l]["data_relative_error"].get<double>(), data[l].get<double>());
  }
  // --damping needs --calibration; a bad statistics file is one line and no output.
  fs::remove(dir / "out.safetensors");
  const CliRun lone = tenfold_cli(dir, base + " --damping 0.1");
  EXPECT_NE(lone.code, 0);
  EXPECT_NE(lone.err.find("--calibration"), std::string::npos) << lone.err;
  const CliRun bad =
      tenfold_cli(dir, base + " --calibration " + (dir / "model.safetensors").string());
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err_lines(), 1) << bad.err;
  EXPECT_NE(bad.err.find("tenfold.calibration.tokens"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  // A negative --damping is named by its flag, the number as typed.
  for (const std::string damping : {"-1", "-0.25"}) {
    const CliRun negative =
        tenfold_cli(dir, base + " --calibration " + (dir / "stats.safetensors").string() +
                             " --damping " + damping);
    EXPECT_EQ(negative.code, 1) << negative.err;
    EXPECT_EQ(negative.err_lines(), 1) << negative.err;
    EXPECT_NE(
        negative.err.find("tenfold attention: error: --damping must be finite and >= 0, got " +
                          damping + "\n"),
        std::string::npos)
        << negative.err;
    EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  }
}

// Every file the command reads is an input no output may be: the checkpoint, the
// config.json beside it and the calibration statistics, by identity (a symlink, or a
// path through a linked folder, to one of them is the same file).
TEST(Cli, AttentionOutputsAreNoInput) {
  TempDir dir;
  fs::create_directories(dir / "m");
  TinyBert(2).save(dir / "m/model.safetensors");
  std::ofstream(dir / "m/config.json") << R"({"num_attention_heads": 2, "hidden_size": 8})";
  std::vector<double> m(64, 0.0);
  for (int i = 0; i < 8; ++i) m[static_cast<std::size_t>(9 * i)] = 1.0;
  std::vector<tenfold::io::SafetensorsTensor> t;
  for (int l = 0; l < 2; ++l) {
    t.push_back({"bert.encoder.layer." + std::to_string(l) + ".attention.self.input_moment",
                 "F64",
                 {8, 8},
                 std::as_bytes(std::span<const double>(m))});
  }
  tenfold::io::save_safetensors(dir / "stats.safetensors", t,
                                {{"tenfold.calibration.tokens", "5"}});
  fs::create_symlink(dir / "m/config.json", dir / "config_link.json");
  fs::create_directory_symlink(dir / "m", dir / "m_link");
  const std::string model = slurp(dir / "m/model.safetensors");
  const std::string config = slurp(dir / "m/config.json");
  const std::string stats = slurp(dir / "stats.safetensors");
  const std::string base = "attention compress " + (dir / "m/model.safetensors").string() +
                           " --shared-dim 3 -q --calibration " +
                           (dir / "stats.safetensors").string();
  const std::string ok = (dir / "out.safetensors").string();
  const std::vector<std::string> cases = {
      "--out " + (dir / "m/config.json").string(),
      "--out " + (dir / "config_link.json").string(),
      "--out " + (dir / "m_link/config.json").string(),
      "--out " + (dir / "stats.safetensors").string(),
      "--out " + ok + " --report " + (dir / "m/config.json").string(),
      "--out " + ok + " --report " + (dir / "stats.safetensors").string(),
      "--out " + ok + " --report " + (dir / "m_link/model.safetensors").string(),
  };
  for (const std::string& c : cases) {
    const CliRun r = tenfold_cli(dir, base + " " + c);
    EXPECT_EQ(r.code, 1) << c << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c << "\n" << r.err;
    EXPECT_NE(r.err.find("is the input file"), std::string::npos) << c << "\n" << r.err;
    EXPECT_FALSE(fs::exists(ok)) << c;
  }
  EXPECT_EQ(slurp(dir / "m/model.safetensors"), model);
  EXPECT_EQ(slurp(dir / "m/config.json"), config);
  EXPECT_EQ(slurp(dir / "stats.safetensors"), stats);

  // The library refuses the same for its callers (the Python package).
  tenfold::attention::CheckpointOptions o;
  o.compress.rank = 3;
  o.calibration = dir / "stats.safetensors";
  for (const fs::path& out : {dir / "config_link.json", dir / "stats.safetensors"}) {
    EXPECT_THROW(tenfold::attention::compress_checkpoint(dir / "m/model.safetensors", out, o),
                 tenfold::IoError)
        << out;
  }
  EXPECT_EQ(slurp(dir / "m/config.json"), config);
  EXPECT_EQ(slurp(dir / "stats.safetensors"), stats);
}

// A config.json that contradicts itself or the tensors is refused in one line naming
// the keys and values, by compress and analyze alike.
TEST(Cli, AttentionConfigMustAgreeWithItselfAndTheTensors) {
  TempDir dir;
  struct Case {
    std::string config, message;
  };
  const std::vector<Case> cases = {
      {R"({"num_attention_heads": 2, "n_head": 4})",
       "num_attention_heads = 2 disagrees with n_head = 4"},
      {R"({"num_attention_heads": 2, "hidden_size": 8, "n_embd": 16})",
       "hidden_size = 8 disagrees with n_embd = 16"},
      {R"({"num_attention_heads": 2, "hidden_size": 16})",
       "hidden size 16 (hidden_size, n_embd or dim) disagrees with the checkpoint, whose "
       "attention layers take inputs of width 8"},
      {R"({"num_attention_heads": 2, "scale_attn_weights": 1})",
       "scale_attn_weights is 1, not true or false"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const fs::path sub = dir / ("c" + std::to_string(i));
    fs::create_directories(sub);
    TinyBert(1).save(sub / "model.safetensors");
    std::ofstream(sub / "config.json") << cases[i].config;
    for (const std::string cmd : {"compress", "analyze"}) {
      const std::string args =
          "attention " + cmd + " " + (sub / "model.safetensors").string() +
          (cmd == "compress" ? " --shared-dim 3 --out " + (sub / "out.safetensors").string() : "");
      const CliRun r = tenfold_cli(dir, args);
      EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
      EXPECT_EQ(r.err_lines(), 1) << args << "\n" << r.err;
      EXPECT_NE(r.err.find(cases[i].message), std::string::npos) << args << "\n" << r.err;
      EXPECT_NE(r.err.find("config.json"), std::string::npos) << args << "\n" << r.err;
    }
    EXPECT_FALSE(fs::exists(sub / "out.safetensors"));
  }
}

// GPT-2's config may drop the 1/sqrt(d) (scale_attn_weights: false) or divide layer
// l's scores by l + 1 (scale_attn_by_inverse_layer_idx): the full-rank collaborative
// layer written must give the model's own scores, computed here from the weights.
TEST(Cli, AttentionFoldsGpt2ConfigScaling) {
  TempDir dir;
  TinyBert(2, "").save(dir / "bert.safetensors");
  const TinyGpt2 gpt2(tenfold::io::SafetensorsFile(dir / "bert.safetensors"));
  const index_t heads = 2, d = 4, dim = 8;
  std::vector<double> x(dim), y(dim);  // a query and a key token
  for (index_t i = 0; i < dim; ++i) {
    x[static_cast<std::size_t>(i)] = std::sin(i + 1.0);
    y[static_cast<std::size_t>(i)] = std::cos(2.0 * i + 1.0);
  }
  struct Case {
    std::string config;
    bool by_sqrt_d, by_layer;
  };
  const std::vector<Case> cases = {
      {R"("scale_attn_weights": false)", false, false},
      {R"("scale_attn_by_inverse_layer_idx": true)", true, true},
      {R"("scale_attn_weights": false, "scale_attn_by_inverse_layer_idx": true)", false, true},
      {R"("scale_attn_weights": true)", true, false},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const fs::path sub = dir / ("c" + std::to_string(c));
    fs::create_directories(sub);
    tenfold::io::save_safetensors(sub / "model.safetensors", gpt2.tensors, {{"format", "pt"}});
    std::ofstream(sub / "config.json")
        << R"({"model_type": "gpt2", "n_head": 2, "n_embd": 8, )" << cases[c].config << "}";
    const CliRun r = tenfold_cli(dir, "attention compress " + (sub / "model.safetensors").string() +
                                          " --shared-dim 8 --dtype float64 -q --out " +
                                          (sub / "o.safetensors").string());
    ASSERT_EQ(r.code, 0) << cases[c].config << ": " << r.err;
    const tenfold::io::SafetensorsFile res(sub / "o.safetensors");
    for (int l = 0; l < 2; ++l) {
      // The model's scores s_h = scale (W_Q^h^T x + b_Q^h) . (W_K^h^T y), up to the
      // key bias's row constant, from the fused (in, 3 out) weight [W_Q | W_K | W_V].
      const std::vector<float>& w = gpt2.data[static_cast<std::size_t>(2 * l)];
      const std::vector<float>& b = gpt2.data[static_cast<std::size_t>(2 * l + 1)];
      const double scale = (cases[c].by_sqrt_d ? 1.0 / std::sqrt(double(d)) : 1.0) /
                           (cases[c].by_layer ? l + 1.0 : 1.0);
      // The collaborative form: sum_r m[h, r] (Q_r . x)(K_r . y) + v_h . y.
      const std::string p = "transformer.h." + std::to_string(l) + ".attn.collab.";
      const auto m = res.read<double>(p + "mixing").values();               // (H, R) row-major
      const auto q = res.read<double>(p + "query.weight").values();         // (R, D)
      const auto k = res.read<double>(p + "key.weight").values();           // (R, D)
      const auto v = res.read<double>(p + "content_bias.weight").values();  // (H, D)
      for (index_t h = 0; h < heads; ++h) {
        double want = 0.0, got = 0.0, size = 0.0;
        for (index_t j = h * d; j < (h + 1) * d; ++j) {
          double qj = b[static_cast<std::size_t>(j)], kj = 0.0;
          for (index_t i = 0; i < dim; ++i) {
            qj += w[static_cast<std::size_t>(i * 24 + j)] * x[static_cast<std::size_t>(i)];
            kj += w[static_cast<std::size_t>(i * 24 + 8 + j)] * y[static_cast<std::size_t>(i)];
          }
          want += scale * qj * kj;
          size += std::abs(scale * qj * kj);
        }
        for (index_t r2 = 0; r2 < 8; ++r2) {
          double qx = 0.0, ky = 0.0;
          for (index_t i = 0; i < dim; ++i) {
            qx += q[static_cast<std::size_t>(r2 * dim + i)] * x[static_cast<std::size_t>(i)];
            ky += k[static_cast<std::size_t>(r2 * dim + i)] * y[static_cast<std::size_t>(i)];
          }
          got += m[static_cast<std::size_t>(h * 8 + r2)] * qx * ky;
        }
        for (index_t i = 0; i < dim; ++i)
          got += v[static_cast<std::size_t>(h * dim + i)] * y[static_cast<std::size_t>(i)];
        // float32 weights, float64 arithmetic: the difference is float64 round-off.
        EXPECT_NEAR(got, want, 1e-12 * (size + 1.0)) << cases[c].config << " layer " << l;
      }
    }
  }
}
