// CUDA backend against the CPU backend on random data: every primitive, then
// CP-ALS on dense and Kruskal-form operands from the same start, the Tucker
// decompositions, and the attention adapter's compression. Every test is skipped
// where no CUDA device can be used.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "core/random.hpp"
#include "cpu/cpu_compute.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/backend.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"
#include "tucker_test_util.hpp"

namespace {

using tenfold::Backend;
using tenfold::index_t;
using tenfold::detail::Buffer;
using tenfold::detail::ColumnNorm;
using tenfold::detail::Op;

// ||got - want|| / ||want|| (absolute when want is zero), in double.
template <class T>
double relative_error(const std::vector<T>& got, const std::vector<T>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    diff += d * d;
    ref += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return ref > 0.0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

template <class T>
double tolerance() {
  return std::is_same_v<T, double> ? 1e-10 : 1e-4;
}

template <class T>
class GpuCompute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
    gpu_ = tenfold::detail::make_compute<T>(Backend::cuda);
    ASSERT_EQ(gpu_->kind(), Backend::cuda);
  }

  std::vector<T> random(std::size_t n) {
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(rng_.normal());
    return v;
  }
  Buffer<T> to_device(const std::vector<T>& h) {
    Buffer<T> b(*gpu_, h.size());
    gpu_->upload(b.get(), h.data(), h.size());
    return b;
  }
  std::vector<T> to_host(const Buffer<T>& b) {
    std::vector<T> h(b.size());
    gpu_->download(h.data(), b.get(), b.size());
    return h;
  }
  // Symmetric positive definite n x n matrix B^T B + I.
  std::vector<T> spd(index_t n) {
    const auto b = random(static_cast<std::size_t>((n + 5) * n));
    std::vector<T> a(static_cast<std::size_t>(n * n));
    cpu_.syrk(Op::trans, n, n + 5, T(1), b.data(), n + 5, T(0), a.data(), n);
    cpu_.add_diagonal(n, a.data(), n, T(1));
    return a;
  }

  tenfold::detail::CpuCompute<T> cpu_;
  std::unique_ptr<tenfold::detail::Compute<T>> gpu_;
  tenfold::detail::Rng rng_{20240611};
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GpuCompute, Precisions);

TYPED_TEST(GpuCompute, UploadCopyDownloadFill) {
  using T = TypeParam;
  const auto a = this->random(1000);
  Buffer<T> d = this->to_device(a);
  EXPECT_EQ(this->to_host(d), a);
  Buffer<T> e(*this->gpu_, a.size());
  this->gpu_->copy(e.get(), d.get(), a.size());
  EXPECT_EQ(this->to_host(e), a);
  // Fill a range in the middle: its neighbours keep their values.
  this->gpu_->fill(e.get() + 10, 500, T(2.5));
  auto want = a;
  std::fill(want.begin() + 10, want.begin() + 510, T(2.5));
  EXPECT_EQ(this->to_host(e), want);
}

TYPED_TEST(GpuCompute, Gemm) {
  using T = TypeParam;
  const index_t m = 37, k = 19;
  for (index_t n : {index_t{23}, index_t{1}}) {
    for (Op ta : {Op::none, Op::trans}) {
      for (Op tb : {Op::none, Op::trans}) {
        // Stored shapes of A and B, with padded leading dimensions.
        const index_t ar = ta == Op::none ? m : k, ac = ta == Op::none ? k : m;
        const index_t br = tb == Op::none ? k : n, bc = tb == Op::none ? n : k;
        const index_t lda = ar + 3, ldb = br + 2, ldc = m + 1;
        const auto a = this->random(static_cast<std::size_t>(lda * ac));
        const auto b = this->random(static_cast<std::size_t>(ldb * bc));
        auto c = this->random(static_cast<std::size_t>(ldc * n));
        Buffer<T> da = this->to_device(a), db = this->to_device(b), dc = this->to_device(c);
        this->gpu_->gemm(ta, tb, m, n, k, T(0.75), da.get(), lda, db.get(), ldb, T(-0.5), dc.get(),
                         ldc);
        this->cpu_.gemm(ta, tb, m, n, k, T(0.75), a.data(), lda, b.data(), ldb, T(-0.5), c.data(),
                        ldc);
        EXPECT_LE(relative_error(this->to_host(dc), c), tolerance<T>())
            << "n " << n << " ta " << static_cast<int>(ta) << " tb " << static_cast<int>(tb);
      }
    }
  }
}

TYPED_TEST(GpuCompute, GemmStridedBatched) {
  using T = TypeParam;
  const index_t m = 17, k = 13, batch = 4;
  for (index_t n : {index_t{9}, index_t{1}}) {
    for (Op ta : {Op::none, Op::trans}) {
      for (Op tb : {Op::none, Op::trans}) {
        const index_t ar = ta == Op::none ? m : k, ac = ta == Op::none ? k : m;
        const index_t br = tb == Op::none ? k : n, bc = tb == Op::none ? n : k;
        const index_t lda = ar + 1, ldb = br + 2, ldc = m + 3;
        // Operands of consecutive products are a few elements apart.
        const index_t sa = lda * ac + 5, sb = ldb * bc + 3, sc = ldc * n + 2;
        const auto a = this->random(static_cast<std::size_t>(sa * batch));
        const auto b = this->random(static_cast<std::size_t>(sb * batch));
        auto c = this->random(static_cast<std::size_t>(sc * batch));
        Buffer<T> da = this->to_device(a), db = this->to_device(b), dc = this->to_device(c);
        this->gpu_->gemm_strided_batched(ta, tb, m, n, k, T(1.25), da.get(), lda, sa, db.get(), ldb,
                                         sb, T(0.5), dc.get(), ldc, sc, batch);
        this->cpu_.gemm_strided_batched(ta, tb, m, n, k, T(1.25), a.data(), lda, sa, b.data(), ldb,
                                        sb, T(0.5), c.data(), ldc, sc, batch);
        EXPECT_LE(relative_error(this->to_host(dc), c), tolerance<T>())
            << "n " << n << " ta " << static_cast<int>(ta) << " tb " << static_cast<int>(tb);
      }
    }
  }
}

TYPED_TEST(GpuCompute, SyrkFillsBothTriangles) {
  using T = TypeParam;
  const index_t n = 21, k = 34, ldc = n + 2;
  for (Op trans : {Op::none, Op::trans}) {
    const index_t lda = (trans == Op::none ? n : k) + 1;
    const auto a = this->random(static_cast<std::size_t>(lda * (trans == Op::none ? k : n)));
    auto c = this->random(static_cast<std::size_t>(ldc * n));
    Buffer<T> da = this->to_device(a), dc = this->to_device(c);
    this->gpu_->syrk(trans, n, k, T(0.5), da.get(), lda, T(2), dc.get(), ldc);
    this->cpu_.syrk(trans, n, k, T(0.5), a.data(), lda, T(2), c.data(), ldc);
    EXPECT_LE(relative_error(this->to_host(dc), c), tolerance<T>())
        << "trans " << static_cast<int>(trans);
  }
}

TYPED_TEST(GpuCompute, PotrfAndPotrsRight) {
  using T = TypeParam;
  const index_t n = 24, m = 31, ldb = m + 2;
  auto a = this->spd(n);
  Buffer<T> da = this->to_device(a);
  ASSERT_TRUE(this->gpu_->potrf(n, da.get(), n));
  ASSERT_TRUE(this->cpu_.potrf(n, a.data(), n));
  // Only the lower triangle holds the factor.
  auto gl = this->to_host(da);
  std::vector<T> lower_gpu, lower_cpu;
  for (index_t j = 0; j < n; ++j) {
    for (index_t i = j; i < n; ++i) {
      lower_gpu.push_back(gl[static_cast<std::size_t>(i + j * n)]);
      lower_cpu.push_back(a[static_cast<std::size_t>(i + j * n)]);
    }
  }
  EXPECT_LE(relative_error(lower_gpu, lower_cpu), tolerance<T>());

  auto b = this->random(static_cast<std::size_t>(ldb * n));
  Buffer<T> db = this->to_device(b);
  this->gpu_->potrs_right(n, da.get(), n, m, db.get(), ldb);
  this->cpu_.potrs_right(n, a.data(), n, m, b.data(), ldb);
  EXPECT_LE(relative_error(this->to_host(db), b), tolerance<T>());
}

TYPED_TEST(GpuCompute, PotrfReportsIndefiniteMatrix) {
  using T = TypeParam;
  const index_t n = 6;
  auto a = this->spd(n);
  a[static_cast<std::size_t>(3 + 3 * n)] = T(-1);  // a negative diagonal entry
  Buffer<T> da = this->to_device(a);
  EXPECT_FALSE(this->gpu_->potrf(n, da.get(), n));
  EXPECT_FALSE(this->cpu_.potrf(n, a.data(), n));
  // The handle stays usable after the failure.
  auto s = this->spd(n);
  Buffer<T> ds = this->to_device(s);
  EXPECT_TRUE(this->gpu_->potrf(n, ds.get(), n));
}

TYPED_TEST(GpuCompute, Syevd) {
  using T = TypeParam;
  const index_t n = 16;
  const auto nn = static_cast<std::size_t>(n * n);
  // A = Q diag(1, ..., n) Q^T with Q orthogonal (eigenvectors of a random symmetric
  // matrix): well separated eigenvalues, so eigenvectors are determined up to sign.
  auto q = this->random(nn);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < j; ++i)
      q[static_cast<std::size_t>(i + j * n)] = q[static_cast<std::size_t>(j + i * n)];
  std::vector<T> w(static_cast<std::size_t>(n));
  this->cpu_.syevd(n, q.data(), n, w.data());
  std::vector<T> d(static_cast<std::size_t>(n)), qd = q, a(nn);
  for (index_t j = 0; j < n; ++j) d[static_cast<std::size_t>(j)] = static_cast<T>(j + 1);
  this->cpu_.scale_columns(n, n, qd.data(), n, d.data());
  this->cpu_.gemm(Op::none, Op::trans, n, n, n, T(1), qd.data(), n, q.data(), n, T(0), a.data(), n);

  Buffer<T> da = this->to_device(a);
  std::vector<T> wg(static_cast<std::size_t>(n)), wc(static_cast<std::size_t>(n));
  this->gpu_->syevd(n, da.get(), n, wg.data());
  this->cpu_.syevd(n, a.data(), n, wc.data());
  EXPECT_LE(relative_error(wg, wc), tolerance<T>());
  // Eigenvectors, each column's sign matched to the CPU's.
  auto vg = this->to_host(da);
  for (index_t j = 0; j < n; ++j) {
    double s = 0.0;
    for (index_t i = 0; i < n; ++i) {
      s += static_cast<double>(vg[static_cast<std::size_t>(i + j * n)]) *
           a[static_cast<std::size_t>(i + j * n)];
    }
    if (s < 0.0)
      for (index_t i = 0; i < n; ++i) vg[static_cast<std::size_t>(i + j * n)] *= T(-1);
  }
  EXPECT_LE(relative_error(vg, a), tolerance<T>());
}

TYPED_TEST(GpuCompute, HadamardAndKhatriRao) {
  using T = TypeParam;
  const auto x = this->random(1003);
  auto y = this->random(1003);
  Buffer<T> dx = this->to_device(x), dy = this->to_device(y);
  this->gpu_->hadamard(x.size(), dx.get(), dy.get());
  this->cpu_.hadamard(x.size(), x.data(), y.data());
  EXPECT_LE(relative_error(this->to_host(dy), y), tolerance<T>());

  const index_t ma = 7, mb = 5, r = 6;
  const auto a = this->random(static_cast<std::size_t>(ma * r));
  const auto b = this->random(static_cast<std::size_t>(mb * r));
  std::vector<T> c(static_cast<std::size_t>(ma * mb * r));
  Buffer<T> da = this->to_device(a), db = this->to_device(b), dc(*this->gpu_, c.size());
  this->gpu_->khatri_rao(ma, mb, r, da.get(), db.get(), dc.get());
  this->cpu_.khatri_rao(ma, mb, r, a.data(), b.data(), c.data());
  EXPECT_LE(relative_error(this->to_host(dc), c), tolerance<T>());
}

TYPED_TEST(GpuCompute, NormalizeColumns) {
  using T = TypeParam;
  for (ColumnNorm kind : {ColumnNorm::two, ColumnNorm::max_or_one}) {
    for (index_t m : {index_t{29}, index_t{1000}}) {
      const index_t n = 7, lda = m + 3;
      auto a = this->random(static_cast<std::size_t>(lda * n));
      for (index_t i = 0; i < lda; ++i) {
        a[static_cast<std::size_t>(i + 3 * lda)] = T(0);      // zero column: unchanged
        a[static_cast<std::size_t>(i + 5 * lda)] *= T(0.01);  // max below one
        a[static_cast<std::size_t>(i + 6 * lda)] *= T(10);    // large column
      }
      std::vector<T> lambda(static_cast<std::size_t>(n));
      Buffer<T> da = this->to_device(a), dl(*this->gpu_, lambda.size());
      this->gpu_->normalize_columns(kind, m, n, da.get(), lda, dl.get());
      this->cpu_.normalize_columns(kind, m, n, a.data(), lda, lambda.data());
      EXPECT_LE(relative_error(this->to_host(da), a), tolerance<T>())
          << "kind " << static_cast<int>(kind) << " m " << m;
      EXPECT_LE(relative_error(this->to_host(dl), lambda), tolerance<T>())
          << "kind " << static_cast<int>(kind) << " m " << m;
    }
  }
}

TYPED_TEST(GpuCompute, ScaleColumnsAndAddDiagonal) {
  using T = TypeParam;
  const index_t m = 13, n = 9, lda = 15;
  auto a = this->random(static_cast<std::size_t>(lda * n));
  const auto s = this->random(static_cast<std::size_t>(n));
  Buffer<T> da = this->to_device(a), ds = this->to_device(s);
  this->gpu_->scale_columns(m, n, da.get(), lda, ds.get());
  this->cpu_.scale_columns(m, n, a.data(), lda, s.data());
  EXPECT_LE(relative_error(this->to_host(da), a), tolerance<T>());

  this->gpu_->add_diagonal(n, da.get(), lda, T(0.25));
  this->cpu_.add_diagonal(n, a.data(), lda, T(0.25));
  EXPECT_LE(relative_error(this->to_host(da), a), tolerance<T>());
}

TYPED_TEST(GpuCompute, DotAndSumSquaresAreReproducible) {
  using T = TypeParam;
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1000003}}) {
    const auto x = this->random(n), y = this->random(n);
    Buffer<T> dx = this->to_device(x), dy = this->to_device(y);
    const double dot = this->gpu_->dot(n, dx.get(), dy.get());
    const double ss = this->gpu_->sum_squares(n, dx.get());
    const double dot_cpu = this->cpu_.dot(n, x.data(), y.data());
    const double ss_cpu = this->cpu_.sum_squares(n, x.data());
    EXPECT_LE(std::abs(dot - dot_cpu), tolerance<T>() * ss_cpu) << "n " << n;
    EXPECT_LE(std::abs(ss - ss_cpu), tolerance<T>() * ss_cpu) << "n " << n;
    // Fixed reduction order: bit-identical on every call.
    EXPECT_EQ(this->gpu_->dot(n, dx.get(), dy.get()), dot);
    EXPECT_EQ(this->gpu_->sum_squares(n, dx.get()), ss);
  }
  EXPECT_EQ(this->gpu_->dot(0, nullptr, nullptr), 0.0);
}

TYPED_TEST(GpuCompute, FailedAllocationNamesTheRequest) {
  using T = TypeParam;
  const std::size_t n = std::size_t{1} << 50;  // petabytes
  try {
    Buffer<T> b(*this->gpu_, n);
    FAIL() << "allocation of " << n << " elements succeeded";
  } catch (const tenfold::DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(n * sizeof(T)) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("free"), std::string::npos) << what;
  }
  // The backend stays usable.
  const auto a = this->random(10);
  Buffer<T> d = this->to_device(a);
  EXPECT_EQ(this->to_host(d), a);
}

// Sets an environment variable for the scope, restoring the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(GpuDevice, EnvironmentVariableIsValidated) {
  if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  for (const char* bad : {"abc", "-1", "1x", "100000"}) {
    ScopedEnv env("TENFOLD_CUDA_DEVICE", bad);
    try {
      tenfold::detail::make_compute<double>(Backend::cuda);
      FAIL() << "TENFOLD_CUDA_DEVICE=" << bad << " was accepted";
    } catch (const tenfold::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  ScopedEnv env("TENFOLD_CUDA_DEVICE", "0");
  EXPECT_EQ(tenfold::detail::make_compute<float>(Backend::cuda)->kind(), Backend::cuda);
}

// A planted CP model: N(0, 1) factors, weights 1 + j.
template <class T>
tenfold::KTensor<T> planted_model(const std::vector<index_t>& dims, index_t rank,
                                  tenfold::detail::Rng& rng) {
  tenfold::KTensor<T> k;
  for (index_t j = 0; j < rank; ++j) k.weights.push_back(static_cast<T>(1 + j));
  for (index_t d : dims) {
    tenfold::Matrix<T> f(d, rank);
    for (T& v : f.values()) v = static_cast<T>(rng.normal());
    k.factors.push_back(std::move(f));
  }
  return k;
}

// Start of CP-ALS near the model: columns [first, first + rank) of its factors plus
// N(0, 0.3^2) noise. ALS then converges, so rounding differences between the
// backends are damped rather than amplified along the way.
template <class T>
std::vector<tenfold::Matrix<T>> start_near(const tenfold::KTensor<T>& model, index_t first,
                                           index_t rank, tenfold::detail::Rng& rng) {
  std::vector<tenfold::Matrix<T>> fs;
  for (const tenfold::Matrix<T>& m : model.factors) {
    tenfold::Matrix<T> f(m.rows(), rank);
    for (index_t j = 0; j < rank; ++j)
      for (index_t i = 0; i < m.rows(); ++i)
        f(i, j) = static_cast<T>(m(i, first + j) + 0.3 * rng.normal());
    fs.push_back(std::move(f));
  }
  return fs;
}

// Runs cp_als on both backends with the same start and compares the results.
template <class T, class X>
void expect_backends_agree(const X& x, tenfold::CpOptions<T> o) {
  o.backend = Backend::cpu;
  const auto cpu = tenfold::cp_als(x, o);
  o.backend = Backend::cuda;
  const auto gpu = tenfold::cp_als(x, o);
  const double tol = tolerance<T>();
  ASSERT_EQ(gpu.iterations, cpu.iterations);
  EXPECT_EQ(gpu.eigen_fallbacks, cpu.eigen_fallbacks);
  ASSERT_EQ(gpu.fit_history.size(), cpu.fit_history.size());
  for (std::size_t i = 0; i < cpu.fit_history.size(); ++i) {
    EXPECT_NEAR(gpu.fit_history[i], cpu.fit_history[i], tol) << "iteration " << i + 1;
  }
  EXPECT_NEAR(gpu.fit, cpu.fit, tol);
  EXPECT_LE(relative_error(gpu.model.weights, cpu.model.weights), tol);
  for (std::size_t n = 0; n < cpu.model.factors.size(); ++n) {
    EXPECT_LE(relative_error(gpu.model.factors[n].values(), cpu.model.factors[n].values()), tol)
        << "factor " << n;
  }
}

template <class T>
class GpuCpAls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  }

  // Dense tensor: a planted rank-`rank` model plus 5% Gaussian noise; CP-ALS from a
  // given start near the model, a fixed number of iterations.
  void check_dense(const std::vector<index_t>& dims, index_t rank) {
    tenfold::detail::Rng rng(7 + dims.size());
    const auto model = planted_model<T>(dims, rank, rng);
    auto x = model.full();
    const double scale = 0.05 * tenfold::norm<T>(x) / std::sqrt(static_cast<double>(x.numel()));
    for (T& v : x.values()) v += static_cast<T>(scale * rng.normal());
    tenfold::CpOptions<T> o;
    o.rank = rank;
    o.max_iters = 25;
    o.tol = 0.0;
    o.init = tenfold::CpInit::given;
    o.initial_factors = start_near(model, 0, rank, rng);
    expect_backends_agree(x, o);
  }
};

TYPED_TEST_SUITE(GpuCpAls, Precisions);

TYPED_TEST(GpuCpAls, DenseThreeWay) { this->check_dense({30, 25, 20}, 5); }

TYPED_TEST(GpuCpAls, DenseFourWay) { this->check_dense({12, 10, 9, 8}, 4); }

TYPED_TEST(GpuCpAls, KruskalOperand) {
  using T = TypeParam;
  // Rank-6 model with two weak components (0 and 1), approximated at rank 4.
  const std::vector<index_t> dims{20, 15, 10};
  tenfold::detail::Rng rng(11);
  auto x = planted_model<T>(dims, 6, rng);
  x.weights[0] = T(0.3);
  x.weights[1] = T(0.2);
  tenfold::CpOptions<T> o;
  o.rank = 4;
  o.max_iters = 30;
  o.tol = 0.0;
  o.init = tenfold::CpInit::given;
  o.initial_factors = start_near(x, 2, 4, rng);
  expect_backends_agree(x, o);
}

// Tucker decompositions on both backends. Factors are defined only up to sign (and
// rotation within a repeated eigenvalue), so the comparison is of what they
// determine: the relative error, every mode's eigenvalues, the chosen ranks and the
// reconstructed tensor, which depends on the factors only through U_n U_n^T.
template <class T>
class GpuTucker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  }

  // A random Tucker model of multilinear rank `ranks` plus 10% Gaussian noise: each
  // mode Gram has a clear gap after its r_n-th eigenvalue, so U_n U_n^T is well
  // determined and rounding differences between the backends stay at their level.
  static tenfold::Tensor<T> low_rank(const std::vector<index_t>& dims,
                                     const std::vector<index_t>& ranks, std::uint64_t seed) {
    tenfold::Tensor<T> x = tenfold::test::random_ttensor<T>(dims, ranks, seed).full();
    const tenfold::Tensor<T> e = tenfold::test::random_tensor<T>(dims, seed + 1);
    const double scale = 0.1 * tenfold::norm<T>(x.view()) / tenfold::norm<T>(e.view());
    for (index_t i = 0; i < x.numel(); ++i) x[i] += static_cast<T>(scale * e[i]);
    return x;
  }

  static void expect_backends_agree(const tenfold::Tensor<T>& x, tenfold::TuckerOptions o) {
    o.backend = Backend::cpu;
    const auto cpu = tenfold::tucker(x, o);
    o.backend = Backend::cuda;
    const auto gpu = tenfold::tucker(x, o);
    const double tol = tolerance<T>();
    ASSERT_EQ(gpu.model.ranks(), cpu.model.ranks());
    EXPECT_EQ(gpu.mode_order, cpu.mode_order);
    EXPECT_EQ(gpu.iterations, cpu.iterations);
    EXPECT_NEAR(gpu.relative_error, cpu.relative_error, tol);
    ASSERT_EQ(gpu.error_history.size(), cpu.error_history.size());
    for (std::size_t i = 0; i < cpu.error_history.size(); ++i) {
      EXPECT_NEAR(gpu.error_history[i], cpu.error_history[i], tol) << "sweep " << i;
    }
    ASSERT_EQ(gpu.eigenvalues.size(), cpu.eigenvalues.size());
    for (std::size_t n = 0; n < cpu.eigenvalues.size(); ++n) {
      EXPECT_LE(relative_error(gpu.eigenvalues[n], cpu.eigenvalues[n]), tol) << "mode " << n;
    }
    EXPECT_LE(relative_error(gpu.model.full().values(), cpu.model.full().values()), tol);
    EXPECT_LE(tenfold::test::orthonormality_defect(gpu.model), tol);
  }
};

TYPED_TEST_SUITE(GpuTucker, Precisions);

TYPED_TEST(GpuTucker, SthosvdThreeWay) {
  tenfold::TuckerOptions o;
  o.ranks = {4, 3, 5};
  this->expect_backends_agree(this->low_rank({30, 25, 20}, o.ranks, 5), o);
}

TYPED_TEST(GpuTucker, SthosvdFourWayGivenOrder) {
  tenfold::TuckerOptions o;
  o.ranks = {3, 3, 2, 2};
  o.mode_order = {2, 0, 3, 1};
  this->expect_backends_agree(this->low_rank({12, 10, 9, 8}, o.ranks, 6), o);
}

TYPED_TEST(GpuTucker, HosvdFourWay) {
  tenfold::TuckerOptions o;
  o.method = tenfold::TuckerMethod::hosvd;
  o.ranks = {3, 3, 2, 2};
  this->expect_backends_agree(this->low_rank({12, 10, 9, 8}, o.ranks, 6), o);
}

TYPED_TEST(GpuTucker, HooiFixedSweeps) {
  tenfold::TuckerOptions o;
  o.method = tenfold::TuckerMethod::hooi;
  o.ranks = {4, 3, 5};
  o.max_iters = 5;
  o.tol = 0.0;
  this->expect_backends_agree(this->low_rank({30, 25, 20}, o.ranks, 5), o);
}

TYPED_TEST(GpuTucker, ToleranceChoosesThePlantedRanks) {
  // eps = 0.2 discards at most 0.04 ||X||^2 / 3 per mode: all the noise (about
  // 0.01 ||X||^2), never a planted direction.
  tenfold::TuckerOptions o;
  o.eps = 0.2;
  const std::vector<index_t> ranks{4, 3, 5};
  const auto x = this->low_rank({30, 25, 20}, ranks, 5);
  o.backend = Backend::cuda;
  EXPECT_EQ(tenfold::tucker(x, o).model.ranks(), ranks);
  this->expect_backends_agree(x, o);
}

// Attention compression on both backends: the structured start is computed on the
// host in double (identical for both), the ALS sweeps run on the chosen backend.
template <class T>
class GpuAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tenfold::cuda_available()) GTEST_SKIP() << "no CUDA device available";
  }

  // H heads of width d over inputs of width D: weights N(0, 1/D), biases N(0, 1).
  static tenfold::attention::QueryKeyLayer<T> layer(index_t heads, index_t d, index_t input) {
    tenfold::detail::Rng rng(31);
    tenfold::attention::QueryKeyLayer<T> l;
    l.heads = heads;
    l.head_dim = d;
    const double sd = 1.0 / std::sqrt(static_cast<double>(input));
    for (auto* w : {&l.query_weight, &l.key_weight}) {
      *w = tenfold::Matrix<T>(input, heads * d);
      for (T& v : w->values()) v = static_cast<T>(sd * rng.normal());
    }
    for (auto* b : {&l.query_bias, &l.key_bias}) {
      for (index_t i = 0; i < heads * d; ++i) b->push_back(static_cast<T>(rng.normal()));
    }
    return l;
  }

  // Both backends from the same options; returns {cpu, gpu}.
  static std::pair<tenfold::attention::CompressResult<T>, tenfold::attention::CompressResult<T>>
  both(const tenfold::attention::QueryKeyLayer<T>& l, tenfold::attention::CompressOptions o) {
    o.backend = Backend::cpu;
    auto cpu = tenfold::attention::compress(l, o);
    o.backend = Backend::cuda;
    return {std::move(cpu), tenfold::attention::compress(l, o)};
  }
};

TYPED_TEST_SUITE(GpuAttention, Precisions);

TYPED_TEST(GpuAttention, HeadsStartFixedSweeps) {
  using T = TypeParam;
  const auto l = this->layer(4, 8, 32);
  tenfold::Matrix<T> queries(32, 7), keys(32, 9);
  tenfold::detail::Rng rng(32);
  for (auto* m : {&queries, &keys})
    for (T& v : m->values()) v = static_cast<T>(rng.normal());
  for (index_t rank : {6, 20}) {
    tenfold::attention::CompressOptions o;
    o.rank = rank;
    o.init = tenfold::attention::Init::heads;
    o.max_iters = 10;
    o.tol = 0.0;
    const auto [cpu, gpu] = this->both(l, o);
    EXPECT_NEAR(gpu.relative_error, cpu.relative_error, tolerance<T>()) << "R = " << rank;
    // The models themselves, through the scores they give (invariant to the
    // scaling and order of the components).
    EXPECT_LE(relative_error(tenfold::attention::scores(gpu.layer, queries, keys).values(),
                             tenfold::attention::scores(cpu.layer, queries, keys).values()),
              tolerance<T>())
        << "R = " << rank;
  }
}

TYPED_TEST(GpuAttention, FullRankIsExact) {
  using T = TypeParam;
  // R = H d with the default (structured) start: exact on both backends, to the
  // precision of T.
  const auto l = this->layer(4, 8, 32);
  tenfold::attention::CompressOptions o;
  o.rank = 32;
  const auto [cpu, gpu] = this->both(l, o);
  const double exact = std::is_same_v<T, double> ? 1e-13 : 1e-5;
  EXPECT_LT(cpu.relative_error, exact);
  EXPECT_LT(gpu.relative_error, exact);
}

}  // namespace

TYPED_TEST(GpuAttention, DataAwareFixedSweeps) {
  using T = TypeParam;
  // The whitening and the way back run on the host; the sweeps over the whitened
  // operand on the chosen backend.
  const auto l = this->layer(4, 8, 32);
  tenfold::detail::Rng rng(33);
  tenfold::Matrix<double> x(32, 50);
  for (index_t t = 0; t < 50; ++t)
    for (index_t i = 0; i < 32; ++i) x(i, t) = std::exp(-4.0 * i / 32) * rng.normal();
  tenfold::attention::InputMoments mo;
  mo.query = tenfold::Matrix<double>(32, 32);
  for (index_t i = 0; i < 32; ++i)
    for (index_t j = 0; j < 32; ++j)
      for (index_t t = 0; t < 50; ++t) mo.query(i, j) += x(i, t) * x(j, t) / 50.0;
  tenfold::attention::CompressOptions o;
  o.rank = 12;
  o.init = tenfold::attention::Init::heads;
  o.max_iters = 10;
  o.tol = 0.0;
  o.backend = Backend::cpu;
  const auto cpu = tenfold::attention::compress(l, o, mo);
  o.backend = Backend::cuda;
  const auto gpu = tenfold::attention::compress(l, o, mo);
  EXPECT_NEAR(*gpu.data_error, *cpu.data_error, tolerance<T>());
  EXPECT_NEAR(gpu.relative_error, cpu.relative_error, tolerance<T>());
}
