// Sparse tensors: construction, files, the CSF MTTKRP against the dense one, CP-ALS on
// a sparse operand, CP-APR.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "cp/dense_operand.hpp"
#include "expect_throw.hpp"
#include "relative_difference.hpp"
#include "same_bits.hpp"
#include "sparse/sparse_operand.hpp"
#include "sparse_test_util.hpp"
#include "temp_dir.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/cp_apr.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/threads.hpp"

namespace tenfold {
namespace {

using test::expect_throw_with;
using test::random_factors;
using test::relative_difference;
using test::same_bits;

// A random sparse tensor with about `density` of its entries nonzero, drawn only from
// the even indices of mode 0 (so that half of its slices, and many fibres, are empty).
template <class T>
SparseTensor<T> random_sparse(std::vector<index_t> dims, double density, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const index_t numel = checked_numel(dims);
  const int order = static_cast<int>(dims.size());
  std::set<index_t> picked;
  const auto want = static_cast<std::size_t>(std::max(1.0, density * numel));
  while (picked.size() < want) {
    index_t lin = static_cast<index_t>(gen() % static_cast<std::uint64_t>(numel));
    if ((lin % dims[0]) % 2 == 1) lin -= 1;
    picked.insert(lin);
  }
  std::vector<index_t> coords(static_cast<std::size_t>(order) * picked.size());
  std::vector<T> values;
  for (index_t lin : picked) {
    const std::size_t k = values.size();
    index_t rest = lin;
    for (int n = 0; n < order; ++n) {
      coords[n * picked.size() + k] = rest % dims[static_cast<std::size_t>(n)];
      rest /= dims[static_cast<std::size_t>(n)];
    }
    values.push_back(static_cast<T>(u(gen)));
  }
  return SparseTensor<T>(std::move(dims), std::move(coords), std::move(values));
}

TEST(SparseTensor, SumsDuplicatesSortsAndDropsZeros) {
  // Entries (1,0) twice, (0,1), and (1,1) + (1,1) that cancel.
  const SparseTensor<double> x({2, 2}, {1, 0, 1, 1, 1, /**/ 0, 1, 0, 1, 1},
                               {2.0, 3.0, 4.0, 5.0, -5.0});
  ASSERT_EQ(x.nnz(), 2);
  EXPECT_EQ(x.coords(), (std::vector<index_t>{0, 1, 1, 0}));
  EXPECT_EQ(x.values(), (std::vector<double>{3.0, 6.0}));
  const Tensor<double> d = x.full();
  EXPECT_EQ(d(1, 0), 6.0);
  EXPECT_EQ(d(0, 1), 3.0);
  EXPECT_DOUBLE_EQ(x.norm(), std::sqrt(45.0));
}

TEST(SparseTensor, RefusesBadEntries) {
  expect_throw_with<InvalidArgument>(
      [] {
        SparseTensor<double>({2, 3}, {0, 1, 2, 3}, {1.0, 2.0});
      },
      "entry 1 has index 3 in mode 1 (NumPy axis 1), outside [0, 3)");
  expect_throw_with<DimensionMismatch>(
      [] {
        SparseTensor<double>({2, 3}, {0, 1, 2}, {1.0, 2.0});
      },
      "needs 2 x 2 coordinates");
  expect_throw_with<InvalidArgument>(
      [] {
        SparseTensor<double>({2, 3}, {0, 1}, {NAN});
      },
      "non-finite value (NaN)");
  expect_throw_with<InvalidArgument>(
      [] {
        SparseTensor<double>({2, 0}, {}, {});
      },
      "size of mode 1 must be at least 1");
}

TEST(SparseTensor, FromDenseKeepsTheNonzeros) {
  const SparseTensor<double> s = random_sparse<double>({5, 4, 3}, 0.3, 1);
  const Tensor<double> d = s.full();
  const SparseTensor<double> back = SparseTensor<double>::from_dense(d);
  EXPECT_EQ(back.coords(), s.coords());
  EXPECT_EQ(back.values(), s.values());
}

// MTTKRP of every mode on the CSF trees against the dense operand's, orders 2 to 5,
// with empty slices and fibres.
template <class T>
void check_mttkrp_against_dense(double tol) {
  auto c = detail::make_compute<T>(Backend::cpu);
  const std::vector<std::vector<index_t>> shapes = {
      {7, 5}, {6, 5, 4}, {4, 3, 5, 3}, {4, 3, 2, 3, 2}, {9, 1, 6}};
  std::uint64_t seed = 10;
  for (const auto& dims : shapes) {
    for (double density : {0.05, 0.4}) {
      const SparseTensor<T> xs = random_sparse<T>(dims, density, ++seed);
      const Tensor<T> xd = xs.full();
      for (index_t r : {1, 6}) {
        const auto f = random_factors<T>(dims, r, ++seed);
        std::vector<const T*> ptrs;
        for (const auto& v : f) ptrs.push_back(v.data());
        detail::SparseOperand<T> sparse(*c, xs);
        detail::DenseOperand<T> dense(*c, xd.view());
        for (int n = 0; n < static_cast<int>(dims.size()); ++n) {
          const auto size = static_cast<std::size_t>(dims[static_cast<std::size_t>(n)] * r);
          std::vector<T> a(size), b(size);
          sparse.mttkrp(n, ptrs, r, a.data());
          dense.mttkrp(n, ptrs, r, b.data());
          EXPECT_LT(relative_difference(a, b), tol)
              << "order " << dims.size() << " mode " << n << " rank " << r;
        }
        // nvecs Grams agree too.
        for (int n = 0; n < static_cast<int>(dims.size()); ++n) {
          const auto in = static_cast<std::size_t>(dims[static_cast<std::size_t>(n)]);
          std::vector<T> a(in * in), b(in * in);
          sparse.mode_gram(n, a.data());
          dense.mode_gram(n, b.data());
          EXPECT_LT(relative_difference(a, b), tol) << "Gram of mode " << n;
        }
      }
    }
  }
}

// A sum of at most a few hundred products: within a few hundred eps of the scale.
TEST(SparseMttkrp, MatchesDenseDouble) { check_mttkrp_against_dense<double>(1e-13); }
TEST(SparseMttkrp, MatchesDenseFloat) { check_mttkrp_against_dense<float>(1e-5); }

TEST(SparseMttkrp, SameBitsForAnyThreadCount) {
  auto c = detail::make_compute<double>(Backend::cpu);
  const SparseTensor<double> x = random_sparse<double>({300, 40, 30}, 0.05, 3);
  const auto f = random_factors<double>(x.dims(), 8, 4);
  std::vector<const double*> ptrs;
  for (const auto& v : f) ptrs.push_back(v.data());
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    detail::SparseOperand<double> op(*c, x);
    for (int n = 0; n < 3; ++n) {
      results.emplace_back(static_cast<std::size_t>(x.dim(n) * 8));
      op.mttkrp(n, ptrs, 8, results.back().data());
    }
  }
  set_num_threads(0);
  for (std::size_t i = 3; i < results.size(); ++i) EXPECT_EQ(results[i], results[i % 3]);
}

// An operand that takes its tensor leaves it empty and computes what the one that reads
// it computes, from the same trees: MTTKRPs, norm and (entries rebuilt from the first
// tree) mode Grams, with each CSF layout. The same arithmetic on the same entries: the
// same bits.
TEST(SparseOperand, TakingTheTensorReleasesItsEntries) {
  auto c = detail::make_compute<double>(Backend::cpu);
  const SparseTensor<double> x = random_sparse<double>({30, 20, 12, 9}, 0.05, 5);
  const auto f = random_factors<double>(x.dims(), 4, 6);
  std::vector<const double*> ptrs;
  for (const auto& v : f) ptrs.push_back(v.data());
  for (CsfLayout layout : {CsfLayout::all, CsfLayout::two, CsfLayout::one}) {
    SparseTensor<double> taken = x;
    detail::SparseOperand<double> owner(*c, std::move(taken), layout);
    detail::SparseOperand<double> reader(*c, x, layout);
    EXPECT_EQ(taken.nnz(), 0);
    EXPECT_EQ(owner.dims(), x.dims());
    EXPECT_EQ(owner.norm_squared(), reader.norm_squared());
    for (int n = 0; n < x.order(); ++n) {
      const auto in = static_cast<std::size_t>(x.dim(n));
      std::vector<double> a(in * 4), b(in * 4), ga(in * in), gb(in * in);
      owner.mttkrp(n, ptrs, 4, a.data());
      reader.mttkrp(n, ptrs, 4, b.data());
      EXPECT_EQ(a, b) << "mode " << n;
      owner.mode_gram(n, ga.data());
      reader.mode_gram(n, gb.data());
      EXPECT_EQ(ga, gb) << "Gram of mode " << n;
    }
  }
}

// With a mode larger than 2^32 the taken tensor is not narrowed to 32 bits: the trees are
// built from it as from the tensor kept, and it goes once they are built.
TEST(SparseOperand, TakingATensorWithAModeOver32BitsBuildsTheSameTrees) {
  auto c = detail::make_compute<double>(Backend::cpu);
  const SparseTensor<double> x =
      test::random_entries<double>({(index_t{1} << 32) + 1, 6, 5}, 300, 12);
  for (CsfLayout layout : {CsfLayout::all, CsfLayout::two, CsfLayout::one}) {
    SparseTensor<double> taken = x;
    detail::SparseOperand<double> owner(*c, std::move(taken), layout);
    detail::SparseOperand<double> reader(*c, x, layout);
    EXPECT_EQ(taken.nnz(), 0);
    ASSERT_EQ(owner.trees().size(), reader.trees().size());
    for (std::size_t t = 0; t < owner.trees().size(); ++t) {
      const SparseTensor<double> a = detail::csf_entries(*owner.trees()[t], x.dims());
      const SparseTensor<double> b = detail::csf_entries(*reader.trees()[t], x.dims());
      EXPECT_EQ(a.coords(), b.coords()) << to_string(layout) << ", tree " << t;
      EXPECT_EQ(a.values(), b.values()) << to_string(layout) << ", tree " << t;
      EXPECT_EQ(owner.trees()[t]->bytes(), reader.trees()[t]->bytes());
    }
    owner.with_entries([&](const SparseTensor<double>& e) { EXPECT_EQ(e.coords(), x.coords()); });
  }
}

// A planted rank-3 model observed at a random 30% of its entries (the rest zero).
SparseTensor<double> planted_sparse(std::uint64_t seed) {
  RandomCpOptions o;
  o.dims = {20, 15, 12};
  o.rank = 3;
  o.seed = seed;
  const Tensor<double> full = random_cp_tensor<double>(o).tensor;
  return SparseTensor<double>::from_dense(full.view());
}

TEST(SparseCpAls, FollowsTheDenseIterationFromTheSameStart) {
  const SparseTensor<double> x = random_sparse<double>({12, 10, 8}, 0.2, 5);
  const Tensor<double> d = x.full();
  CpOptions o;
  o.rank = 4;
  o.max_iters = 15;
  o.tol = 0.0;
  o.line_search = true;  // jumps at iterations 7, 9, ...
  std::vector<Matrix<double>> start;
  const auto f = random_factors<double>(x.dims(), 4, 6);
  for (int n = 0; n < 3; ++n) start.emplace_back(x.dim(n), 4, f[static_cast<std::size_t>(n)]);
  const CpResult<double> s = cp_als(x, o, start);
  const CpResult<double> dn = cp_als(d, o, start);
  ASSERT_EQ(s.fit_history.size(), dn.fit_history.size());
  // The same iteration up to rounding (the MTTKRPs sum in other orders).
  EXPECT_LT(relative_difference(s.fit_history, dn.fit_history), 1e-8);
  EXPECT_NEAR(s.fit, dn.fit, 1e-8);
}

TEST(SparseCpAls, RecoversAPlantedModelWithStartsAndLineSearch) {
  const SparseTensor<double> x = planted_sparse(7);
  CpOptions o;
  o.rank = 3;
  o.init = CpInit::random;  // (nvecs finds it in two sweeps)
  o.n_starts = 3;
  o.line_search = true;
  o.max_iters = 200;
  o.tol = 1e-10;
  const CpResult<double> res = cp_als(x, o);
  EXPECT_EQ(res.start_fits.size(), 3u);
  EXPECT_GT(res.fit, 1.0 - 1e-6);
  for (double f : res.start_fits) EXPECT_LE(f, res.fit);
}

// Bit for bit at a given thread count; across counts the dense steps of the loop (the
// Grams' sums) may round differently, so the models agree to rounding only.
TEST(SparseCpAls, RepeatsItselfAndAgreesAcrossThreadCounts) {
  const SparseTensor<double> x = random_sparse<double>({200, 30, 25}, 0.05, 8);
  CpOptions o;
  o.rank = 5;
  o.init = CpInit::random;
  o.max_iters = 10;
  std::vector<CpResult<double>> runs;
  for (int threads : {1, 2, 4, 4}) {
    set_num_threads(threads);
    runs.push_back(cp_als(x, o));
  }
  set_num_threads(0);
  EXPECT_EQ(runs[3].model.weights, runs[2].model.weights);
  EXPECT_EQ(runs[3].fit_history, runs[2].fit_history);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    EXPECT_LT(relative_difference(runs[i].fit_history, runs[0].fit_history), 1e-10);
    for (int n = 0; n < 3; ++n) {
      EXPECT_LT(relative_difference(runs[i].model.factors[static_cast<std::size_t>(n)].values(),
                                    runs[0].model.factors[static_cast<std::size_t>(n)].values()),
                1e-8);
    }
  }
}

TEST(SparseCpAls, RefusesWhatDoesNotApply) {
  const SparseTensor<double> x = random_sparse<double>({4, 3, 2}, 0.5, 9);
  CpOptions o;
  o.rank = 2;
  o.compress = CpCompress::on;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "compress = on applies to dense");
  o.compress = CpCompress::automatic;
  o.layout = Layout::row_major;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "layout = row_major");
  o.layout = Layout::col_major;
  o.rank = 7;
  expect_throw_with<InvalidArgument>([&] { cp_als(x, o); }, "rank 7 exceeds 6");
}

// cp_als taking the tensor (its indices in 32 bits, each array released as the last tree
// reads it): the same trees and, for nvecs, the same entries read back from the first tree
// in the same sorted order, so the same arithmetic as the call that reads it: the same
// bits, for each layout and start. The tensor is left empty after a run, whole after a
// refused call.
template <class T>
void expect_taking_gives_the_same_bits(const SparseTensor<T>& x, std::uint64_t seed) {
  for (CsfLayout layout : {CsfLayout::one, CsfLayout::two, CsfLayout::all}) {
    for (CpInit init : {CpInit::random, CpInit::nvecs}) {
      SCOPED_TRACE(std::string(to_string(layout)) + " trees, init " + std::string(to_string(init)) +
                   ", order " + std::to_string(x.order()));
      CpOptions o;
      o.rank = 3;
      o.init = init;
      o.max_iters = 8;
      o.seed = seed;
      SparseTensor<T> taken = x;
      CpOptions bad = o;
      bad.rank = 0;
      EXPECT_THROW(cp_als(std::move(taken), bad, {}, {layout}), InvalidArgument);
      bad.rank = 3;
      bad.compress = CpCompress::on;
      EXPECT_THROW(cp_als(std::move(taken), bad, {}, {layout}), InvalidArgument);
      EXPECT_EQ(taken.dims(), x.dims());
      EXPECT_EQ(taken.coords(), x.coords());
      EXPECT_EQ(taken.values(), x.values());
      const CpResult<T> a = cp_als(std::move(taken), o, {}, {layout});
      const CpResult<T> b = cp_als(x, o, {}, {layout});
      EXPECT_EQ(taken.nnz(), 0);
      EXPECT_TRUE(taken.dims().empty());
      EXPECT_TRUE(taken.coords().empty());
      EXPECT_TRUE(same_bits(a.fit_history, b.fit_history));
      EXPECT_TRUE(same_bits(a.model.weights, b.model.weights));
      for (std::size_t n = 0; n < x.dims().size(); ++n)
        EXPECT_TRUE(same_bits(a.model.factors[n].values(), b.model.factors[n].values()));
    }
  }
}

// 2- to 5-way, double and float, a mode of one slice.
TEST(SparseCpAls, TakingTheTensorGivesTheSameBitsAndEmptiesIt) {
  std::uint64_t seed = 20;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{30, 20, 12}, {14, 10, 8, 6}, {40, 25}, {8, 7, 1, 6, 5}}) {
    ++seed;
    expect_taking_gives_the_same_bits(random_sparse<double>(dims, 0.05, seed), seed);
  }
  ++seed;
  expect_taking_gives_the_same_bits(random_sparse<float>({30, 20, 12}, 0.05, seed), seed);
}

TEST(SparseFiles, TnsTextGzipAndBinaryRoundTrip) {
  TempDir dir;
  const SparseTensor<double> x = random_sparse<double>({9, 4, 7, 3}, 0.1, 11);
  std::vector<std::string> names = {"x.tns", "x.tfsparse"};
#ifdef TENFOLD_TEST_ZLIB
  names.push_back("x.tns.gz");
#endif
  for (const std::string& name : names) {
    const auto path = dir / name;
    if (name == "x.tfsparse") {
      io::save_sparse(path, x);
    } else {
      io::save_tns(path, x);
    }
    // The shape is given: the largest indices need not reach the sizes.
    const SparseTensor<double> y = name == "x.tfsparse" ? io::load_sparse_file<double>(path)
                                                        : io::load_tns<double>(path, x.dims());
    EXPECT_EQ(y.dims(), x.dims()) << name;
    EXPECT_EQ(y.coords(), x.coords()) << name;
    EXPECT_EQ(y.values(), x.values()) << name;  // shortest round-trip text is exact
  }
  // Float values stored as double read back converted.
  const SparseTensor<float> f = io::load_sparse<float>(dir / "x.tfsparse");
  EXPECT_EQ(f.nnz(), x.nnz());
}

TEST(SparseFiles, TnsIsOneBasedSkipsCommentsAndSumsDuplicates) {
  TempDir dir;
  std::ofstream(dir / "a.tns") << "# a comment\n1 1 1 2.5\n\n2 3 1 1\r\n1 1 1 0.5\n2 1 4 -1e-3";
  const SparseTensor<double> x = io::load_tns<double>(dir / "a.tns");
  EXPECT_EQ(x.dims(), (std::vector<index_t>{2, 3, 4}));
  ASSERT_EQ(x.nnz(), 3);
  EXPECT_EQ(x.values(), (std::vector<double>{3.0, -1e-3, 1.0}));
}

TEST(SparseFiles, BadTnsGetsOneLineNamingTheLine) {
  TempDir dir;
  const auto write = [&](const std::string& text) {
    std::ofstream(dir / "b.tns") << text;
    return dir / "b.tns";
  };
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("1 2 3 1\n1 2 1\n")); },
                             "line 2: 3 columns, expected 4");
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("1 2 3 1\n1 0 1 1\n")); },
                             "line 2: column 2: index 0 (.tns indices start at 1)");
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("1 2 x 1\n")); },
                             "line 1: column 3: 'x' is not an index");
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("1 2 3 nan\n")); },
                             "line 1: column 4: 'nan' is NaN (values must be finite)");
  const std::vector<index_t> shape = {2, 2, 2};
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("1 2 3 1\n"), shape); },
                             "column 3: index 3 exceeds the size 2 of mode 2");
  expect_throw_with<IoError>([&] { io::load_tns<double>(write("# nothing\n")); },
                             "holds no entries");
}

TEST(SparseFiles, TruncatedBinaryIsRefusedBeforeAllocating) {
  TempDir dir;
  const SparseTensor<double> x = random_sparse<double>({5, 5}, 0.5, 12);
  io::save_sparse(dir / "x.tfsparse", x);
  std::filesystem::resize_file(dir / "x.tfsparse",
                               std::filesystem::file_size(dir / "x.tfsparse") - 8);
  expect_throw_with<IoError>([&] { io::load_sparse<double>(dir / "x.tfsparse"); },
                             "but its header describes");
}

// Poisson counts from a planted nonnegative rank-3 model.
SparseTensor<double> planted_counts(KTensor<double>& truth, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::gamma_distribution<double> g(0.3, 1.0);  // sparse, peaked columns
  const std::vector<index_t> dims = {30, 25, 20};
  const index_t r = 3;
  truth.weights = {3000.0, 2000.0, 1000.0};
  truth.factors.clear();
  for (index_t d : dims) {
    Matrix<double> f(d, r);
    for (index_t j = 0; j < r; ++j) {
      double s = 0.0;
      for (index_t i = 0; i < d; ++i) s += f(i, j) = g(gen);
      for (index_t i = 0; i < d; ++i) f(i, j) /= s;
    }
    truth.factors.push_back(std::move(f));
  }
  const Tensor<double> rate = truth.full();
  Tensor<double> counts(dims);
  for (index_t i = 0; i < rate.numel(); ++i)
    counts[i] = static_cast<double>(std::poisson_distribution<int>(rate[i])(gen));
  return SparseTensor<double>::from_dense(counts.view());
}

double poisson_log_likelihood(const SparseTensor<double>& x, const KTensor<double>& m) {
  const Tensor<double> rate = m.full();
  const Tensor<double> d = x.full();
  double f = 0.0;
  for (index_t i = 0; i < d.numel(); ++i)
    f += (d[i] > 0 ? d[i] * std::log(rate[i]) : 0.0) - rate[i];
  return f;
}

TEST(CpApr, RecoversPlantedPoissonFactors) {
  KTensor<double> truth;
  const SparseTensor<double> x = planted_counts(truth, 13);
  CpAprOptions o;
  o.rank = 3;
  o.seed = 2;
  const CpAprResult<double> res = cp_apr(x, o);
  EXPECT_TRUE(res.converged) << res.kkt_violation;
  EXPECT_GT(factor_match_score(res.model, truth), 0.9);
  // A maximum of the likelihood: at least that of the planted rates, and what it reports.
  const double ll = poisson_log_likelihood(x, res.model);
  EXPECT_NEAR(res.log_likelihood, ll, 1e-9 * std::abs(ll));
  EXPECT_GE(ll, poisson_log_likelihood(x, truth));
  for (const auto& f : res.model.factors)
    for (double v : f.values()) EXPECT_GE(v, 0.0);
}

TEST(CpApr, DenseCountsGiveTheSparseResultAndAnyThreadCountTheSameBits) {
  KTensor<double> truth;
  const SparseTensor<double> x = planted_counts(truth, 14);
  CpAprOptions o;
  o.rank = 3;
  o.max_iters = 30;
  set_num_threads(1);
  const CpAprResult<double> a = cp_apr(x, o);
  set_num_threads(3);
  const Tensor<double> dense = x.full();
  const CpAprResult<double> b = cp_apr(dense.view(), o);
  set_num_threads(0);
  EXPECT_EQ(a.model.weights, b.model.weights);
  EXPECT_EQ(a.kkt_history, b.kkt_history);
  EXPECT_EQ(a.inadmissible_zero_fixes, b.inadmissible_zero_fixes);
}

// CP-APR's update from the Khatri-Rao rows kept through the inner iterations equals the
// one that walks the tree again (cp_apr keeps them when memory allows).
TEST(CpApr, KeptKhatriRaoRowsGiveTheSameUpdate) {
  std::uint64_t seed = 20;
  for (const std::vector<index_t>& dims :
       std::vector<std::vector<index_t>>{{7, 5}, {6, 5, 4}, {4, 3, 5, 3}, {4, 3, 2, 3, 2}}) {
    const SparseTensor<double> x = random_sparse<double>(dims, 0.3, ++seed);
    const index_t r = 3;
    const auto f = random_factors<double>(dims, r, ++seed);
    std::vector<const double*> rows;
    for (const auto& v : f) rows.push_back(v.data());
    for (int n = 0; n < x.order(); ++n) {
      const detail::Csf<double> tree(x, n);
      const auto size = static_cast<std::size_t>(x.dim(n) * r);
      std::vector<double> b = random_factors<double>({x.dim(n)}, r, ++seed)[0];
      for (double& v : b) v = std::abs(v);
      std::vector<double> walked(size), kept(size), pi(static_cast<std::size_t>(x.nnz() * r));
      detail::csf_poisson_phi(tree, rows, b.data(), r, 1e-10, walked.data());
      detail::csf_khatri_rao_rows(tree, rows, r, pi.data());
      detail::csf_poisson_phi_kept(tree, pi.data(), b.data(), r, 1e-10, kept.data());
      EXPECT_LT(relative_difference(kept, walked), 1e-14) << "order " << dims.size();
    }
  }
}

TEST(CpApr, RefusesNegativeCountsAndBadOptions) {
  const SparseTensor<double> x({3, 3}, {0, 2, 1, 1}, {2.0, -1.0});
  CpAprOptions o;
  o.rank = 2;
  expect_throw_with<InvalidArgument>([&] { cp_apr(x, o); },
                                     "nonnegative counts; the entry at (2, 1) is -1");
  o.tol = 0.0;
  expect_throw_with<InvalidArgument>([&] { cp_apr(x, o); }, "tol must be finite and > 0");
}

}  // namespace
}  // namespace tenfold
