// Helpers of the attention adapter shared by its algorithms: a layer's matrices in
// double and per-head products on a backend (the adapter's own small host-side steps
// run on the cpu backend through the Compute interface, see host_compute).
#pragma once

#include <memory>
#include <type_traits>
#include <vector>

#include "core/compute.hpp"
#include "tenfold/attention.hpp"

namespace tenfold::attention::detail {

/// The cpu backend in double, for the adapter's own small host-side steps.
inline std::unique_ptr<tenfold::detail::Compute<double>> host_compute() {
  return tenfold::detail::make_compute<double>(Backend::cpu);
}

/// The matrix with its entries converted to double.
template <class T>
Matrix<double> to_double(const Matrix<T>& m);

/// A matrix in double without copying one that already is: a view of a double
/// matrix, a converted copy of a float one.
class AsDouble {
 public:
  template <class T>
  explicit AsDouble(const Matrix<T>& m) {
    if constexpr (std::is_same_v<T, double>) {
      m_ = &m;
    } else {
      copy_ = to_double(m);
      m_ = &copy_;
    }
  }
  AsDouble(const AsDouble&) = delete;
  AsDouble& operator=(const AsDouble&) = delete;
  const Matrix<double>& get() const { return *m_; }

 private:
  Matrix<double> copy_;
  const Matrix<double>* m_ = nullptr;
};

/// W with the bias as an extra last row when `augment` (zeros for a missing bias): D' x n,
/// in double: the layer acting on [x; 1].
template <class T>
Matrix<double> augmented(const Matrix<T>& w, const std::vector<T>& bias, bool augment) {
  const index_t rows = w.rows() + (augment ? 1 : 0);
  Matrix<double> out(rows, w.cols());
  for (index_t j = 0; j < w.cols(); ++j) {
    for (index_t i = 0; i < w.rows(); ++i) out(i, j) = static_cast<double>(w(i, j));
    if (augment) out(w.rows(), j) = bias.empty() ? 0.0 : static_cast<double>(bias[j]);
  }
  return out;
}

/// G_h = A_h^T B_h (d x d) for every head, A_h and B_h being the column blocks
/// h d ... (h+1) d - 1 of A and B (D x H d); returned as H consecutive d x d blocks.
std::vector<double> head_grams(tenfold::detail::Compute<double>& c, const Matrix<double>& a,
                               const Matrix<double>& b, index_t heads, index_t d);

/// ||T||^2 = sum_h <W_Q^h^T W_Q^h, W_K^h^T W_K^h> / d of the layer's QK tensor.
double qk_norm_squared(tenfold::detail::Compute<double>& c, const Matrix<double>& wq,
                       const Matrix<double>& wk, index_t heads, index_t d);

/// v_h = W_K^h b_Q^h / sqrt(d) as the columns of a D x H matrix (0 x 0 without query bias).
template <class T>
Matrix<T> content_vectors(const QueryKeyLayer<T>& layer);

/// Throws DimensionMismatch unless `tokens` has D rows.
template <class T>
void check_tokens(const Matrix<T>& tokens, index_t input_dim, const char* what);

}  // namespace tenfold::attention::detail
