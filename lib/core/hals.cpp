#include "core/hals.hpp"

#include <algorithm>
#include <cmath>

namespace tenfold::detail {

template <class T>
void hals_update(Compute<T>& c, index_t rows, index_t rank, const T* m, const T* v, T* u,
                 std::vector<T>& host, HalsChange measure) {
  const auto mu_size = static_cast<std::size_t>(rows * rank);
  const auto rr = static_cast<std::size_t>(rank * rank);
  host.resize(2 * mu_size + rr + static_cast<std::size_t>(rows));
  T* hm = host.data();
  T* hu = hm + mu_size;
  T* hv = hu + mu_size;
  T* step = hv + rr;
  c.download(hm, m, mu_size);
  c.download(hu, u, mu_size);
  c.download(hv, v, rr);
  double first = 0.0;
  for (int pass = 0; pass < kHalsMaxInner; ++pass) {
    double change = 0.0;
    for (index_t r = 0; r < rank; ++r) {
      const T vrr = hv[r + r * rank];
      if (!(vrr > T(0))) continue;
      // step = m_r - U v_r
      std::copy_n(hm + r * rows, rows, step);
      for (index_t j = 0; j < rank; ++j) {
        const T vjr = hv[j + r * rank];
        const T* uj = hu + j * rows;
        for (index_t i = 0; i < rows; ++i) step[i] -= vjr * uj[i];
      }
      // u_r = max(0, u_r + step / v_rr), the change against u_r (own) or every u_j (tensorly)
      T* ur = hu + r * rows;
      for (index_t i = 0; i < rows; ++i) step[i] = std::max(T(0), ur[i] + step[i] / vrr);
      const bool own = measure == HalsChange::own;
      for (index_t j = own ? r : 0; j < (own ? r + 1 : rank); ++j) {
        const T* uj = hu + j * rows;
        for (index_t i = 0; i < rows; ++i) {
          change += static_cast<double>(step[i] - uj[i]) * static_cast<double>(step[i] - uj[i]);
        }
      }
      std::copy_n(step, rows, ur);
    }
    if (pass == 0) first = change;
    if (change <= kHalsInnerTol * first) break;
  }
  c.upload(u, hu, mu_size);
}

template <class T>
void make_nonnegative(Compute<T>& c, std::size_t n, T* u, std::vector<T>& host) {
  host.resize(n);
  c.download(host.data(), u, n);
  for (T& x : host) x = std::abs(x);
  c.upload(u, host.data(), n);
}

template void hals_update<float>(Compute<float>&, index_t, index_t, const float*, const float*,
                                 float*, std::vector<float>&, HalsChange);
template void hals_update<double>(Compute<double>&, index_t, index_t, const double*, const double*,
                                  double*, std::vector<double>&, HalsChange);
template void make_nonnegative<float>(Compute<float>&, std::size_t, float*, std::vector<float>&);
template void make_nonnegative<double>(Compute<double>&, std::size_t, double*,
                                       std::vector<double>&);

}  // namespace tenfold::detail
