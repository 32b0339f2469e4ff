// Limits the library enforces before it works: the largest CP rank of a shape, the
// memory a request needs, the checkpoint's head count and names, and folders of
// results written as one unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attention/checkpoint_parts.hpp"
#include "random_matrix.hpp"
#include "temp_dir.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace fs = std::filesystem;
using tenfold::index_t;

namespace {

// Runs f, expecting an exception of type E whose message holds every part.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<double> random_values(index_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  return tenfold::test::gaussian<double>(n, 1, 1.0, gen).values();
}

// A CP-form tensor of shape dims with one component.
tenfold::KTensor<double> rank_one(const std::vector<index_t>& dims) {
  tenfold::KTensor<double> k;
  k.weights = {1.0};
  for (index_t d : dims) k.factors.emplace_back(d, 1, std::vector<double>(d, 1.0));
  return k;
}

}  // namespace

TEST(Limits, MaxCpRankIsTheSmallestProductOfAllSizesButOne) {
  EXPECT_EQ(tenfold::max_cp_rank(std::vector<index_t>{10, 8, 6}), 48);
  EXPECT_EQ(tenfold::max_cp_rank(std::vector<index_t>{5, 3}), 3);
  EXPECT_EQ(tenfold::max_cp_rank(std::vector<index_t>{4, 0, 3}), 0);
  const index_t big = index_t{1} << 40;
  EXPECT_EQ(tenfold::max_cp_rank(std::vector<index_t>{big, big, big}),
            std::numeric_limits<index_t>::max());
}

TEST(Limits, CpRefusesARankNoTensorOfTheShapeHas) {
  const tenfold::Tensor<double> x({10, 8, 6}, random_values(480, 3));
  tenfold::CpOptions o;
  o.rank = 49;
  o.max_iters = 2;
  expect_error<tenfold::InvalidArgument>([&] { tenfold::cp_als(x, o); },
                                         {"rank 49 exceeds 48", "(10, 8, 6)"});
  o.rank = 48;
  EXPECT_EQ(tenfold::cp_als(x, o).model.rank(), 48);
  // The same bound for the operand forms: a 3 x 2 x 2 tensor has rank at most 4.
  o.rank = 5;
  expect_error<tenfold::InvalidArgument>(
      [&] {
        tenfold::cp_als(rank_one({3, 2, 2}), o);
      },
      {"exceeds 4"});
}

TEST(Limits, TuckerRefusesAModeRankAboveTheOtherSizes) {
  const tenfold::Tensor<double> x({10, 2, 2}, random_values(40, 5));
  tenfold::TuckerOptions o;
  o.ranks = {5, 2, 2};
  expect_error<tenfold::InvalidArgument>([&] { tenfold::tucker(x, o); },
                                         {"rank 5 of mode 0 exceeds 4"});
  o.ranks = {4, 2, 2};
  EXPECT_EQ(tenfold::tucker(x, o).model.ranks(), (std::vector<index_t>{4, 2, 2}));
}

TEST(Limits, RequestsThatCannotFitAreRefusedBeforeAllocating) {
  // A 100000^3 tensor in CP form is 2.4 MB; CP-ALS of rank 10^6 on it would need
  // terabytes for its R x R Grams alone.
  const tenfold::KTensor<double> k = rank_one({100000, 100000, 100000});
  tenfold::CpOptions o;
  o.rank = 1000000;
  expect_error<tenfold::MemoryError>([&] { tenfold::cp_als(k, o); },
                                     {"rank 1000000 needs about", "GiB", "bytes", "available"});
  // The same through the Tucker form (core 1 x 1 x 1).
  tenfold::TTensor<double> t(tenfold::Tensor<double>({1, 1, 1}, {1.0}), k.factors);
  expect_error<tenfold::MemoryError>([&] { tenfold::cp_als(t, o); }, {"needs about"});
  // Dense: the mode Gram of a 160000 x 2 x 1 tensor (2.5 MB) is 200 GB.
  const tenfold::Tensor<double> tall({160000, 2, 1}, random_values(320000, 9));
  tenfold::TuckerOptions to;
  to.ranks = {2, 2, 1};
  expect_error<tenfold::MemoryError>([&] { tenfold::tucker(tall, to); }, {"Tucker needs about"});
  o.rank = 1;
  o.init = tenfold::CpInit::nvecs;
  expect_error<tenfold::MemoryError>([&] { tenfold::cp_als(tall, o); }, {"needs about"});
}

TEST(Limits, DeviceRequestsThatCannotFitAreRefused) {
  if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  // Measured against the device's free memory (cudaMemGetInfo), before cudaMalloc.
  tenfold::CpOptions o;
  o.rank = 1000000;
  o.backend = tenfold::Backend::cuda;
  expect_error<tenfold::MemoryError>(
      [&] {
        tenfold::cp_als(rank_one({100000, 100000, 100000}), o);
      },
      {"needs about", "of device memory", "available"});
  const tenfold::Tensor<double> tall({160000, 2, 1}, random_values(320000, 9));
  tenfold::TuckerOptions to;
  to.ranks = {2, 2, 1};
  to.backend = tenfold::Backend::cuda;
  expect_error<tenfold::MemoryError>([&] { tenfold::tucker(tall, to); }, {"of device memory"});
}

TEST(Limits, AttentionRankBoundAppliesBelowTheExactForm) {
  // Heads wider than the input (d = 8 > D = 4): the H x D x D tensor has rank at most
  // min(H D, D^2) = 8, below H d = 16. R in (8, 16) is refused, R = 16 is the exact form.
  tenfold::attention::QueryKeyLayer<double> l;
  l.heads = 2;
  l.head_dim = 8;
  l.query_weight = tenfold::Matrix<double>(4, 16, random_values(64, 1));
  l.key_weight = tenfold::Matrix<double>(4, 16, random_values(64, 2));
  tenfold::attention::CompressOptions o;
  o.rank = 10;
  expect_error<tenfold::InvalidArgument>([&] { tenfold::attention::compress(l, o); },
                                         {"rank 10 exceeds 8", "H d = 16"});
  o.rank = 16;
  EXPECT_LT(tenfold::attention::compress(l, o).relative_error, 1e-12);
  o.rank = 8;
  o.max_iters = 3;
  EXPECT_NO_THROW(tenfold::attention::compress(l, o));
}

TEST(Limits, CheckpointHeadsAndNamesAreChecked) {
  TempDir dir;
  std::vector<float> w(64, 0.25f);
  w[3 * 8 + 5] = std::numeric_limits<float>::quiet_NaN();  // file index [3, 5] of the key
  const std::vector<float> ones(64, 0.5f);
  const auto bytes = [](const std::vector<float>& v) {
    return std::as_bytes(std::span<const float>(v));
  };
  const std::string p = "encoder.layer.0.attention.self.";
  const std::vector<tenfold::io::SafetensorsTensor> tensors = {
      {p + "query.weight", "F32", {8, 8}, bytes(ones)},
      {p + "key.weight", "F32", {8, 8}, bytes(w)}};
  tenfold::io::save_safetensors(dir / "m.safetensors", tensors, {});
  std::ofstream(dir / "config.json") << R"({"num_attention_heads": 4})";
  tenfold::attention::CheckpointOptions o;
  o.compress.rank = 2;
  o.heads = 2;
  expect_error<tenfold::InvalidArgument>(
      [&] { tenfold::attention::compress_checkpoint(dir / "m.safetensors", dir / "o", o); },
      {"heads = 2 disagrees with the 4 attention heads", "config.json"});
  o.heads = 4;
  expect_error<tenfold::InvalidArgument>(
      [&] { tenfold::attention::compress_checkpoint(dir / "m.safetensors", dir / "o", o); },
      {"'" + p + "key.weight' has a non-finite entry (NaN) at index [3, 5]"});
  EXPECT_FALSE(fs::exists(dir / "o"));

  const std::vector<tenfold::io::SafetensorsTensor> huge = {
      {"encoder.layer.3000000000.attention.self.query.weight", "F32", {8, 8}, bytes(ones)},
      {"encoder.layer.3000000000.attention.self.key.weight", "F32", {8, 8}, bytes(ones)}};
  tenfold::io::save_safetensors(dir / "huge.safetensors", huge, {});
  expect_error<tenfold::IoError>(
      [&] {
        tenfold::attention::find_layers(tenfold::io::SafetensorsFile(dir / "huge.safetensors"));
      },
      {"layer index 3000000000", "too large"});
}

TEST(Limits, FolderIsWrittenAsOneUnit) {
  TempDir dir;
  const auto write = [](const fs::path& p, const std::string& text) {
    tenfold::io::write_file_atomically(p, [&](std::ostream& os) { os << text; });
  };
  // New, in a parent that does not exist yet.
  tenfold::io::write_folder_atomically(dir / "a/res", [&](const fs::path& d) {
    for (int i = 0; i < 8; ++i) write(d / ("factor_" + std::to_string(i)), "old");
  });
  EXPECT_EQ(entries(dir / "a/res").size(), 8u);

  // Replaced whole: while the writer runs, readers see the complete old folder; after,
  // only the new files, and no temporary sibling.
  tenfold::io::write_folder_atomically(dir / "a/res/", [&](const fs::path& d) {
    EXPECT_EQ(entries(dir / "a/res").size(), 8u);
    for (int i = 0; i < 3; ++i) {
      write(d / ("factor_" + std::to_string(i)), "new");
      EXPECT_EQ(entries(dir / "a/res").size(), 8u);
    }
  });
  EXPECT_EQ(entries(dir / "a/res"), (std::vector<std::string>{"factor_0", "factor_1", "factor_2"}));
  EXPECT_EQ(entries(dir / "a"), (std::vector<std::string>{"res"}));

  // A writer that fails leaves the folder as it was and nothing beside it.
  EXPECT_THROW(tenfold::io::write_folder_atomically(dir / "a/res",
                                                    [&](const fs::path& d) {
                                                      write(d / "factor_0", "partial");
                                                      throw tenfold::IoError("disk full");
                                                    }),
               tenfold::IoError);
  EXPECT_EQ(entries(dir / "a/res"), (std::vector<std::string>{"factor_0", "factor_1", "factor_2"}));
  std::ifstream in(dir / "a/res/factor_0");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "new");
  EXPECT_EQ(entries(dir / "a"), (std::vector<std::string>{"res"}));

  // Through a symlink, the folder it points to is replaced.
  fs::create_symlink(dir / "a/res", dir / "link");
  tenfold::io::write_folder_atomically(dir / "link",
                                       [&](const fs::path& d) { write(d / "x", "1"); });
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(entries(dir / "a/res"), (std::vector<std::string>{"x"}));
}
