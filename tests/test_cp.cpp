#include <gtest/gtest.h>

#include <cmath>

#include "tenfold/cp.hpp"

TEST(CpAls, SmokeExact) {
  tenfold::KTensor<double> k;
  k.weights = {2.0, 1.0};
  for (int n = 0; n < 4; ++n) {
    tenfold::Matrix<double> f(4 + n, 2);
    for (tenfold::index_t i = 0; i < f.size(); ++i) f.values()[i] = std::sin(1.0 + i * (n + 1.3));
    k.factors.push_back(f);
  }
  auto x = k.full();
  for (int init = 0; init < 2; ++init) {
  tenfold::CpOptions<double> o;
  o.rank = 2;
  o.tol = 1e-14;
  o.max_iters = 500;
  o.init = init ? tenfold::CpInit::nvecs : tenfold::CpInit::random;
  auto r = tenfold::cp_als(x, o);
  auto y = r.model.full();
  double e = 0;
  for (tenfold::index_t i = 0; i < x.numel(); ++i) e += (x[i] - y[i]) * (x[i] - y[i]);
  std::printf("exact rel err %.3e fit %.16f iters %d w %g %g\n", std::sqrt(e) / tenfold::norm<double>(x), r.fit, r.iterations, r.model.weights[0], r.model.weights[1]);
  }
}
