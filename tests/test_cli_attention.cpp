// The program's attention command on a BERT-named checkpoint, run as a user runs it:
// compress rewrites the query and key weights and copies the rest, analyze, bad
// checkpoints in one line and no output, --dtype, calibration statistics, and outputs
// that are inputs refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "cli_run.hpp"
#include "temp_dir.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tiny_bert.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

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
