// TinyBert, the checkpoint the tests of the program run its attention command on
// (test_cli.cpp, test_cli_attention.cpp, test_cli_attention_families.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tenfold/safetensors.hpp"
#include "tenfold/tensor.hpp"

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
    const auto add = [&](const std::string& name, std::vector<tenfold::index_t> shape) {
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
  void save(const std::filesystem::path& p) const {
    tenfold::io::save_safetensors(p, tensors, {{"format", "pt"}});
  }
};
