#include "core/subspace.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/instantiate.hpp"
#include "core/random.hpp"
#include "core/scalar.hpp"

namespace tenfold::detail {
namespace {

// The randomised eigensolver's passes of G over the subspace.
constexpr int kSketchPasses = 3;

}  // namespace

template <class T>
bool cholesky_qr(Compute<T>& c, index_t rows, index_t k, T* u, T* chol, bool shifted) {
  // G = U^T U = L L^T, U <- U L^{-T}, twice (the second pass restores the orthogonality
  // the first loses to cond(U)^2). Shifted: a Gram that is not numerically positive
  // definite is shifted, G + sigma I, and a third pass follows (shifted CholeskyQR3,
  // Fukaya, Kannan, Nakatsukasa, Yamamoto and Yanagisawa 2020; sigma bounds their
  // 11 (m n + n (n + 1)) eps ||U||_2^2 by ||U||_F^2).
  const auto size = static_cast<std::size_t>(rows * k);
  int passes = 2;
  for (int pass = 0; pass < passes; ++pass) {
    c.syrk(Op::trans, k, rows, T(1), u, rows, T(0), chol, k);
    if (!c.potrf(k, chol, k)) {
      if (!shifted) return false;
      const double sigma = 11.0 *
                           (static_cast<double>(rows) * k + static_cast<double>(k) * (k + 1)) *
                           std::numeric_limits<real_t<T>>::epsilon() * c.sum_squares(size, u);
      c.syrk(Op::trans, k, rows, T(1), u, rows, T(0), chol, k);
      c.add_diagonal(k, chol, k, static_cast<T>(sigma));
      if (!(sigma > 0.0) || !c.potrf(k, chol, k)) return false;
      passes = 3;
    }
    c.solve_lower_right(Op::trans, k, chol, k, rows, u, rows);
  }
  return true;
}

// Subspace iteration (Halko, Martinsson and Tropp 2011, Alg. 4.4) on k = r +
// kSketchOversampling Gaussian columns, Q = orth(G^p Omega) with each pass
// orthonormalised, then Rayleigh-Ritz on Q^T G Q (k x k): O(p n^2 k) in place of the
// eigensolver's O(n^3), in double whatever the tensor's precision (Cholesky QR squares
// the condition of G Q).
bool leading_eigenvectors_sketched(index_t n, const double* g, index_t r, std::uint64_t seed,
                                   double* u) {
  const auto c = make_compute<double>(Backend::cpu);
  const index_t k = r + kSketchOversampling;
  const auto size = static_cast<std::size_t>(n * k);
  std::vector<double> q(size), z(size);
  Rng rng(seed);
  for (double& v : q) v = rng.normal();
  std::vector<double> h(static_cast<std::size_t>(k * k)), w(static_cast<std::size_t>(k));
  for (int pass = 0; pass < kSketchPasses; ++pass) {
    c->gemm(Op::none, Op::none, n, k, n, 1.0, g, n, q.data(), n, 0.0, z.data(), n);  // G Q
    if (!cholesky_qr(*c, n, k, z.data(), h.data(), false)) return false;
    q.swap(z);
  }
  // H = Q^T G Q = W diag(w) W^T (w ascending); the Ritz vectors Q W, largest first.
  c->gemm(Op::none, Op::none, n, k, n, 1.0, g, n, q.data(), n, 0.0, z.data(), n);
  c->gemm(Op::trans, Op::none, k, k, n, 1.0, q.data(), n, z.data(), n, 0.0, h.data(), k);
  c->syevd(k, h.data(), k, w.data());
  std::vector<double> top(static_cast<std::size_t>(k * r));
  for (index_t j = 0; j < r; ++j) std::copy_n(h.data() + (k - 1 - j) * k, k, top.data() + j * k);
  c->gemm(Op::none, Op::none, n, r, k, 1.0, q.data(), n, top.data(), k, 0.0, u, n);
  return true;
}

#define TENFOLD_INSTANTIATE_CHOLESKY_QR(T) \
  template bool cholesky_qr<T>(Compute<T>&, index_t, index_t, T*, T*, bool);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CHOLESKY_QR)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_CHOLESKY_QR)

}  // namespace tenfold::detail
