// The public CP-ALS entry points (include/tenfold/cp.hpp): the input checked and
// balanced, then handed to the sampled solver, to compression first, or to the starts
// of the one ALS loop (multi_start.cpp, cp_als.cpp) over the operand that fits it; and
// the names of the CP enums.
#include <algorithm>
#include <limits>
#include <span>
#include <string_view>

#include "core/format.hpp"
#include "core/instantiate.hpp"
#include "core/layout.hpp"
#include "core/names.hpp"
#include "core/scaling.hpp"
#include "cp/compressed.hpp"
#include "cp/cp_als.hpp"
#include "cp/dense_operand.hpp"
#include "cp/kruskal_operand.hpp"
#include "cp/reversed_operand.hpp"
#include "cp/sampled.hpp"
#include "cp/sparsity_operand.hpp"
#include "tenfold/cp.hpp"

namespace tenfold {

index_t max_cp_rank(std::span<const index_t> dims) {
  index_t best = std::numeric_limits<index_t>::max();
  for (std::size_t n = 0; n < dims.size(); ++n) {
    // prod_{m != n} I_m, saturating
    index_t p = 1;
    for (std::size_t m = 0; m < dims.size(); ++m) {
      if (m == n) continue;
      const index_t d = dims[m];
      p = d != 0 && p > std::numeric_limits<index_t>::max() / d
              ? std::numeric_limits<index_t>::max()
              : p * d;
    }
    best = std::min(best, p);
  }
  return best;
}

namespace {

constexpr detail::Named<CpInit> cp_inits[] = {{CpInit::automatic, "auto"},
                                              {CpInit::random, "random"},
                                              {CpInit::nvecs, "nvecs"},
                                              {CpInit::given, "given"},
                                              {CpInit::gevd, "gevd"}};
constexpr detail::Named<CpStop> cp_stops[] = {{CpStop::converged, "converged"},
                                              {CpStop::max_iters, "max_iters"},
                                              {CpStop::time_limit, "time_limit"},
                                              {CpStop::callback, "callback"}};

}  // namespace

std::string_view to_string(CpInit init) { return detail::name_of<CpInit>(cp_inits, init); }

CpInit parse_cp_init(std::string_view name) {
  return detail::parse_named<CpInit>(cp_inits, name, "init");
}

std::string_view to_string(CpStop stop) { return detail::name_of<CpStop>(cp_stops, stop); }

template <class T>
CpResult<T> cp_als(TensorView<const T> x, const CpOptions& options, CpStart<T> initial_factors) {
  const auto start = detail::Clock::now();
  detail::validate_dense_shape(x.dims(), "CP-ALS");
  // Finite entries, and magnitudes far from 1: the problem scaled by a power of two
  // (core/scaling.hpp); one pass over x for both.
  const detail::Balancing b = detail::checked_balancing(x, "tensor");
  detail::validate_cp_options(options, initial_factors, x.dims());
  auto c = detail::make_compute<T>(options.backend);
  // Row-major: the array's column-major copy in NumPy axis order (the arithmetic of its
  // Fortran-order copy), or the array itself with its modes numbered by axis.
  const bool copy =
      detail::copies_to_axis_order(options.layout, options.row_major_input, x.numel(), sizeof(T));
  const bool in_place = options.layout == Layout::row_major && !copy;
  CpResult<T> res;
  {
    const Tensor<T> balanced = b.exponent != 0 ? detail::scaled(x, b.exponent) : Tensor<T>();
    const TensorView<const T> xb = b.exponent != 0 ? balanced.view() : x;
    const detail::ReversedTensor<T> axis_order =
        copy ? detail::ReversedTensor<T>(xb) : detail::ReversedTensor<T>();
    const TensorView<const T> xs = copy ? axis_order.view() : xb;
    res = detail::run_in_axis_order(
        options, x.order(), initial_factors,
        [&](const CpOptions& o, std::span<const Matrix<T>> initial) {
          const std::vector<index_t> axes = in_place ? detail::reversed(xs.dims()) : xs.dims();
          // complex: neither the sampled solver nor compression (real Tucker only).
          if constexpr (!detail::is_complex_v<T>) {
            if (o.solver == CpSolver::sampled) {
              return detail::run_sampled_cp(xs, in_place, *c, o, initial, start);
            }
            // Compression first where it pays (cp/compressed.hpp).
            if (const auto ranks = detail::planned_compression(o, axes); !ranks.empty()) {
              return detail::run_compressed_cp(xs, in_place, *c, o, initial, ranks, start);
            }
          }
          const auto run = [&](detail::CpOperand<T>& op) {
            return detail::run_in_axis_numbering(*c, op, in_place, [&](detail::CpOperand<T>& a) {
              return detail::run_cp_starts(a, *c, o, initial, start);
            });
          };
          if (o.sparsity > 0) {
            detail::SparsityOperand<T> op(*c, xs, o.sparsity);
            return run(op);
          }
          detail::DenseOperand<T> op(*c, xs);
          return run(op);
        });
  }
  detail::scale_back(std::span<T>(res.model.weights), b.exponent, b, "the CP weights");
  // The whole call: releasing the copy and the operand's buffers takes time too.
  res.timings.total = detail::seconds_since(start);
  return res;
}

template <class T>
CpResult<T> cp_als(const KTensor<T>& x, const CpOptions& options, CpStart<T> initial_factors) {
  // Row-major: the factors in NumPy axis order.
  return detail::cp_als_of_model<detail::KruskalOperand>(
      x, options, initial_factors, "",
      [](const KTensor<T>& k) { return KTensor<T>(k.weights, detail::reversed(k.factors)); });
}

#define TENFOLD_INSTANTIATE_CP_ALS(T)                                                \
  template CpResult<T> cp_als<T>(TensorView<const T>, const CpOptions&, CpStart<T>); \
  template CpResult<T> cp_als<T>(const KTensor<T>&, const CpOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CP_ALS)
#define TENFOLD_INSTANTIATE_COMPLEX_CP_ALS(T) \
  template CpResult<T> cp_als<T>(TensorView<const T>, const CpOptions&, CpStart<T>);
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_COMPLEX_CP_ALS)

}  // namespace tenfold
