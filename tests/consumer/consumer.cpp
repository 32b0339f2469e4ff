// Fits a rank-2 CP model to an exact rank-2 tensor through the installed library.
#include <cmath>
#include <cstdio>
#include <tenfold/cp.hpp>
#include <tenfold/error.hpp>

int main() {
  tenfold::KTensor<double> truth;
  truth.weights = {3.0, 1.0};
  const double a[3][6] = {{1, 0, 1, 1, 2, 0}, {0, 1, 1, -1, 1, 2}, {1, 1, 0, 2, 0, 1}};
  for (const auto& f : a) truth.factors.emplace_back(3, 2, std::vector<double>(f, f + 6));
  tenfold::CpOptions options;
  options.rank = 2;
  options.tol = 1e-12;
  options.max_iters = 1000;
  const auto result = tenfold::cp_als(truth.full(), options);
  const double err = result.relative_error;
  std::printf("consumer: fit %.10f after %d iterations\n", result.fit, result.iterations);
  try {
    options.rank = 0;
    tenfold::cp_als(truth.full(), options);
    return 1;
  } catch (const tenfold::InvalidArgument&) {
  }
  return err < 1e-6 ? 0 : 1;
}
