// The same array in C and in Fortran order gives the same numbers through the
// library's NumPy-order entry (Layout::row_major) and through the program: bit for
// bit when the C-order array is copied into axis order (automatic below
// kRowMajorCopyMaxBytes), to rounding when it is read in place; given CP starts that
// cannot move are refused; views are validated.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "core/layout.hpp"
#include "cp/cp_als.hpp"
#include "cp/start_check.hpp"
#include "relative_difference.hpp"
#include "temp_dir.hpp"
#include "tenfold/attention.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"
#include "tucker/steps.hpp"

namespace fs = std::filesystem;
using namespace tenfold;
using tenfold::test::relative_difference;

namespace {

// An array in NumPy axis order, stored column-major: the memory of its Fortran-order
// copy. Entries uniform in [0, 1) plus a planted low-rank part, so that CP has structure.
template <class T>
Tensor<T> fortran_array(const std::vector<index_t>& shape, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Tensor<T> x(shape);
  std::vector<std::vector<double>> planted;
  for (index_t d : shape) {
    std::vector<double> v(static_cast<std::size_t>(d));
    for (double& e : v) e = u(gen);
    planted.push_back(v);
  }
  std::vector<index_t> idx(shape.size(), 0);
  for (index_t i = 0; i < x.numel(); ++i) {
    double p = 3.0;
    for (std::size_t n = 0; n < shape.size(); ++n)
      p *= planted[n][static_cast<std::size_t>(idx[n])];
    x[i] = static_cast<T>(p + u(gen));
    for (std::size_t n = 0; n < shape.size() && ++idx[n] == shape[n]; ++n) idx[n] = 0;
  }
  return x;
}

// The same array in C order: NumPy's memory of np.ascontiguousarray, which Tenfold sees
// as the tensor with the modes reversed (as load_npy returns a C-order file).
template <class T>
Tensor<T> c_order(const Tensor<T>& fortran) {
  return detail::reverse_modes<T>(fortran.view());
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
Matrix<T> random_matrix(index_t rows, index_t cols, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Matrix<T> m(rows, cols);
  for (T& v : m.values()) v = static_cast<T>(u(gen));
  return m;
}

// CP results of the Fortran copy (col_major) and of the C copy (row_major) agree bit
// for bit: weights, fit history, and the factor of every NumPy axis.
template <class T>
void expect_same_cp(const CpResult<T>& f, const CpResult<T>& c, const std::string& what) {
  EXPECT_EQ(f.iterations, c.iterations) << what;
  EXPECT_EQ(f.stop, c.stop) << what;
  EXPECT_EQ(f.eigen_fallbacks, c.eigen_fallbacks) << what;
  EXPECT_TRUE(same_bits(f.fit_history, c.fit_history)) << what;
  EXPECT_TRUE(same_bits(f.model.weights, c.model.weights)) << what;
  const int order = f.model.order();
  ASSERT_EQ(c.model.order(), order) << what;
  for (int a = 0; a < order; ++a) {
    const auto& fa = f.model.factors[static_cast<std::size_t>(a)];
    const auto& ca = c.model.factors[static_cast<std::size_t>(order - 1 - a)];
    EXPECT_EQ(fa.rows(), ca.rows()) << what << ", axis " << a;
    EXPECT_TRUE(same_bits(fa.values(), ca.values())) << what << ", axis " << a;
  }
}

const std::vector<std::vector<index_t>> kShapes = {{12, 9, 7}, {5, 4, 3, 6}, {20, 12}, {6, 6, 6}};

}  // namespace

TEST(Layout, ReverseModesIsTheCOrderMemory) {
  // y(k, j, i) = x(i, j, k), and reversing twice gives x back, for orders 1 to 4 and
  // sizes that cut the transposition tiles.
  for (const std::vector<index_t>& shape :
       std::vector<std::vector<index_t>>{{7}, {33, 40}, {3, 1, 70}, {35, 2, 3, 33}}) {
    const Tensor<double> x = fortran_array<double>(shape, 5);
    const Tensor<double> y = c_order(x);
    EXPECT_EQ(y.dims(), detail::reversed(shape));
    std::vector<index_t> idx(shape.size(), 0);
    for (index_t i = 0; i < x.numel(); ++i) {
      index_t off = 0, stride = 1;
      for (std::size_t n = shape.size(); n-- > 0;) {
        off += idx[n] * stride;
        stride *= shape[n];
      }
      ASSERT_EQ(y[off], x[i]);
      for (std::size_t n = 0; n < shape.size() && ++idx[n] == shape[n]; ++n) idx[n] = 0;
    }
    EXPECT_TRUE(same_bits(c_order(y).values(), x.values()));
  }
}

TEST(Layout, ReversedTensorIsReverseModesInHostMemory) {
  // The algorithms' copy (uninitialised host memory, 2 MiB aligned from 2 MiB up) holds
  // the bits of reverse_modes; the small one is on a cache line.
  for (const std::vector<index_t>& shape :
       std::vector<std::vector<index_t>>{{33, 40}, {130, 70, 40}, {0, 3}}) {
    const Tensor<double> x = fortran_array<double>(shape, 6);
    const detail::ReversedTensor<double> y(x.view());
    EXPECT_EQ(y.view().dims(), detail::reversed(shape));
    const Tensor<double> expected = c_order(x);
    EXPECT_TRUE(same_bits(std::vector<double>(y.view().data(), y.view().data() + x.numel()),
                          expected.values()));
    const auto bytes = static_cast<std::size_t>(x.numel()) * sizeof(double);
    const auto address = reinterpret_cast<std::uintptr_t>(y.view().data());
    EXPECT_EQ(address % (bytes >= (std::size_t{1} << 21) ? std::size_t{1} << 21 : 64), 0u);
  }
  EXPECT_EQ(detail::ReversedTensor<float>().view().numel(), 0);
}

namespace {

// Whether the mapping holding `p` carries the huge-page advice ("hg" among the VmFlags
// of /proc/self/smaps); nullopt where the file or the flag line cannot be read.
std::optional<bool> huge_page_advice(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.find(" hg") != std::string::npos;
    }
  }
  return std::nullopt;
}

}  // namespace

TEST(Layout, LargeHostBuffersAndTensorsAreAdvisedForHugePages) {
  // Tensor-sized memory asks for transparent huge pages (core/memory.hpp).
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "no transparent huge pages on this system";
  }
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  const detail::HostArray<double> array(kBytes / sizeof(double));
  const Tensor<double> tensor({1024, 1024});
  for (const void* p : {static_cast<const void*>(array.data()),
                        static_cast<const void*>(tensor.data() + tensor.numel() / 2)}) {
    const std::optional<bool> flag = huge_page_advice(p);
    if (!flag) GTEST_SKIP() << "/proc/self/smaps has no VmFlags here";
    EXPECT_TRUE(*flag);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(array.data()) % (std::size_t{1} << 21), 0u);
}

namespace {

// CP of the Fortran copy (col_major) and of the C copy (row_major, read as `input`)
// for every shape, three seeds and both data-dependent starts; `variants` adds
// compression first and line search; check(f, c, what) compares.
template <class Check>
void cp_both_ways(RowMajorInput input, bool variants, Check&& check) {
  for (const auto& shape : kShapes) {
    for (std::uint64_t seed : {0u, 1u, 7u}) {
      const Tensor<double> f = fortran_array<double>(shape, seed);
      const Tensor<double> c = c_order(f);
      for (CpInit init : {CpInit::random, CpInit::nvecs}) {
        for (CpCompress compress : {CpCompress::off, CpCompress::on}) {
          if (compress == CpCompress::on && !variants) continue;
          CpOptions o;
          o.rank = 4;
          o.init = init;
          o.seed = seed;
          o.max_iters = 40;
          o.tol = 1e-12;
          o.compress = compress;
          o.line_search = variants && seed == 1;
          const CpResult<double> rf = cp_als(f, o);
          o.layout = Layout::row_major;
          o.row_major_input = input;
          check(rf, cp_als(c, o),
                std::to_string(shape.size()) + "-way " + std::to_string(shape[0]) + ", seed " +
                    std::to_string(seed) + ", " + std::string(to_string(init)) + ", compress " +
                    std::string(to_string(compress)));
        }
      }
    }
  }
}

}  // namespace

TEST(Layout, CpIsBitIdenticalForCAndFortranOrder) {
  // Copied into axis order (as automatic does for these small arrays).
  cp_both_ways(RowMajorInput::automatic, false, expect_same_cp<double>);
}

TEST(Layout, CpFloatAndGivenStartAreBitIdentical) {
  std::mt19937_64 gen(3);
  const Tensor<float> f = fortran_array<float>({12, 9, 7}, 3);
  const Tensor<float> c = c_order(f);
  CpOptions o;
  o.rank = 4;
  o.init = CpInit::given;
  o.max_iters = 30;
  o.tol = 0.0;
  std::vector<Matrix<float>> start;
  for (index_t d : f.dims()) start.push_back(random_matrix<float>(d, 4, gen));
  const CpResult<float> rf = cp_als(f, o, start);
  // The C copy's modes are the NumPy axes reversed, and so are its initial factors.
  start = detail::reversed(start);
  o.layout = Layout::row_major;
  expect_same_cp(rf, cp_als(c, o, start), "float, given start");
}

TEST(Layout, CpOfModelsFollowsTheAxisOrder) {
  // A Kruskal-form and a Tucker-form input listed in reversed mode order: the random
  // start and the sweeps follow the NumPy axes as for a dense input.
  std::mt19937_64 gen(11);
  const std::vector<index_t> shape = {8, 6, 5};
  KTensor<double> k;
  for (index_t d : shape) k.factors.push_back(random_matrix<double>(d, 6, gen));
  k.weights.assign(6, 1.0);
  const KTensor<double> k_rev(k.weights, detail::reversed(k.factors));
  TTensor<double> t(fortran_array<double>({4, 3, 2}, 2), {});
  for (std::size_t n = 0; n < shape.size(); ++n)
    t.factors.push_back(random_matrix<double>(shape[n], t.core.dim(static_cast<int>(n)), gen));
  const TTensor<double> t_rev(c_order(t.core), detail::reversed(t.factors));
  CpOptions o;
  o.rank = 3;
  o.max_iters = 25;
  o.tol = 0.0;
  CpOptions row = o;
  row.layout = Layout::row_major;
  expect_same_cp(cp_als(k, o), cp_als(k_rev, row), "Kruskal-form input");
  expect_same_cp(cp_als(t, o), cp_als(t_rev, row), "Tucker-form input");
}

namespace {

// Tucker of the Fortran copy (col_major) and of the C copy (row_major, read as `input`)
// for every method, with ranks (ties in I_n / r_n on the cube) and with eps (ties in
// I_n), the automatic mode order and a given one; check(f, c, order, what) compares.
template <class Check>
void tucker_both_ways(RowMajorInput input, Check&& check) {
  for (const auto& shape : kShapes) {
    const int order = static_cast<int>(shape.size());
    const Tensor<double> f = fortran_array<double>(shape, 4);
    const Tensor<double> c = c_order(f);
    for (TuckerMethod method : {TuckerMethod::hosvd, TuckerMethod::sthosvd, TuckerMethod::hooi}) {
      for (int variant = 0; variant < 3; ++variant) {
        TuckerOptions o;
        o.method = method;
        o.max_iters = 8;
        o.tol = 0.0;
        if (variant == 1) {
          o.eps = 0.4;
        } else {
          for (index_t d : shape) o.ranks.push_back(std::max<index_t>(1, d / 2));
        }
        if (variant == 2) {
          for (int n = order - 1; n >= 0; --n) o.mode_order.push_back((n + 1) % order);
        }
        const TuckerResult<double> rf = tucker(f, o);
        // The C copy's modes are the NumPy axes reversed: so are ranks and mode_order.
        o.layout = Layout::row_major;
        o.row_major_input = input;
        o.ranks = detail::reversed(o.ranks);
        for (int& m : o.mode_order) m = order - 1 - m;
        const TuckerResult<double> rc = tucker(c, o);
        const std::string what = std::string(to_string(method)) + ", " + std::to_string(order) +
                                 "-way, variant " + std::to_string(variant);
        ASSERT_EQ(rf.mode_order.size(), rc.mode_order.size()) << what;
        for (std::size_t k = 0; k < rf.mode_order.size(); ++k)
          EXPECT_EQ(rf.mode_order[k], order - 1 - rc.mode_order[k]) << what;
        EXPECT_EQ(rf.iterations, rc.iterations) << what;
        check(rf, rc, order, what);
      }
    }
  }
}

}  // namespace

TEST(Layout, TuckerIsBitIdenticalForCAndFortranOrder) {
  // Copied into axis order (as automatic does for these small arrays).
  tucker_both_ways(
      RowMajorInput::automatic, [](const TuckerResult<double>& rf, const TuckerResult<double>& rc,
                                   int order, const std::string& what) {
        EXPECT_TRUE(same_bits(rf.model.core.values(), c_order(rc.model.core).values())) << what;
        for (int a = 0; a < order; ++a) {
          const auto fa = static_cast<std::size_t>(a), ca = static_cast<std::size_t>(order - 1 - a);
          EXPECT_TRUE(same_bits(rf.model.factors[fa].values(), rc.model.factors[ca].values()))
              << what << ", axis " << a;
          EXPECT_TRUE(same_bits(rf.eigenvalues[fa], rc.eigenvalues[ca])) << what << ", axis " << a;
        }
        EXPECT_TRUE(same_bits(rf.error_history, rc.error_history)) << what;
        EXPECT_EQ(std::memcmp(&rf.relative_error, &rc.relative_error, sizeof(double)), 0) << what;
      });
}

// --- C-order arrays read in place ----------------------------------------------

namespace {

// Read in place, a C-order array goes through the start and the sweeps of its
// Fortran-order copy; only the sums over the tensor run in another (memory) order. On
// these problems the results then agree to within 1e-12 (a few thousand units of
// rounding, accumulated over up to 40 sweeps); kRounding = 2^-30 leaves a margin of
// about 1000 and still fails at once on a wrong start or sweep order (those differ in
// the first digits).
constexpr double kRounding = 0x1p-30;

void expect_close_cp(const CpResult<double>& f, const CpResult<double>& c,
                     const std::string& what) {
  EXPECT_EQ(f.compressed, c.compressed) << what;
  EXPECT_EQ(f.compression_ranks, detail::reversed(c.compression_ranks)) << what;
  const int order = f.model.order();
  ASSERT_EQ(c.model.order(), order) << what;
  // The sweeps agree to rounding; where the stopping decision is taken on a change of fit
  // at its threshold, rounding may decide it one way or the other: then both converged,
  // the common sweeps agree and so do the final fits and models.
  const std::size_t common = std::min(f.fit_history.size(), c.fit_history.size());
  EXPECT_LE(relative_difference(
                std::vector<double>(f.fit_history.begin(), f.fit_history.begin() + common),
                std::vector<double>(c.fit_history.begin(), c.fit_history.begin() + common)),
            kRounding)
      << what;
  if (f.iterations != c.iterations) {
    EXPECT_EQ(f.stop, CpStop::converged) << what;
    EXPECT_EQ(c.stop, CpStop::converged) << what;
    EXPECT_NEAR(f.fit, c.fit, 1e-9) << what;
    EXPECT_LE(relative_difference(f.model.full().values(), c_order(c.model.full()).values()), 1e-6)
        << what;
    return;
  }
  EXPECT_EQ(f.stop, c.stop) << what;
  EXPECT_LE(relative_difference(f.model.weights, c.model.weights), kRounding) << what;
  for (int a = 0; a < order; ++a) {
    EXPECT_LE(
        relative_difference(f.model.factors[static_cast<std::size_t>(a)].values(),
                            c.model.factors[static_cast<std::size_t>(order - 1 - a)].values()),
        kRounding)
        << what << ", axis " << a;
  }
}

}  // namespace

TEST(Layout, RowMajorInputIsCopiedUpToTheLimitInAutomatic) {
  using detail::copies_to_axis_order;
  const index_t limit = static_cast<index_t>(kRowMajorCopyMaxBytes / sizeof(double));
  EXPECT_TRUE(copies_to_axis_order(Layout::row_major, RowMajorInput::automatic, limit, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::row_major, RowMajorInput::automatic, limit + 1, 8));
  EXPECT_TRUE(copies_to_axis_order(Layout::row_major, RowMajorInput::copy, 4 * limit, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::row_major, RowMajorInput::in_place, 16, 8));
  EXPECT_FALSE(copies_to_axis_order(Layout::col_major, RowMajorInput::copy, 16, 8));
}

TEST(Layout, CpInPlaceAgreesWithFortranOrder) {
  cp_both_ways(RowMajorInput::in_place, true, expect_close_cp);
}

TEST(Layout, CpFromAGivenStartInPlaceAgreesWithFortranOrder) {
  std::mt19937_64 gen(8);
  const Tensor<double> f = fortran_array<double>({12, 9, 7}, 8);
  const Tensor<double> c = c_order(f);
  std::vector<Matrix<double>> start;
  for (index_t d : f.dims()) start.push_back(random_matrix<double>(d, 4, gen));
  const std::vector<Matrix<double>> start_c = detail::reversed(start);
  for (CpCompress compress : {CpCompress::off, CpCompress::on}) {
    CpOptions o;
    o.rank = 4;
    o.init = CpInit::given;
    o.max_iters = 30;
    o.tol = 0.0;
    o.compress = compress;
    const CpResult<double> rf = cp_als(f, o, start);
    o.layout = Layout::row_major;
    o.row_major_input = RowMajorInput::in_place;
    expect_close_cp(rf, cp_als(c, o, start_c),
                    "given start, compress " + std::string(to_string(compress)));
  }
}

TEST(Layout, CpWithMissingValuesInPlaceAgreesWithFortranOrder) {
  const Tensor<double> f = fortran_array<double>({9, 7, 5, 4}, 6);
  Tensor<std::uint8_t> observed(f.dims());
  std::mt19937_64 gen(6);
  for (std::uint8_t& v : observed.values()) v = gen() % 4 != 0;
  const Tensor<double> c = c_order(f);
  const Tensor<std::uint8_t> observed_c = detail::reverse_modes<std::uint8_t>(observed.view());
  for (CpMissingSolver solver : {CpMissingSolver::em, CpMissingSolver::weighted}) {
    CpOptions o;
    o.rank = 3;
    o.max_iters = 30;
    o.tol = 0.0;
    o.missing_solver = solver;
    const CpResult<double> rf = cp_als(f, observed.view(), o);
    o.layout = Layout::row_major;
    o.row_major_input = RowMajorInput::in_place;
    expect_close_cp(rf, cp_als(c, observed_c.view(), o),
                    "missing values, " + std::string(to_string(solver)));
  }
}

TEST(Layout, TuckerInPlaceAgreesWithFortranOrder) {
  tucker_both_ways(RowMajorInput::in_place, [](const TuckerResult<double>& rf,
                                               const TuckerResult<double>& rc, int order,
                                               const std::string& what) {
    // The ranks, eigenvalues and factors of every axis (signs fixed), the model as a
    // tensor, and the error history.
    EXPECT_EQ(rf.model.ranks(), detail::reversed(rc.model.ranks())) << what;
    EXPECT_LE(relative_difference(rf.model.full().values(), c_order(rc.model.full()).values()),
              kRounding)
        << what;
    // A rank above the product of the others (eps here truncates the 3-way array to
    // ranks (2, 1, 1)) leaves HOOI a column that is any unit vector orthogonal to the
    // first, chosen by rounding: the first sweeps and that column then differ by more,
    // the model and the final error do not.
    const std::vector<index_t> ranks = rf.model.ranks();
    index_t all = 1;
    for (index_t r : ranks) all *= r;
    const bool free_column =
        std::any_of(ranks.begin(), ranks.end(), [&](index_t r) { return r * r > all; });
    for (int a = 0; a < order; ++a) {
      const auto fa = static_cast<std::size_t>(a), ca = static_cast<std::size_t>(order - 1 - a);
      EXPECT_LE(relative_difference(rf.eigenvalues[fa], rc.eigenvalues[ca]), kRounding)
          << what << ", axis " << a;
      if (free_column) continue;
      EXPECT_LE(relative_difference(rf.model.factors[fa].values(), rc.model.factors[ca].values()),
                kRounding)
          << what << ", axis " << a;
    }
    if (free_column) {
      EXPECT_LE(std::abs(rf.relative_error - rc.relative_error), kRounding) << what;
    } else {
      EXPECT_LE(relative_difference(rf.error_history, rc.error_history), kRounding) << what;
    }
  });
}

TEST(Layout, SignsOfTheResultDependOnTheModelOnly) {
  // Two runs that reach the same model to rounding may end with different signs in
  // pairs of modes (a C-order array read in place, an eigenvector of the start): the
  // arranged model must not depend on them. Every even set of flipped columns of
  // every component gives the bits of the unflipped model.
  std::mt19937_64 gen(21);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int order : {3, 4}) {
    KTensor<double> m;
    m.weights = {3.0, 2.0, 1.0};
    for (int n = 0; n < order; ++n) {
      Matrix<double> f(5 + n, 3);
      for (double& v : f.values()) v = g(gen);
      m.factors.push_back(std::move(f));
    }
    KTensor<double> expected = m;
    detail::arrange(expected);
    for (unsigned mask = 0; mask < (1u << order); ++mask) {
      if (std::popcount(mask) % 2 != 0) continue;
      for (index_t j = 0; j < 3; ++j) {
        KTensor<double> flipped = m;
        for (int n = 0; n < order; ++n) {
          if ((mask >> n & 1u) == 0) continue;
          Matrix<double>& f = flipped.factors[static_cast<std::size_t>(n)];
          for (index_t i = 0; i < f.rows(); ++i) f(i, j) = -f(i, j);
        }
        detail::arrange(flipped);
        for (int n = 0; n < order; ++n) {
          EXPECT_TRUE(same_bits(flipped.factors[static_cast<std::size_t>(n)].values(),
                                expected.factors[static_cast<std::size_t>(n)].values()))
              << order << "-way, flips " << mask << " of component " << j << ", mode " << n;
        }
      }
    }
  }
}

TEST(Layout, TuckerSignsDependOnTheModelOnly) {
  // Negating a factor column with its core slice leaves the model as it is; the fixed
  // signs are those of the unflipped model, bit for bit, and the tensor is unchanged.
  std::mt19937_64 gen(22);
  std::normal_distribution<double> g(0.0, 1.0);
  TTensor<double> m(fortran_array<double>({3, 2, 4}, 9), {});
  for (index_t d : {6, 5, 7}) {
    m.factors.emplace_back(d, m.core.dim(static_cast<int>(m.factors.size())));
    for (double& v : m.factors.back().values()) v = g(gen);
  }
  TTensor<double> expected = m;
  detail::fix_signs(expected);
  EXPECT_LE(relative_difference(expected.full().values(), m.full().values()), 1e-15);
  for (int n = 0; n < 3; ++n) {
    for (index_t j = 0; j < m.core.dim(n); ++j) {
      TTensor<double> flipped = m;
      Matrix<double>& u = flipped.factors[static_cast<std::size_t>(n)];
      for (index_t i = 0; i < u.rows(); ++i) u(i, j) = -u(i, j);
      std::vector<index_t> idx(3, 0);
      for (index_t k = 0; k < flipped.core.numel(); ++k) {
        if (idx[static_cast<std::size_t>(n)] == j) flipped.core[k] = -flipped.core[k];
        for (int q = 0; q < 3 && ++idx[static_cast<std::size_t>(q)] == flipped.core.dim(q); ++q)
          idx[static_cast<std::size_t>(q)] = 0;
      }
      detail::fix_signs(flipped);
      EXPECT_TRUE(same_bits(flipped.core.values(), expected.core.values())) << n << ", " << j;
      for (std::size_t q = 0; q < 3; ++q)
        EXPECT_TRUE(same_bits(flipped.factors[q].values(), expected.factors[q].values()))
            << n << ", " << j << ", factor " << q;
    }
  }
}

// --- starts that cannot move -------------------------------------------------

namespace {

template <class F>
void expect_invalid(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one containing: " << text;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

CpOptions given(index_t rank) {
  CpOptions o;
  o.rank = rank;
  o.init = CpInit::given;
  return o;
}

std::vector<Matrix<double>> given_start(const std::vector<index_t>& dims, index_t rank,
                                        std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Matrix<double>> start;
  for (index_t d : dims) start.push_back(random_matrix<double>(d, rank, gen));
  return start;
}

}  // namespace

TEST(CpStart, AllZeroStartIsRefused) {
  // It used to "converge" to fit 0 with all-zero factors and six eigen fallbacks.
  const Tensor<double> x = fortran_array<double>({5, 4, 3}, 1);
  std::vector<Matrix<double>> start;
  for (index_t d : x.dims()) start.emplace_back(d, 2);
  expect_invalid([&] { cp_als(x, given(2), start); }, "initial factor 1: column 0 is zero");
}

TEST(CpStart, ZeroColumnIsNamedByNumPyAxis) {
  const Tensor<double> x = fortran_array<double>({5, 4, 3, 6}, 1);
  CpOptions o = given(3);
  std::vector<Matrix<double>> start = given_start(x.dims(), 3, 2);
  for (index_t i = 0; i < 3; ++i) start[2](i, 1) = 0.0;
  expect_invalid([&] { cp_als(x, o, start); }, "initial factor 2: column 1 is zero");
  o.layout = Layout::row_major;
  expect_invalid([&] { cp_als(x, o, start); },
                 "initial factor of NumPy axis 1 (mode 2): column 1 is zero");
}

TEST(CpStart, FactorOfTheFirstUpdateIsNotRead) {
  // The first update (NumPy axis 0) reads only the other factors: a zero column there
  // is harmless, and the result is that of any other start with the same other factors.
  const Tensor<double> x = fortran_array<double>({5, 4, 3}, 1);
  CpOptions o = given(2);
  std::vector<Matrix<double>> start = given_start(x.dims(), 2, 3);
  o.max_iters = 5;
  const CpResult<double> before = cp_als(x, o, start);
  for (index_t i = 0; i < 5; ++i) start[0](i, 0) = 0.0;
  const CpResult<double> zero = cp_als(x, o, start);
  EXPECT_TRUE(same_bits(before.fit_history, zero.fit_history));
  // Row-major: the first update is of the last mode.
  o = given(2);
  start = given_start(x.dims(), 2, 3);
  o.layout = Layout::row_major;
  for (index_t i = 0; i < 3; ++i) start[2](i, 1) = 0.0;
  EXPECT_NO_THROW(cp_als(x, o, start));
  start[2] = given_start(x.dims(), 2, 3)[2];
  for (index_t i = 0; i < 5; ++i) start[0](i, 1) = 0.0;
  expect_invalid([&] { cp_als(x, o, start); },
                 "initial factor of NumPy axis 2 (mode 0): column 1 is zero");
}

TEST(CpStart, DependentComponentsAreRefused) {
  // Components 1 and 2 equal in every factor the first update reads: the normal
  // matrices stay singular and the two can never separate.
  const Tensor<double> x = fortran_array<double>({6, 5, 4}, 1);
  CpOptions o = given(3);
  std::vector<Matrix<double>> start = given_start(x.dims(), 3, 4);
  for (std::size_t n = 1; n < 3; ++n) {
    Matrix<double>& f = start[n];
    for (index_t i = 0; i < f.rows(); ++i) f(i, 2) = 3.0 * f(i, 1);  // parallel: same direction
  }
  expect_invalid([&] { cp_als(x, o, start); },
                 "component 2 of the initial factors is a linear combination of the components "
                 "before it in the factors the first update reads (NumPy axes 1, 2");
  // Parallel in one read factor only: the Khatri-Rao product still has independent
  // columns, and ALS can move.
  start[2] = given_start(x.dims(), 3, 5)[2];
  EXPECT_NO_THROW(cp_als(x, o, start));
  // The check itself does not overflow or underflow: scaled starts give the same answer.
  for (double scale : {1e200, 1e-200}) {
    std::vector<Matrix<double>> scaled = given_start(x.dims(), 3, 4);
    for (Matrix<double>& f : scaled)
      for (double& v : f.values()) v *= scale;
    EXPECT_TRUE(detail::stuck_components<double>(scaled, 3, {1, 2}).empty()) << scale;
    for (index_t i = 0; i < 5; ++i) scaled[1](i, 2) = scaled[1](i, 0);
    for (index_t i = 0; i < 4; ++i) scaled[2](i, 2) = scaled[2](i, 0);
    EXPECT_EQ(detail::stuck_components<double>(scaled, 3, {1, 2}), std::vector<index_t>{2})
        << scale;
  }
  // More components than rows of the Khatri-Rao product (R > 2 * 2): dependence is
  // unavoidable for every start, so it is not reported as stuck; cp_als refuses such a
  // rank anyway, since it exceeds the rank of every tensor of the shape.
  const Tensor<double> small = fortran_array<double>({6, 2, 2}, 1);
  const std::vector<Matrix<double>> over = given_start(small.dims(), 5, 6);
  EXPECT_TRUE(detail::stuck_components<double>(over, 5, {1, 2}).empty());
  EXPECT_THROW(cp_als(small, given(5), over), InvalidArgument);
}

TEST(CpStart, AttentionStartsWithEqualHeadsAreRepaired) {
  // Two heads with equal weights give the structured starts equal components, which
  // CP-ALS would refuse: the adapter replaces them (R = 8 = the tensor's rank here).
  attention::QueryKeyLayer<double> layer;
  layer.heads = 3;
  layer.head_dim = 4;
  std::mt19937_64 gen(1);
  std::normal_distribution<double> g(0.0, 0.25);
  layer.query_weight = Matrix<double>(16, 12);
  layer.key_weight = Matrix<double>(16, 12);
  for (double& v : layer.query_weight.values()) v = g(gen);
  for (double& v : layer.key_weight.values()) v = g(gen);
  for (index_t i = 0; i < 16; ++i)
    for (index_t j = 0; j < 4; ++j) {
      layer.query_weight(i, 4 + j) = layer.query_weight(i, j);
      layer.key_weight(i, 4 + j) = layer.key_weight(i, j);
    }
  for (attention::Init init : {attention::Init::structured, attention::Init::heads}) {
    attention::CompressOptions o;
    o.rank = 8;
    o.init = init;
    const auto res = attention::compress(layer, o);
    EXPECT_LT(res.relative_error, 1e-4) << static_cast<int>(init);
  }
}

// --- views -----------------------------------------------------------------------

TEST(Views, NullDataWithElementsIsRefused) {
  CpOptions cp;
  cp.rank = 2;
  TuckerOptions tk;
  tk.ranks = {2, 2, 2};
  const auto null_view = [] { return TensorView<const double>(nullptr, {4, 3, 5}); };
  expect_invalid([&] { cp_als(null_view(), cp); },
                 "(4, 3, 5) (60 elements) has a null data pointer");
  expect_invalid([&] { tucker(null_view(), tk); }, "null data pointer");
  expect_invalid([&] { norm(null_view()); }, "null data pointer");
  // An empty view may be null; the algorithms then refuse the empty shape.
  EXPECT_NO_THROW(TensorView<const double>(nullptr, {4, 0, 5}));
  expect_invalid([&] { cp_als(TensorView<const double>(nullptr, {4, 0, 5}), cp); }, "is empty");
  // Negative and overflowing sizes.
  const double v = 1.0;
  expect_invalid([&] { TensorView<const double>(&v, {2, -1}); }, "negative");
  expect_invalid(
      [&] {
        TensorView<const double>(&v, {index_t{1} << 40, index_t{1} << 40});
      },
      "64-bit");
}

// --- the program ---------------------------------------------------------------

namespace {

// Writes the array as dir/f.npy (Fortran order) and dir/c.npy (C order).
template <class T>
void write_both(const TempDir& dir, const Tensor<T>& fortran) {
  io::save_npy<T>(dir / "f.npy", fortran.view(), io::NpyOrder::fortran);
  io::save_npy<T>(dir / "c.npy", c_order(fortran).view(), io::NpyOrder::c_reversed);
}

// A .npy output as NumPy sees it, in NumPy axis order whatever order it was written in.
std::vector<double> numpy_values(const fs::path& p) {
  io::NpyHeader h;
  const Tensor<double> t = io::load_npy<double>(p, &h);
  return h.fortran_order ? t.values() : c_order(t).values();
}

// The report without what legitimately differs (input path, timings).
nlohmann::json numbers(const fs::path& report) {
  nlohmann::json j = nlohmann::json::parse(slurp(report));
  for (const char* key : {"input", "seconds", "timings"}) j.erase(key);
  return j;
}

}  // namespace

TEST(LayoutCli, CpAndTuckerAreBitIdenticalForCAndFortranFiles) {
  TempDir dir;
  for (const auto& shape : kShapes) {
    const int order = static_cast<int>(shape.size());
    for (std::uint64_t seed : {0u, 5u}) {
      write_both(dir, fortran_array<double>(shape, seed));
      std::vector<std::string> runs;
      for (const char* init : {"random", "nvecs"})
        runs.push_back(std::string("cp --rank 4 --init ") + init + " --seed " +
                       std::to_string(seed) + " --max-iters 40 --tol 1e-12");
      for (const char* method : {"hosvd", "sthosvd", "hooi"}) {
        runs.push_back(std::string("tucker --method ") + method + " --tol 0.4 --max-iters 6");
        std::string ranks;
        for (index_t d : shape) ranks += (ranks.empty() ? "" : ",") + std::to_string((d + 1) / 2);
        runs.push_back(std::string("tucker --method ") + method + " --ranks " + ranks);
      }
      for (const std::string& args : runs) {
        for (const char* file : {"f", "c"}) {
          const CliRun r =
              tenfold_cli(dir, args + " -q " + (dir / (std::string(file) + ".npy")).string() +
                                   " --out " + (dir / file).string());
          ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
        }
        const std::string what = args + " on a " + std::to_string(order) + "-way array";
        EXPECT_EQ(numbers(dir / "f/report.json"), numbers(dir / "c/report.json")) << what;
        std::vector<std::string> files;
        for (int a = 0; a < order; ++a) files.push_back("factor_" + std::to_string(a) + ".npy");
        files.push_back(args.rfind("cp", 0) == 0 ? "weights.npy" : "core.npy");
        for (const std::string& name : files) {
          EXPECT_TRUE(same_bits(numpy_values(dir / "f" / name), numpy_values(dir / "c" / name)))
              << what << ": " << name;
        }
        fs::remove_all(dir / "f");
        fs::remove_all(dir / "c");
      }
    }
  }
}

TEST(LayoutCli, AllZeroInitFactorsAreRefused) {
  TempDir dir;
  write_both(dir, fortran_array<double>({5, 4, 3}, 1));
  fs::create_directories(dir / "zero");
  for (int a = 0; a < 3; ++a) {
    const Tensor<double> z({std::vector<index_t>{5, 4, 3}[static_cast<std::size_t>(a)], 2});
    io::save_npy<double>(dir / "zero" / ("factor_" + std::to_string(a) + ".npy"), z.view());
  }
  // C order: NumPy axis 0 (updated first) is tenfold's mode 2; the refused factor is
  // the first one read, mode 1, i.e. NumPy axis 1.
  const CliRun c =
      tenfold_cli(dir, "cp --rank 2 -q " + (dir / "c.npy").string() + " --init-factors " +
                           (dir / "zero").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("initial factor of NumPy axis 1 (mode 1): column 0 is zero"),
            std::string::npos)
      << c.err;
  EXPECT_FALSE(fs::exists(dir / "out" / "weights.npy"));
  const CliRun f =
      tenfold_cli(dir, "cp --rank 2 -q " + (dir / "f.npy").string() + " --init-factors " +
                           (dir / "zero").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("initial factor 1: column 0 is zero"), std::string::npos) << f.err;
}
