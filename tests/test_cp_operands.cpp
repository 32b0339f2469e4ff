// CP-ALS operands: the dense operand's dimension-tree MTTKRP and mode Grams
// against naive definitions, the Kruskal operand against the dense operand on
// the formed tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/dense_mttkrp.hpp"
#include "cp/dense_operand.hpp"
#include "cp/kruskal_operand.hpp"
#include "cp_test_util.hpp"
#include "cpu/cpu_compute.hpp"
#include "tenfold/error.hpp"

namespace tenfold::test {
namespace {

using detail::CpuCompute;
using detail::DenseOperand;
using detail::KruskalOperand;

std::string shape_name(const std::vector<index_t>& dims) {
  std::string s;
  for (index_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// Factor matrices of a CP model, replaced one at a time as ALS does.
template <class T>
struct Factors {
  Factors(const std::vector<index_t>& dims, index_t rank, std::uint64_t seed) : dims(dims) {
    for (std::size_t n = 0; n < dims.size(); ++n) {
      mats.push_back(random_matrix<T>(dims[n], rank, seed + n));
    }
  }
  std::vector<const T*> ptrs() const {
    std::vector<const T*> p;
    for (const Matrix<T>& m : mats) p.push_back(m.data());
    return p;
  }
  void replace(int n, std::uint64_t seed) {
    const Matrix<T>& m = mats[static_cast<std::size_t>(n)];
    mats[static_cast<std::size_t>(n)] = random_matrix<T>(m.rows(), m.cols(), seed);
  }
  std::vector<index_t> dims;
  std::vector<Matrix<T>> mats;
};

// Checks mttkrp(n) of `op` against the naive MTTKRP of x with the current factors.
template <class T>
void expect_mttkrp(detail::CpOperand<T>& op, const Tensor<T>& x, const Factors<T>& f, index_t rank,
                   int n, const std::string& where) {
  const auto ptrs = f.ptrs();
  Matrix<T> out(x.dim(n), rank);
  std::fill(out.values().begin(), out.values().end(), T(-999));  // catch unwritten entries
  op.mttkrp(n, ptrs, rank, out.data());
  EXPECT_LT(rel_diff(out.values(), naive_mttkrp(x, ptrs, rank, n)), kernel_tol<T>())
      << where << " mode " << n;
}

const std::vector<std::vector<index_t>> kShapes = {
    {3, 4},          {1, 5},          {4, 1},          {3, 1, 4},      {1, 3, 2},
    {2, 3, 1},       {1, 1, 3},       {3, 1, 4, 2},    {1, 2, 1, 3},   {2, 3, 2, 1},
    {3, 1, 4, 2, 5}, {1, 2, 3, 1, 2}, {2, 1, 1, 2, 3}, {5, 2, 1, 1, 1}};

template <class T>
class Operands : public ::testing::Test {
 protected:
  CpuCompute<T> c;
};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Operands, Types);

TYPED_TEST(Operands, DenseMttkrpInAlsOrder) {
  using T = TypeParam;
  for (const auto& dims : kShapes) {
    const Tensor<T> x = random_tensor<T>(dims, 1);
    DenseOperand<T> op(this->c, x.view());
    const index_t rank = 3;
    Factors<T> f(dims, rank, 2);
    std::uint64_t seed = 100;
    // Two sweeps: MTTKRP of mode n, then U_n changes and the operand is told.
    for (int sweep = 0; sweep < 2; ++sweep)
      for (int n = 0; n < x.order(); ++n) {
        expect_mttkrp(op, x, f, rank, n, shape_name(dims) + " sweep " + std::to_string(sweep));
        f.replace(n, ++seed);
        op.factor_changed(n);
      }
  }
}

TYPED_TEST(Operands, DenseMttkrpOfALargeThreeWayTensor) {
  // Large enough for the tall products and for the last mode's slab products, whose
  // dots with U_0 the cpu backend sums as it forms them (gemm_column_dots, the products
  // written for mode 0): rows that end inside a tile, on several threads, in ALS order.
  using T = TypeParam;
  const ThreeThreads threads;
  const std::vector<index_t> dims = {53, 40, 31};
  const Tensor<T> x = random_tensor<T>(dims, 7);
  DenseOperand<T> op(this->c, x.view());
  const index_t rank = 40;
  Factors<T> f(dims, rank, 8);
  std::uint64_t seed = 300;
  for (int sweep = 0; sweep < 2; ++sweep)
    for (int n = 0; n < x.order(); ++n) {
      expect_mttkrp(op, x, f, rank, n, shape_name(dims) + " sweep " + std::to_string(sweep));
      f.replace(n, ++seed);
      op.factor_changed(n);
    }
}

// A 3-way tensor contracted with the factor updated last serves the next two updates:
// 3 passes over the tensor per 2 sweeps in either cyclic order (NumPy's C order sweeps
// the column-major modes backwards), 2 per sweep where the middle mode's slab products
// are too small to be worth their calls, and 2 for all modes at one point (a gradient).
TYPED_TEST(Operands, ThreeWayMttkrpPassesPerSweep) {
  using T = TypeParam;
  const ThreeThreads threads;
  struct Case {
    std::vector<index_t> dims;
    index_t rank;
    std::vector<int> sweep;  // the order the modes are updated in
    int sweeps;
    std::uint64_t passes;  // expected passes over the tensor in all
  };
  const std::vector<Case> cases = {
      {{53, 40, 31}, 40, {0, 1, 2}, 4, 6},     {{53, 40, 31}, 40, {2, 1, 0}, 4, 6},
      {{53, 40, 31}, 40, {0, 1, 2}, 3, 5},     {{8, 6, 5}, 3, {0, 1, 2}, 4, 8},
      {{53, 40, 31}, 40, {0, 1, 2, -1}, 1, 2}, {{8, 6, 5}, 3, {0, 1, 2, -1}, 1, 2}};
  for (const Case& k : cases) {
    const Tensor<T> x = random_tensor<T>(k.dims, 11);
    detail::DenseMttkrp<T> y(this->c, x.view());
    Factors<T> f(k.dims, k.rank, 12);
    std::uint64_t seed = 400;
    const bool gradient = k.sweep.back() < 0;  // no factor changes between the modes
    for (int s = 0; s < k.sweeps; ++s)
      for (const int n : k.sweep) {
        if (n < 0) continue;
        const auto ptrs = f.ptrs();
        Matrix<T> out(x.dim(n), k.rank);
        y.mttkrp(n, ptrs, k.rank, out.data());
        EXPECT_LT(rel_diff(out.values(), naive_mttkrp(x, ptrs, k.rank, n)), kernel_tol<T>())
            << shape_name(k.dims) << " sweep " << s << " mode " << n;
        if (gradient) continue;
        f.replace(n, ++seed);
        y.factor_changed(n);
      }
    EXPECT_EQ(y.tensor_passes(), k.passes)
        << shape_name(k.dims) << " R" << k.rank << (gradient ? " gradient" : " sweeps");
  }
}

TYPED_TEST(Operands, DenseMttkrpInArbitraryOrder) {
  using T = TypeParam;
  for (const auto& dims : kShapes) {
    const Tensor<T> x = random_tensor<T>(dims, 3);
    DenseOperand<T> op(this->c, x.view());
    const int order = x.order();
    index_t rank = 2;
    Factors<T> f(dims, rank, 4);
    detail::Rng rng(5);
    std::uint64_t seed = 200;
    for (int step = 0; step < 4 * order; ++step) {
      const int n = static_cast<int>(rng.next() % static_cast<std::uint64_t>(order));
      expect_mttkrp(op, x, f, rank, n, shape_name(dims) + " step " + std::to_string(step));
      // Change some factor (not necessarily the one just used), or nothing.
      const auto what = rng.next() % static_cast<std::uint64_t>(order + 1);
      if (what < static_cast<std::uint64_t>(order)) {
        f.replace(static_cast<int>(what), ++seed);
        op.factor_changed(static_cast<int>(what));
      }
      if (step == 2 * order) {
        // A new rank invalidates every cached contraction by itself.
        rank = 4;
        f = Factors<T>(dims, rank, ++seed);
      }
    }
  }
}

TYPED_TEST(Operands, DenseModeGramAndNorm) {
  using T = TypeParam;
  for (const auto& dims : kShapes) {
    const Tensor<T> x = random_tensor<T>(dims, 6);
    DenseOperand<T> op(this->c, x.view());
    double ss = 0.0;
    for (T v : x.values()) ss += static_cast<double>(v) * v;
    EXPECT_NEAR(op.norm_squared(), ss, 1e-12 * ss) << shape_name(dims);
    for (int n = 0; n < x.order(); ++n) {
      const index_t in = x.dim(n);
      // G(i, j) = sum over every entry x(.., i_n = i, ..) of itself times x(.., i_n = j, ..).
      index_t stride = 1;  // distance between consecutive i_n
      for (int m = 0; m < n; ++m) stride *= dims[static_cast<std::size_t>(m)];
      std::vector<double> expect(static_cast<std::size_t>(in * in));
      for (index_t l = 0; l < x.numel(); ++l) {
        const index_t i = multi_index(dims, l)[static_cast<std::size_t>(n)];
        const index_t base = l - i * stride;
        for (index_t j = 0; j < in; ++j) {
          expect[static_cast<std::size_t>(i + j * in)] +=
              static_cast<double>(x[l]) * x[base + j * stride];
        }
      }
      Matrix<T> g(in, in);
      op.mode_gram(n, g.data());
      EXPECT_LT(rel_diff(g.values(), expect), kernel_tol<T>()) << shape_name(dims) << " mode " << n;
    }
  }
}

TYPED_TEST(Operands, KruskalMatchesDenseOnTheFormedTensor) {
  using T = TypeParam;
  for (const auto& dims : std::vector<std::vector<index_t>>{{5, 4, 3}, {3, 1, 4, 2}, {4, 6}}) {
    const KTensor<T> k = random_ktensor<T>(dims, 4, 7);
    const Tensor<T> x = k.full();
    KruskalOperand<T> kop(this->c, k);
    DenseOperand<T> dop(this->c, x.view());
    EXPECT_NEAR(kop.norm_squared(), dop.norm_squared(), kernel_tol<T>() * dop.norm_squared())
        << shape_name(dims);
    const index_t rank = 3;
    Factors<T> f(dims, rank, 8);
    std::uint64_t seed = 300;
    for (int sweep = 0; sweep < 2; ++sweep)
      for (int n = 0; n < k.order(); ++n) {
        expect_mttkrp(kop, x, f, rank, n, "kruskal " + shape_name(dims));
        f.replace(n, ++seed);
        kop.factor_changed(n);
      }
    // Another rank on the same operand.
    Factors<T> g(dims, 2, 9);
    expect_mttkrp(kop, x, g, 2, 0, "kruskal rank 2 " + shape_name(dims));
    for (int n = 0; n < k.order(); ++n) {
      Matrix<T> gk(x.dim(n), x.dim(n)), gd(x.dim(n), x.dim(n));
      kop.mode_gram(n, gk.data());
      dop.mode_gram(n, gd.data());
      EXPECT_LT(rel_diff(gk.values(), gd.values()), kernel_tol<T>())
          << shape_name(dims) << " mode " << n;
    }
  }
}

}  // namespace
}  // namespace tenfold::test
