#include "cp/gevd.hpp"

#include "core/compute.hpp"
#include "core/host_lapack.hpp"
#include "core/instantiate.hpp"
#include "core/random.hpp"

namespace tenfold::detail {
namespace {

// The cols x rows transpose of a column-major rows x cols matrix.
std::vector<double> transposed(index_t rows, index_t cols, const std::vector<double>& v) {
  std::vector<double> t(v.size());
  for (index_t j = 0; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i)
      t[static_cast<std::size_t>(j + i * cols)] = v[static_cast<std::size_t>(i + j * rows)];
  return t;
}

template <class T>
Matrix<T> to_matrix(index_t rows, index_t cols, const std::vector<double>& v) {
  Matrix<T> m(rows, cols);
  for (index_t e = 0; e < rows * cols; ++e)
    m.data()[e] = static_cast<T>(v[static_cast<std::size_t>(e)]);
  return m;
}

}  // namespace

bool gevd_applies(const std::vector<index_t>& dims, index_t rank) {
  return dims.size() == 3 && rank >= 2 && dims[0] == rank && dims[1] == rank && dims[2] >= 2;
}

template <class T>
std::vector<Matrix<T>> gevd_start(TensorView<const T> g, index_t rank, std::uint64_t seed) {
  const index_t r = rank, k = g.dim(2), rr = r * r;
  const auto size = [](index_t n) { return static_cast<std::size_t>(n); };
  // Two random mixtures of the frontal slices G_k = A diag(C(k, :)) B^T:
  // S_a = sum_k a_k G_k = A diag(C^T a) B^T, likewise S_b.
  Rng rng(seed);
  std::vector<double> wa(size(k)), wb(size(k));
  for (index_t i = 0; i < k; ++i) {
    wa[size(i)] = rng.normal();
    wb[size(i)] = rng.normal();
  }
  std::vector<double> sa(size(rr), 0.0), sb(size(rr), 0.0);
  for (index_t s = 0; s < k; ++s)
    for (index_t e = 0; e < rr; ++e) {
      const auto v = static_cast<double>(g.data()[e + s * rr]);
      sa[size(e)] += wa[size(s)] * v;
      sb[size(e)] += wb[size(s)] * v;
    }
  // M = S_a S_b^{-1} = A diag(C^T a ./ C^T b) A^{-1}: A = the eigenvectors of M (a
  // complex pair by its real and imaginary parts), from S_b^T M^T = S_a^T.
  std::vector<double> mt = transposed(r, r, sa);
  if (!solve_general(r, r, transposed(r, r, sb), mt.data())) return {};
  std::vector<double> a = general_eigenvectors(r, transposed(r, r, mt));
  if (a.empty()) return {};
  // B^T = A^{-1} S_a up to the scale of its rows (diag(C^T a)).
  std::vector<double> bt = sa;
  if (!solve_general(r, r, a, bt.data())) return {};
  const std::vector<double> b = transposed(r, r, bt);
  // C by least squares: C = G_(2) (B (.) A) ((A^T A) * (B^T B))^{-1}, with G_(2)^T = the
  // core seen as R^2 x K and (B (.) A)(i + R j, :) = A(i, :) * B(j, :).
  auto host = make_compute<double>(Backend::cpu);
  std::vector<double> kr(size(rr * r)), gd(size(rr * k));
  for (index_t c = 0; c < r; ++c)
    for (index_t j = 0; j < r; ++j)
      for (index_t i = 0; i < r; ++i)
        kr[size(i + j * r + c * rr)] = a[size(i + c * r)] * b[size(j + c * r)];
  for (index_t e = 0; e < rr * k; ++e) gd[size(e)] = static_cast<double>(g.data()[e]);
  std::vector<double> mttkrp(size(k * r)), ga(size(rr)), gb(size(rr));
  host->gemm(Op::trans, Op::none, k, r, rr, 1.0, gd.data(), rr, kr.data(), rr, 0.0, mttkrp.data(),
             k);
  host->gemm(Op::trans, Op::none, r, r, r, 1.0, a.data(), r, a.data(), r, 0.0, ga.data(), r);
  host->gemm(Op::trans, Op::none, r, r, r, 1.0, b.data(), r, b.data(), r, 0.0, gb.data(), r);
  for (index_t e = 0; e < rr; ++e) ga[size(e)] *= gb[size(e)];
  // V C^T = MTTKRP^T (V symmetric)
  std::vector<double> ct = transposed(k, r, mttkrp);
  if (!solve_general(r, k, std::move(ga), ct.data())) return {};
  std::vector<Matrix<T>> out;
  out.push_back(to_matrix<T>(r, r, a));
  out.push_back(to_matrix<T>(r, r, b));
  out.push_back(to_matrix<T>(k, r, transposed(r, k, ct)));
  return out;
}

template std::vector<Matrix<float>> gevd_start<float>(TensorView<const float>, index_t,
                                                      std::uint64_t);
template std::vector<Matrix<double>> gevd_start<double>(TensorView<const double>, index_t,
                                                        std::uint64_t);

}  // namespace tenfold::detail
