// CP-ALS of a dense tensor with missing entries (EM through MaskedOperand).
#include <cmath>
#include <string>

#include "core/format.hpp"
#include "core/layout.hpp"
#include "core/scaling.hpp"
#include "cp/cp_als.hpp"
#include "cp/masked_operand.hpp"
#include "cp/reversed_operand.hpp"
#include "tenfold/error.hpp"

namespace tenfold {

template <class T>
CpResult<T> cp_als(TensorView<const T> x, TensorView<const std::uint8_t> observed,
                   const CpOptions& options, CpStart<T> initial_factors) {
  const auto start = std::chrono::steady_clock::now();
  detail::validate_dense_shape(x.dims(), "CP-ALS");
  if (observed.dims() != x.dims()) {
    throw DimensionMismatch("the mask of observed entries has shape " +
                            detail::shape_string(observed.dims()) + ", the tensor " +
                            detail::shape_string(x.dims()));
  }
  // Observed entries must be finite; missing ones are never read.
  index_t count = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    if (observed[i] == 0) continue;
    ++count;
    if (!std::isfinite(x[i])) {
      std::string at;
      for (index_t rest = i; index_t d : x.dims()) {
        at += (at.empty() ? "(" : ", ") + std::to_string(rest % d);
        rest /= d;
      }
      throw InvalidArgument("tensor has a non-finite observed entry at index " + at +
                            ") (mark it missing in the mask)");
    }
  }
  if (count == 0) throw InvalidArgument("the mask marks no entry of the tensor as observed");
  if (options.line_search) {
    throw InvalidArgument("line_search cannot be combined with missing values");
  }
  detail::require_exact_solver(options, "a mask of observed entries");
  const bool weighted = options.missing_solver == CpMissingSolver::weighted;
  if (weighted && options.nonnegative) {
    throw InvalidArgument("missing_solver = weighted cannot be combined with nonnegative");
  }
  if (options.compress == CpCompress::on) {
    throw InvalidArgument("compress = on cannot be combined with missing values");
  }
  detail::validate_cp_options(options, initial_factors, x.dims());
  detail::refuse_sparsity(options, "a tensor with missing entries");
  auto c = detail::make_compute<T>(options.backend);
  // Magnitudes far from 1: the problem scaled by a power of two (core/scaling.hpp).
  const detail::Balancing b = detail::balancing(x, observed.data());
  const Tensor<T> balanced = b.exponent != 0 ? detail::scaled(x, b.exponent) : Tensor<T>();
  const TensorView<const T> xb = b.exponent != 0 ? balanced.view() : x;
  // Row-major: the tensor and the mask as column-major copies in NumPy axis order, or
  // read in place with the modes numbered by axis (RowMajorInput).
  const bool copy = detail::copies_to_axis_order(options.layout, options.row_major_input, x.numel(),
                                                 sizeof(T) + 1);
  const bool in_place = options.layout == Layout::row_major && !copy;
  using detail::ReversedTensor;
  const ReversedTensor<T> x_axes = copy ? ReversedTensor<T>(xb) : ReversedTensor<T>();
  const ReversedTensor<std::uint8_t> observed_axes =
      copy ? ReversedTensor<std::uint8_t>(observed) : ReversedTensor<std::uint8_t>();
  CpResult<T> res = detail::run_in_axis_order(
      options, x.order(), initial_factors,
      [&](const CpOptions& o, std::span<const Matrix<T>> initial) {
        detail::MaskedOperand<T> op(*c, copy ? x_axes.view() : xb,
                                    copy ? observed_axes.view() : observed, weighted);
        return detail::run_in_axis_numbering(*c, op, in_place, [&](detail::CpOperand<T>& a) {
          return detail::run_cp_starts(a, *c, o, initial, start);
        });
      });
  detail::scale_back(std::span<T>(res.model.weights), b.exponent, b, "the CP weights");
  return res;
}

std::string_view to_string(CpMissingSolver solver) {
  return solver == CpMissingSolver::em ? "em" : "weighted";
}

CpMissingSolver parse_cp_missing_solver(std::string_view name) {
  if (name == "em") return CpMissingSolver::em;
  if (name == "weighted") return CpMissingSolver::weighted;
  throw InvalidArgument("unknown missing_solver '" + std::string(name) +
                        "' (expected em or weighted)");
}

template CpResult<float> cp_als<float>(TensorView<const float>, TensorView<const std::uint8_t>,
                                       const CpOptions&, CpStart<float>);
template CpResult<double> cp_als<double>(TensorView<const double>, TensorView<const std::uint8_t>,
                                         const CpOptions&, CpStart<double>);

}  // namespace tenfold
