#include "cp/revive.hpp"

#include "core/instantiate.hpp"
#include "core/scalar.hpp"

namespace tenfold::detail {

template <class T>
std::vector<index_t> zero_components(Compute<T>& c, std::span<T* const> grams, index_t rank,
                                     const std::vector<bool>& fixed) {
  const auto r = static_cast<std::size_t>(rank);
  std::vector<bool> zero(r, false);
  std::vector<T> g(r * r);
  for (std::size_t n = 0; n < grams.size(); ++n) {
    if (fixed[n]) continue;
    c.download(g.data(), grams[n], g.size());
    // G_n(j, j) = ||U_n(:, j)||^2
    for (std::size_t j = 0; j < r; ++j)
      if (real_part(g[j + j * r]) == 0) zero[j] = true;
  }
  std::vector<index_t> columns;
  for (std::size_t j = 0; j < r; ++j)
    if (zero[j]) columns.push_back(static_cast<index_t>(j));
  return columns;
}

template <class T>
void redraw_columns(Compute<T>& c, std::span<const index_t> dims, std::span<T* const> factors,
                    const std::vector<bool>& fixed, std::span<const index_t> columns, index_t rank,
                    T* lambda, Rng& rng) {
  std::vector<T> host(static_cast<std::size_t>(rank));
  c.download(host.data(), lambda, host.size());
  for (const index_t j : columns) host[static_cast<std::size_t>(j)] = T(1);
  c.upload(lambda, host.data(), host.size());
  for (std::size_t n = 0; n < factors.size(); ++n) {
    if (fixed[n]) continue;
    host.resize(static_cast<std::size_t>(dims[n]));
    for (const index_t j : columns) {
      for (T& v : host) v = static_cast<T>(rng.uniform());
      c.upload(factors[n] + j * dims[n], host.data(), host.size());
    }
  }
}

#define TENFOLD_INSTANTIATE_REVIVE(T)                                                              \
  template std::vector<index_t> zero_components<T>(Compute<T>&, std::span<T* const>, index_t,      \
                                                   const std::vector<bool>&);                      \
  template void redraw_columns<T>(Compute<T>&, std::span<const index_t>, std::span<T* const>,      \
                                  const std::vector<bool>&, std::span<const index_t>, index_t, T*, \
                                  Rng&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_REVIVE)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_REVIVE)

}  // namespace tenfold::detail
