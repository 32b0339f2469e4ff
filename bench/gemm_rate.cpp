#include "gemm_rate.hpp"

#include <algorithm>
#include <chrono>

#include "core/compute.hpp"

namespace tenfold::bench {

template <class T>
double gemm_gflops(index_t m, index_t n, index_t k, int reps) {
  auto c = detail::make_compute<T>(Backend::cpu);
  detail::Buffer<T> a(*c, static_cast<std::size_t>(m * k)), b(*c, static_cast<std::size_t>(k * n)),
      out(*c, static_cast<std::size_t>(m * n));
  c->fill(a.get(), a.size(), T(0.5));
  c->fill(b.get(), b.size(), T(0.25));
  double best = 1e300;
  for (int i = 0; i <= reps; ++i) {  // the first run warms up
    const auto t0 = std::chrono::steady_clock::now();
    c->gemm(detail::Op::none, detail::Op::none, m, n, k, T(1), a.get(), m, b.get(), k, T(0),
            out.get(), m);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::min(best, s);
  }
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best *
         1e-9;
}

template double gemm_gflops<float>(index_t, index_t, index_t, int);
template double gemm_gflops<double>(index_t, index_t, index_t, int);

}  // namespace tenfold::bench
