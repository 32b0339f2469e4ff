// Data-aware attention compression: the whitened objective against dense score
// computations on the calibration tokens, on layers whose inputs live in a subspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "attention_test_util.hpp"
#include "random_matrix.hpp"
#include "temp_dir.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/attention_checkpoint.hpp"
#include "tenfold/error.hpp"
#include "tenfold/safetensors.hpp"

namespace {

using namespace tenfold;
using namespace tenfold::attention;
using namespace tenfold::test;

template <class T>
Matrix<double> as_double(const Matrix<T>& m) {
  Matrix<double> out(m.rows(), m.cols());
  for (index_t i = 0; i < m.size(); ++i) out.data()[i] = static_cast<double>(m.data()[i]);
  return out;
}

template <class T>
QueryKeyLayer<double> as_double(const QueryKeyLayer<T>& l) {
  QueryKeyLayer<double> out;
  out.heads = l.heads;
  out.head_dim = l.head_dim;
  out.query_weight = as_double(l.query_weight);
  out.key_weight = as_double(l.key_weight);
  return out;
}

template <class T>
CollaborativeLayer<double> as_double(const CollaborativeLayer<T>& c) {
  CollaborativeLayer<double> out;
  out.mixing = as_double(c.mixing);
  out.query = as_double(c.query);
  out.key = as_double(c.key);
  out.context_scale = c.context_scale;
  return out;
}

// S = X X^T / n, by loops.
Matrix<double> moment(const Matrix<double>& x) {
  Matrix<double> s(x.rows(), x.rows());
  for (index_t i = 0; i < x.rows(); ++i)
    for (index_t j = 0; j < x.rows(); ++j) {
      double acc = 0.0;
      for (index_t t = 0; t < x.cols(); ++t) acc += x(i, t) * x(j, t);
      s(i, j) = acc / static_cast<double>(x.cols());
    }
  return s;
}

// ||S - S~|| / ||S|| of the score matrices on queries X and keys Y: for a layer without
// biases, sqrt(sum_h E[(x^T (T_h - T~_h) y)^2] / sum_h E[(x^T T_h y)^2]) over the tokens.
template <class T>
double dense_data_error(const QueryKeyLayer<T>& l, const CollaborativeLayer<T>& c,
                        const Matrix<double>& x, const Matrix<double>& y) {
  const Tensor<double> s = scores(as_double(l), x, y), st = scores(as_double(c), x, y);
  double num = 0.0, den = 0.0;
  for (index_t i = 0; i < s.numel(); ++i) {
    num += (s[i] - st[i]) * (s[i] - st[i]);
    den += s[i] * s[i];
  }
  return std::sqrt(num / den);
}

// n tokens in the span of U (D x k): X = U C with Gaussian C.
Matrix<double> tokens_in(const Matrix<double>& u, index_t n, std::mt19937_64& gen) {
  const Matrix<double> c = gaussian<double>(u.cols(), n, 1.0, gen);
  Matrix<double> x(u.rows(), n);
  for (index_t t = 0; t < n; ++t)
    for (index_t p = 0; p < u.cols(); ++p)
      for (index_t i = 0; i < u.rows(); ++i) x(i, t) += u(i, p) * c(p, t);
  return x;
}

// Anisotropic full-rank tokens: rows scaled by exp(-4 i / D).
Matrix<double> anisotropic_tokens(index_t input, index_t n, std::mt19937_64& gen) {
  Matrix<double> x = gaussian<double>(input, n, 1.0, gen);
  for (index_t t = 0; t < n; ++t)
    for (index_t i = 0; i < input; ++i) x(i, t) *= std::exp(-4.0 * i / input);
  return x;
}

Matrix<double> identity(index_t n, double c) {
  Matrix<double> s(n, n);
  for (index_t i = 0; i < n; ++i) s(i, i) = c;
  return s;
}

template <class T>
bool bitwise_equal(const Matrix<T>& a, const Matrix<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(T) * static_cast<std::size_t>(a.size())) == 0;
}

// H = 4 heads of d = 12 over D = 48; the inputs span k = 5 dimensions, so on them every
// head's logits x^T T_h y form a k x k matrix and rank R = H k = 20 represents all of
// them exactly, while the whole tensor (48 generic components) needs more.
TEST(AttentionCalibration, DataAwareRecoversTheLogitsOnTheInputSubspace) {
  const index_t heads = 4, d = 12, input = 48, k = 5, rank = heads * k;
  const auto l = random_layer<double>(heads, d, input, false, 1);
  std::mt19937_64 gen(2);
  const Matrix<double> u = orthonormal(input, k, gen);
  // Calibration tokens, and held-out ones from the same subspace.
  const Matrix<double> x = tokens_in(u, 40, gen), fresh = tokens_in(u, 30, gen);
  InputMoments mo;
  mo.query = moment(x);
  CompressOptions o;
  o.rank = rank;
  o.damping = 1e-10;
  const CompressResult<double> aware = compress(l, o, mo);
  const CompressResult<double> weights = compress(l, o);
  // The damped objective's minimum is at most damping times a constant of order one
  // (the exact-on-the-subspace model pays only for the damped directions), so the
  // error on the subspace is of order sqrt(damping) = 1e-5.
  const double bound = 100.0 * std::sqrt(o.damping);
  EXPECT_LT(dense_data_error(l, aware.layer, x, x), bound);
  EXPECT_LT(dense_data_error(l, aware.layer, fresh, fresh), bound);
  ASSERT_TRUE(aware.data_error.has_value());
  EXPECT_LT(*aware.data_error, bound);
  // Weight-only spends the rank on directions the inputs never take.
  EXPECT_GT(dense_data_error(l, weights.layer, x, x), 0.1);
  EXPECT_GT(dense_data_error(l, weights.layer, fresh, fresh), 0.1);
  // ... and wins in weight space, which data-aware does not optimise.
  EXPECT_LT(weights.relative_error, aware.relative_error);
}

TEST(AttentionCalibration, EveryStartWorksInTheWhitenedSpace) {
  const index_t heads = 4, d = 12, input = 48, k = 5;
  const auto l = random_layer<double>(heads, d, input, false, 3);
  std::mt19937_64 gen(4);
  const Matrix<double> x = tokens_in(orthonormal(input, k, gen), 40, gen);
  InputMoments mo;
  mo.query = moment(x);
  for (Init init : {Init::structured, Init::heads, Init::nvecs, Init::random}) {
    CompressOptions o;
    o.rank = heads * k;
    o.damping = 1e-6;
    o.init = init;
    o.max_iters = 300;
    const double aware = *compress(l, o, mo).data_error;
    const double weights = qk_data_error(l, compress(l, o).layer, mo);
    EXPECT_LT(aware, 0.1 * weights) << to_string(init);
  }
}

template <class T>
void check_data_error_is_dense(bool cross) {
  const index_t heads = 3, d = 8, input = 24;
  const auto l = random_layer<T>(heads, d, input, false, 5);
  std::mt19937_64 gen(6);
  const Matrix<double> x = anisotropic_tokens(input, 60, gen);
  const Matrix<double> y = cross ? gaussian<double>(input, 50, 0.5, gen) : x;
  InputMoments mo;
  mo.query = moment(x);
  if (cross) mo.key = moment(y);
  CompressOptions o;
  o.rank = 10;
  const CompressResult<T> r = compress(l, o, mo);
  ASSERT_TRUE(r.data_error.has_value());
  // Both sides are computed in double from the same factors: only round-off differs.
  EXPECT_NEAR(*r.data_error, dense_data_error(l, r.layer, x, y), 1e-10);
  EXPECT_NEAR(r.relative_error, qk_error(l, r.layer), 1e-12);
  // Data-aware beats weight-only on the objective it minimises.
  const CompressResult<T> w = compress(l, o);
  EXPECT_FALSE(w.data_error.has_value());
  EXPECT_LT(*r.data_error, qk_data_error(l, w.layer, mo));
  EXPECT_NEAR(qk_data_error(l, w.layer, mo), dense_data_error(l, w.layer, x, y), 1e-10);
  // W~ keeps unit columns, the scale in the mixing.
  for (const Matrix<T>* f : {&r.layer.query, &r.layer.key})
    for (index_t j = 0; j < o.rank; ++j) {
      double n2 = 0.0;
      for (index_t i = 0; i < input; ++i) n2 += double((*f)(i, j)) * double((*f)(i, j));
      EXPECT_NEAR(n2, 1.0, 100 * std::numeric_limits<T>::epsilon());
    }
}

TEST(AttentionCalibration, DataErrorEqualsDenseScoresDouble) {
  check_data_error_is_dense<double>(false);
}
TEST(AttentionCalibration, DataErrorEqualsDenseScoresFloat) {
  check_data_error_is_dense<float>(false);
}
TEST(AttentionCalibration, CrossAttentionDataErrorDouble) {
  check_data_error_is_dense<double>(true);
}
TEST(AttentionCalibration, CrossAttentionDataErrorFloat) { check_data_error_is_dense<float>(true); }

template <class T>
void check_identity_is_weight_only() {
  const auto l = random_layer<T>(4, 6, 20, false, 7);
  CompressOptions o;
  o.rank = 9;
  const CompressResult<T> w = compress(l, o);
  for (double c : {1.0, 2.5})
    for (double damping : {0.0, 1e-2}) {
      o.damping = damping;
      InputMoments mo;
      mo.query = identity(20, c);
      const CompressResult<T> r = compress(l, o, mo);
      EXPECT_TRUE(bitwise_equal(r.layer.mixing, w.layer.mixing));
      EXPECT_TRUE(bitwise_equal(r.layer.query, w.layer.query));
      EXPECT_TRUE(bitwise_equal(r.layer.key, w.layer.key));
      EXPECT_EQ(r.relative_error, w.relative_error);
      EXPECT_EQ(r.iterations, w.iterations);
      EXPECT_NEAR(*r.data_error, w.relative_error, 1e-12);
      mo.key = identity(20, 3.0);
      EXPECT_TRUE(bitwise_equal(compress(l, o, mo).layer.query, w.layer.query));
    }
}

TEST(AttentionCalibration, IdentityMomentsGiveTheWeightOnlyResultDouble) {
  check_identity_is_weight_only<double>();
}
TEST(AttentionCalibration, IdentityMomentsGiveTheWeightOnlyResultFloat) {
  check_identity_is_weight_only<float>();
}

TEST(AttentionCalibration, FullRankIsExactInBothSpaces) {
  const auto l = random_layer<double>(3, 4, 12, false, 8);
  std::mt19937_64 gen(9);
  InputMoments mo;
  mo.query = moment(anisotropic_tokens(12, 30, gen));
  CompressOptions o;
  o.rank = 12;
  const CompressResult<double> r = compress(l, o, mo);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_LT(r.relative_error, 1e-14);
  EXPECT_LT(*r.data_error, 1e-14);
}

TEST(AttentionCalibration, ContentVectorsStayExact) {
  auto l = random_layer<double>(3, 4, 12, false, 10);
  std::mt19937_64 gen(11);
  l.query_bias = gaussian<double>(12, 1, 1.0, gen).values();
  InputMoments mo;
  mo.query = moment(anisotropic_tokens(12, 30, gen));
  CompressOptions o;
  o.rank = 5;
  const Matrix<double> c = compress(l, o, mo).layer.content, e = exact(l).content;
  ASSERT_TRUE(bitwise_equal(c, e));
}

void expect_refused(const InputMoments& mo, const CompressOptions& o, const std::string& part) {
  const auto l = random_layer<double>(2, 3, 6, false, 12);
  try {
    compress(l, o, mo);
    ADD_FAILURE() << "accepted; expected an error mentioning '" << part << "'";
  } catch (const tenfold::Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(AttentionCalibration, BadMomentsAreRefused) {
  CompressOptions o;
  o.rank = 3;
  const Matrix<double> good = identity(6, 1.0);
  InputMoments mo;
  mo.query = identity(5, 1.0);
  expect_refused(mo, o, "query-side input moment is 5x5, expected D x D = 6x6");
  mo.query = good;
  mo.key = identity(6, 1.0);
  mo.key(2, 3) = std::numeric_limits<double>::quiet_NaN();
  expect_refused(mo, o, "key-side input moment");
  mo.key = good;
  mo.key(1, 0) = 0.5;
  expect_refused(mo, o, "key-side input moment is not symmetric");
  mo.key = InputMoments{}.key;
  mo.query = good;
  mo.query(0, 1) = mo.query(1, 0) = 2.0;  // eigenvalues 3 and -1
  expect_refused(mo, o, "not positive semi-definite: smallest eigenvalue -1");
  mo.query = Matrix<double>(6, 6);
  expect_refused(mo, o, "zero diagonal");
  // Singular (rank one) without damping: no Cholesky factor.
  mo.query = Matrix<double>(6, 6);
  for (index_t i = 0; i < 6; ++i)
    for (index_t j = 0; j < 6; ++j) mo.query(i, j) = 1.0;
  o.damping = 0.0;
  expect_refused(mo, o, "singular");
  o.damping = -1.0;
  expect_refused(mo, o, "damping must be finite and >= 0");
  o.damping = 1e-2;  // the same rank-one moment is fine once damped
  const auto l = random_layer<double>(2, 3, 6, false, 12);
  EXPECT_NO_THROW(compress(l, o, mo));
}

// Checkpoint level: a two-layer BERT-named checkpoint (H = 2, d = 4, D = 8) and its
// calibration statistics file.
namespace fs = std::filesystem;
using tenfold::io::SafetensorsTensor;

std::string prefix(int layer) {
  return "bert.encoder.layer." + std::to_string(layer) + ".attention.self.";
}

template <class T>
SafetensorsTensor entry(const std::string& name, const Matrix<T>& m) {
  return tenfold::io::safetensors_tensor(
      name, tenfold::TensorView<const T>(m.data(), {m.rows(), m.cols()}));
}

struct Fixture {
  TempDir dir;
  std::vector<Matrix<float>> weights;   // per layer: query, key, query bias (8 x 1)
  std::vector<Matrix<double>> moments;  // per layer
  Fixture() {
    std::mt19937_64 gen(20);
    std::vector<SafetensorsTensor> t;
    for (int l = 0; l < 2; ++l) {
      weights.push_back(gaussian<float>(8, 8, 0.4, gen));
      weights.push_back(gaussian<float>(8, 8, 0.4, gen));
      weights.push_back(gaussian<float>(8, 1, 1.0, gen));
      moments.push_back(moment(anisotropic_tokens(8, 30, gen)));
    }
    for (int l = 0; l < 2; ++l) {
      t.push_back(entry(prefix(l) + "query.weight", weights[3 * l]));
      t.push_back(entry(prefix(l) + "key.weight", weights[3 * l + 1]));
      SafetensorsTensor b = entry(prefix(l) + "query.bias", weights[3 * l + 2]);
      b.shape = {8};
      t.push_back(b);
    }
    tenfold::io::save_safetensors(dir / "model.safetensors", t);
  }
  // Writes a statistics file with the given moments per name and metadata.
  fs::path stats(const std::map<std::string, const Matrix<double>*>& m,
                 const std::map<std::string, std::string>& meta = {
                     {"tenfold.calibration.tokens", "60"},
                     {"tenfold.calibration.source", "test tokens"}}) {
    std::vector<SafetensorsTensor> t;
    for (const auto& [name, mat] : m) t.push_back(entry(name, *mat));
    const fs::path p = dir / "stats.safetensors";
    tenfold::io::save_safetensors(p, t, meta);
    return p;
  }
  fs::path good_stats() {
    return stats(
        {{prefix(0) + "input_moment", &moments[0]}, {prefix(1) + "input_moment", &moments[1]}});
  }
  CheckpointReport run(const fs::path& calibration, double damping = 1e-2) {
    CheckpointOptions o;
    o.compress.rank = 3;
    o.compress.damping = damping;
    o.heads = 2;
    o.calibration = calibration;
    return compress_checkpoint(dir / "model.safetensors", dir / "out.safetensors", o);
  }
};

TEST(AttentionCalibration, CheckpointRecordsBothErrorsAndTheStatistics) {
  Fixture f;
  const CheckpointReport rep = f.run(f.good_stats(), 0.05);
  EXPECT_EQ(rep.calibration_tokens, 60);
  EXPECT_EQ(rep.calibration_source, "test tokens");
  const tenfold::io::SafetensorsFile out(f.dir / "out.safetensors");
  const auto& meta = out.metadata();
  EXPECT_EQ(meta.at("tenfold.objective"), "data");
  EXPECT_EQ(meta.at("tenfold.calibration.tokens"), "60");
  EXPECT_EQ(meta.at("tenfold.calibration.source"), "test tokens");
  EXPECT_EQ(meta.at("tenfold.calibration.file"), "stats.safetensors");
  EXPECT_EQ(std::stod(meta.at("tenfold.calibration.damping")), 0.05);
  const auto weight = nlohmann::json::parse(meta.at("tenfold.relative_errors"));
  const auto data = nlohmann::json::parse(meta.at("tenfold.calibration.relative_errors"));
  ASSERT_EQ(data.size(), 2u);
  for (int l = 0; l < 2; ++l) {
    // The library on the same layer and moments gives the recorded figures.
    QueryKeyLayer<float> layer;
    layer.heads = 2;
    layer.head_dim = 4;
    layer.query_weight = f.weights[3 * l];
    layer.key_weight = f.weights[3 * l + 1];
    layer.query_bias = f.weights[3 * l + 2].values();
    CompressOptions o;
    o.rank = 3;
    o.damping = 0.05;
    InputMoments mo;
    mo.query = f.moments[static_cast<std::size_t>(l)];
    const CompressResult<float> r = compress(layer, o, mo);
    EXPECT_EQ(weight[l].get<double>(), r.relative_error);
    EXPECT_EQ(data[l].get<double>(), *r.data_error);
    EXPECT_EQ(rep.layers[static_cast<std::size_t>(l)].data_error, r.data_error);
  }
  // Without statistics: the weight objective, no calibration keys.
  f.run({});
  const tenfold::io::SafetensorsFile plain(f.dir / "out.safetensors");
  EXPECT_EQ(plain.metadata().at("tenfold.objective"), "weight");
  EXPECT_EQ(plain.metadata().count("tenfold.calibration.relative_errors"), 0u);
}

TEST(AttentionCalibration, CheckpointCallbackSeesEveryLayerAndAStopWritesNothing) {
  Fixture f;
  CheckpointOptions o;
  o.compress.rank = 3;
  o.compress.damping = 0.05;
  o.heads = 2;
  o.calibration = f.good_stats();
  std::vector<CompressProgress> seen;
  o.compress.callback = [&](const CompressProgress& p) {
    seen.push_back(p);
    return true;
  };
  const fs::path in = f.dir / "model.safetensors", out = f.dir / "out.safetensors";
  const CheckpointReport rep = compress_checkpoint(in, out, o);
  // Per layer: its sweeps in order (every trial), then the finished layer's figures.
  std::size_t k = 0;
  double seconds = 0.0;
  for (const LayerReport& lr : rep.layers) {
    int sweeps = 0;
    for (; k < seen.size() && !seen[k].layer_done; ++k) {
      EXPECT_EQ(seen[k].layer, lr.index);
      EXPECT_EQ(seen[k].iteration, ++sweeps);
      EXPECT_GE(seen[k].seconds, seconds);
      seconds = seen[k].seconds;
    }
    ASSERT_LT(k, seen.size());
    EXPECT_EQ(seen[k].layer, lr.index);
    EXPECT_EQ(seen[k].iteration, lr.iterations);
    EXPECT_EQ(seen[k].relative_error, lr.relative_error);
    EXPECT_GE(sweeps, lr.iterations);
    EXPECT_GT(lr.iterations, 0);
    ++k;
  }
  EXPECT_EQ(k, seen.size());
  EXPECT_LE(seconds, rep.seconds);

  // A stop after the first layer or inside the second one's ALS: Cancelled, and no
  // output (nor any temporary) is left.
  fs::remove(out);
  const int second = rep.layers[1].index;
  for (const auto& stop : std::vector<std::function<bool(const CompressProgress&)>>{
           [&](const CompressProgress& p) { return p.layer_done; },
           [&](const CompressProgress& p) { return p.layer == second && p.iteration == 2; }}) {
    o.compress.callback = [&](const CompressProgress& p) { return !stop(p); };
    EXPECT_THROW(compress_checkpoint(in, out, o), tenfold::Cancelled);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(f.dir.path())) files.push_back(e.path().filename());
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"model.safetensors", "stats.safetensors"}));
  }
}

TEST(AttentionCalibration, AnalyzeProgressSeesEveryLayerAndCanStop) {
  Fixture f;
  const fs::path in = f.dir / "model.safetensors";
  const std::vector<LayerRedundancy> all = analyze_checkpoint(in, 2);
  ASSERT_EQ(all.size(), 2u);
  std::vector<int> seen;
  const auto layers = analyze_checkpoint(in, 2, [&](const LayerRedundancy& l) {
    seen.push_back(l.index);
    return true;
  });
  EXPECT_EQ(seen, (std::vector<int>{all[0].index, all[1].index}));
  EXPECT_EQ(layers[1].redundancy.products.energy, all[1].redundancy.products.energy);
  seen.clear();
  EXPECT_THROW(analyze_checkpoint(in, 2,
                                  [&](const LayerRedundancy& l) {
                                    seen.push_back(l.index);
                                    return false;
                                  }),
               tenfold::Cancelled);
  EXPECT_EQ(seen, std::vector<int>{all[0].index});
}

TEST(AttentionCalibration, FloatStoredRankDeficientMomentIsAccepted) {
  // A moment of rank 3 rounded to float has eigenvalues of order eps_float, of either
  // sign: positive semi-definite up to the stored precision.
  Fixture f;
  std::mt19937_64 gen(21);
  const Matrix<double> s = moment(tokens_in(orthonormal(8, 3, gen), 3, gen));
  Matrix<float> sf(8, 8);
  for (index_t i = 0; i < 64; ++i) sf.data()[i] = static_cast<float>(s.data()[i]);
  std::vector<SafetensorsTensor> t = {entry(prefix(0) + "input_moment", sf),
                                      entry(prefix(1) + "input_moment", sf)};
  tenfold::io::save_safetensors(f.dir / "f32.safetensors", t,
                                {{"tenfold.calibration.tokens", "3"}});
  const CheckpointReport rep = f.run(f.dir / "f32.safetensors");
  EXPECT_TRUE(rep.layers[0].data_error.has_value());
  EXPECT_EQ(rep.calibration_source, "");
}

TEST(AttentionCalibration, BadStatisticsFilesAreRefusedNamingTheLayer) {
  Fixture f;
  Matrix<double> nonsym = f.moments[1], indefinite = identity(8, 1.0), nan = f.moments[1];
  nonsym(0, 5) += 0.5;
  indefinite(3, 3) = -2.0;
  nan(2, 2) = std::numeric_limits<double>::quiet_NaN();
  const Matrix<double> small = identity(7, 1.0);
  const std::string p0 = prefix(0) + "input_moment", p1 = prefix(1) + "input_moment";
  struct Case {
    fs::path file;
    std::string message;
  };
  std::vector<Case> cases;
  const auto add =
      [&](const std::map<std::string, const Matrix<double>*>& m, const std::string& message,
          const std::map<std::string, std::string>& meta = {{"tenfold.calibration.tokens", "60"}}) {
        const fs::path p = f.dir / ("bad" + std::to_string(cases.size()) + ".safetensors");
        fs::rename(f.stats(m, meta), p);
        cases.push_back({p, message});
      };
  add({{p0, &f.moments[0]}, {p1, &nonsym}},
      "calibration tensor '" + p1 + "' (layer 1) is not symmetric");
  add({{p0, &f.moments[0]}, {p1, &indefinite}},
      "'" + p1 + "' (layer 1) is not positive semi-definite: smallest eigenvalue -2");
  add({{p0, &f.moments[0]}, {p1, &nan}}, "'" + p1 + "' (layer 1)");
  add({{p0, &f.moments[0]}, {p1, &small}}, "(layer 1) has shape (7, 7), expected (8, 8)");
  add({{p0, &f.moments[0]}}, "no '" + p1 + "'");
  add({{p0, &f.moments[0]}, {p1, &f.moments[1]}, {"bert.pooler.input_moment", &f.moments[1]}},
      "'bert.pooler.input_moment' belongs to no attention layer");
  add({{p0, &f.moments[0]}, {p1, &f.moments[1]}}, "no tenfold.calibration.tokens", {});
  add({{p0, &f.moments[0]}, {p1, &f.moments[1]}}, "expected a positive integer",
      {{"tenfold.calibration.tokens", "12 tokens"}});
  for (const Case& c : cases) {
    try {
      f.run(c.file);
      ADD_FAILURE() << c.message << ": accepted";
    } catch (const tenfold::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(f.dir / "out.safetensors")) << c.message;
  }
}

TEST(AttentionCalibration, SingularStatisticsWithoutDampingNameTheLayer) {
  Fixture f;
  Matrix<double> ones(8, 8);
  for (double& v : ones.values()) v = 1.0;  // rank one
  const fs::path stats =
      f.stats({{prefix(0) + "input_moment", &ones}, {prefix(1) + "input_moment", &ones}});
  try {
    f.run(stats, 0.0);
    ADD_FAILURE() << "accepted";
  } catch (const tenfold::NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 (" + prefix(0) +
                                         "): the query-side input "
                                         "moment is singular"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(f.dir / "out.safetensors"));
  EXPECT_NO_THROW(f.run(stats, 1e-2));
}

}  // namespace
