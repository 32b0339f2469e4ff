// Arrays in NumPy's Fortran and C order, and CP and Tucker run on both ways, for the
// layout tests (test_layout.cpp, test_layout_in_place.cpp,
// test_given_starts_and_views.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/layout.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {

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

// rows x cols with entries uniform in [0, 1) drawn from `gen`.
template <class T>
Matrix<T> random_matrix(index_t rows, index_t cols, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Matrix<T> m(rows, cols);
  for (T& v : m.values()) v = static_cast<T>(u(gen));
  return m;
}

inline const std::vector<std::vector<index_t>> kShapes = {
    {12, 9, 7}, {5, 4, 3, 6}, {20, 12}, {6, 6, 6}};

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

}  // namespace tenfold::test
