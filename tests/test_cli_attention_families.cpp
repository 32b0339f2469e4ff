// The program's attention command on each model family's checkpoint, run as a user
// runs it: DistilBERT, ALBERT, ViT/DeiT and GPT-2 (a fused Conv1D) tensor names, and
// config.json: the head count read from it, GPT-2's score scaling folded into the
// written layers, and a config that contradicts itself or the tensors refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "cli_run.hpp"
#include "temp_dir.hpp"
#include "tenfold/io.hpp"
#include "tiny_bert.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

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
