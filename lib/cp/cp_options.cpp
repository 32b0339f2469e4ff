#include "cp/cp_options.hpp"

#include <cmath>
#include <string>

#include "core/format.hpp"
#include "core/instantiate.hpp"
#include "core/layout.hpp"
#include "cp/start_check.hpp"

namespace tenfold::detail {

void check_cp_rank(index_t rank, const std::vector<index_t>& dims) {
  if (const index_t bound = max_cp_rank(dims); rank > bound) {
    throw InvalidOption("rank", std::to_string(rank) + " exceeds " + std::to_string(bound) +
                                    ", the largest CP rank of any tensor of shape " +
                                    shape_string(dims) +
                                    " (the smallest product of all sizes but one)");
  }
}

template <class T>
void validate_cp_options(const CpOptions& o, std::span<const Matrix<T>> initial_factors,
                         const std::vector<index_t>& dims) {
  if (o.rank < 1) throw InvalidOption("rank", "must be at least 1, got " + std::to_string(o.rank));
  if (o.max_iters < 0) {
    throw InvalidOption("max_iters", "must be >= 0, got " + std::to_string(o.max_iters));
  }
  if (!(o.tol >= 0.0) || !std::isfinite(o.tol)) {
    throw InvalidOption("tol", "must be finite and >= 0, got " + number_string(o.tol));
  }
  if (!(o.ridge >= 0.0) || !std::isfinite(o.ridge)) {
    throw InvalidOption("ridge", "must be finite and >= 0, got " + number_string(o.ridge));
  }
  if (o.n_starts < 0) {
    throw InvalidOption("n_starts",
                        "must be at least 0 (0: automatic), got " + std::to_string(o.n_starts));
  }
  if constexpr (is_complex_v<T>) {
    if (o.nonnegative) throw InvalidArgument("nonnegative has no meaning for a complex tensor");
    if (o.compress == CpCompress::on) {
      throw InvalidArgument(
          "compress = on is not available for a complex tensor (its Tucker "
          "compression is real only)");
    }
    if (o.solver == CpSolver::sampled) {
      throw InvalidOption("solver", "sampled is not available for a complex tensor");
    }
  }
  if (o.line_search && o.nonnegative) {
    throw InvalidArgument("line_search cannot be combined with nonnegative");
  }
  if (o.orthogonalise < 0) {
    throw InvalidOption("orthogonalise",
                        "must be >= 0 (sweeps), got " + std::to_string(o.orthogonalise));
  }
  if (!o.nonnegative_modes.empty()) {
    if (!o.nonnegative) throw InvalidArgument("nonnegative_modes need nonnegative");
    std::vector<bool> seen(dims.size(), false);
    for (int n : o.nonnegative_modes) {
      if (n < 0 || n >= static_cast<int>(dims.size())) {
        throw InvalidArgument("nonnegative mode " + std::to_string(n) +
                              " is not a mode of a tensor of order " + std::to_string(dims.size()));
      }
      if (seen[static_cast<std::size_t>(n)]) {
        throw InvalidArgument("nonnegative mode " + std::to_string(n) + " is given twice");
      }
      seen[static_cast<std::size_t>(n)] = true;
    }
  }
  if (o.sparsity < 0) {
    throw InvalidOption("sparsity", "must be >= 0 (entries), got " + std::to_string(o.sparsity));
  }
  if (o.orthogonalise > 0 && o.nonnegative) {
    throw InvalidArgument(
        "orthogonalise cannot be combined with nonnegative (Q has negative "
        "entries)");
  }
  if (o.orthogonalise > 0 && !o.fixed_modes.empty()) {
    throw InvalidArgument(
        "orthogonalise cannot be combined with fixed modes (the QR would "
        "change the fixed factors)");
  }
  validate_cp_solver(o);
  if (!(o.time_limit >= 0.0)) {
    throw InvalidOption("time_limit", "must be >= 0, got " + number_string(o.time_limit));
  }
  check_cp_rank(o.rank, dims);
  // Fixed modes: distinct mode numbers, a free mode left, a start to keep.
  std::vector<bool> fixed(dims.size(), false);
  for (int n : o.fixed_modes) {
    if (n < 0 || n >= static_cast<int>(dims.size())) {
      throw InvalidArgument("fixed mode " + std::to_string(n) +
                            " is not a mode of a tensor of order " + std::to_string(dims.size()));
    }
    if (fixed[static_cast<std::size_t>(n)]) {
      throw InvalidArgument("fixed mode " + std::to_string(n) + " is given twice");
    }
    fixed[static_cast<std::size_t>(n)] = true;
  }
  if (!o.fixed_modes.empty()) {
    if (o.fixed_modes.size() == dims.size()) {
      throw InvalidArgument("every mode is fixed: there is nothing to fit");
    }
    if (initial_factors.empty()) {
      throw InvalidArgument("fixed modes need initial factors (the factors to keep)");
    }
    if (o.n_starts > 1) throw InvalidArgument("fixed modes cannot be combined with n_starts > 1");
    const int last = o.layout == Layout::row_major ? 0 : static_cast<int>(dims.size()) - 1;
    if (o.line_search && fixed[static_cast<std::size_t>(last)]) {
      throw InvalidArgument("line_search cannot keep the last mode of the sweep fixed (mode " +
                            std::to_string(last) + "): its factor carries the jump's weights");
    }
  }
  // A start of one's own: init given (or automatic, which then means given).
  if (initial_factors.empty()) {
    if (o.init == CpInit::given) {
      throw InvalidArgument(
          "init = given needs initial factors (one I_n x R matrix per mode), "
          "and none were passed");
    }
    return;
  }
  if (o.init != CpInit::given && o.init != CpInit::automatic) {
    throw InvalidArgument("init = " + std::string(to_string(o.init)) +
                          " cannot start from initial factors; pass init = given or auto with "
                          "them, or no initial factors");
  }
  if (initial_factors.size() != dims.size()) {
    throw DimensionMismatch("the start needs " + std::to_string(dims.size()) +
                            " initial factors, got " + std::to_string(initial_factors.size()));
  }
  for (std::size_t n = 0; n < dims.size(); ++n) {
    const Matrix<T>& f = initial_factors[n];
    if (f.rows() != dims[n] || f.cols() != o.rank) {
      throw DimensionMismatch("initial factor " + std::to_string(n) + " is " +
                              std::to_string(f.rows()) + "x" + std::to_string(f.cols()) +
                              ", expected " + std::to_string(dims[n]) + "x" +
                              std::to_string(o.rank));
    }
    check_finite(TensorView<const T>(f.data(), {f.rows(), f.cols()}),
                 ("initial factor " + std::to_string(n)).c_str());
  }
  check_start_can_move(o, initial_factors, dims);
}

void validate_cp_solver(const CpOptions& o) {
  if (o.samples < 0) {
    throw InvalidOption("samples", "must be >= 0 (0: automatic), got " + std::to_string(o.samples));
  }
  if (o.fit_check_every < 0) {
    throw InvalidOption("fit_check_every",
                        "must be >= 0 (0: automatic), got " + std::to_string(o.fit_check_every));
  }
  if (o.solver != CpSolver::sampled) return;
  const auto refuse = [](const std::string& what) {
    throw InvalidArgument("solver = sampled cannot be combined with " + what);
  };
  if (o.nonnegative) refuse("nonnegative");
  if (o.line_search) refuse("line_search");
  if (o.n_starts > 1) refuse("n_starts > 1 (got " + std::to_string(o.n_starts) + ")");
  if (o.compress == CpCompress::on) refuse("compress = on");
  if (!o.fixed_modes.empty()) refuse("fixed modes");
  if (o.orthogonalise > 0) refuse("orthogonalise");
  if (o.sparsity > 0) refuse("sparsity");
  if (o.backend != Backend::cpu) {
    throw InvalidArgument("solver = sampled runs on the cpu backend only, got backend " +
                          std::string(to_string(o.backend)));
  }
}

void require_exact_solver(const CpOptions& o, const char* input) {
  if (o.solver != CpSolver::exact) {
    throw InvalidArgument(
        std::string("solver = sampled needs a dense tensor without a mask, got ") + input);
  }
}

#define TENFOLD_INSTANTIATE_CP_OPTIONS(T)                                            \
  template void validate_cp_options<T>(const CpOptions&, std::span<const Matrix<T>>, \
                                       const std::vector<index_t>&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_CP_OPTIONS)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_CP_OPTIONS)

}  // namespace tenfold::detail
