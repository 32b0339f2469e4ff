// CP-ALS of a sparse tensor: the one ALS loop (cp/cp_als.hpp) over a SparseOperand.
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/instantiate.hpp"
#include "core/memory.hpp"
#include "core/names.hpp"
#include "cp/cp_als.hpp"
#include "sparse/sparse_operand.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold {

namespace {

constexpr detail::Named<CsfLayout> csf_layouts[] = {{CsfLayout::automatic, "auto"},
                                                    {CsfLayout::all, "all"},
                                                    {CsfLayout::two, "two"},
                                                    {CsfLayout::one, "one"}};

}  // namespace

std::string_view to_string(CsfLayout layout) {
  return detail::name_of<CsfLayout>(csf_layouts, layout);
}

CsfLayout parse_csf_layout(std::string_view name) {
  return detail::parse_named<CsfLayout>(csf_layouts, name, "csf layout");
}

template <class T>
CsfLayout csf_layout_for(const SparseTensor<T>& x, const SparseCpOptions& sparse, bool taken) {
  if (sparse.csf != CsfLayout::automatic) return sparse.csf;
  return detail::csf_layout_within<T>(x.dims(), x.nnz(),
                                      static_cast<double>(detail::host_available_bytes()), taken);
}

namespace {

// CP-ALS of x on its CSF trees, built from `entries`: x, or (released once the trees are
// built) x taken. Every argument is checked before the trees are built.
template <class T, class Entries>
CpResult<T> sparse_cp_als(const SparseTensor<T>& x, Entries&& entries, const CpOptions& options,
                          const CpStart<T>& initial_factors, const SparseCpOptions& sparse) {
  const auto start = detail::Clock::now();
  if (x.order() < 2) {
    throw InvalidArgument("CP-ALS needs a tensor of order >= 2, got a sparse tensor of order " +
                          std::to_string(x.order()));
  }
  if (options.compress == CpCompress::on) {
    throw InvalidArgument("compress = on applies to dense tensors only, not to a sparse tensor");
  }
  if (options.layout == Layout::row_major) {
    throw InvalidArgument(
        "layout = row_major applies to dense arrays; the modes of a sparse tensor are its "
        "coordinate columns (NumPy axes) already");
  }
  detail::validate_cp_options(options, initial_factors, x.dims());
  detail::require_exact_solver(options, "a sparse tensor");
  detail::refuse_sparsity(options, "a sparse tensor");
  auto c = detail::make_compute<T>(options.backend);
  const CsfLayout layout = csf_layout_for(x, sparse, !std::is_lvalue_reference_v<Entries>);
  detail::SparseOperand<T> op(*c, std::forward<Entries>(entries), layout);
  CpResult<T> res = detail::run_cp_starts(op, *c, options, initial_factors, start);
  res.timings.total = detail::seconds_since(start);
  return res;
}

}  // namespace

template <class T>
CpResult<T> cp_als(const SparseTensor<T>& x, const CpOptions& options, CpStart<T> initial_factors,
                   const SparseCpOptions& sparse) {
  return sparse_cp_als(x, x, options, initial_factors, sparse);
}

template <class T>
CpResult<T> cp_als(SparseTensor<T>&& x, const CpOptions& options, CpStart<T> initial_factors,
                   const SparseCpOptions& sparse) {
  return sparse_cp_als(x, std::move(x), options, initial_factors, sparse);
}

#define TENFOLD_INSTANTIATE_SPARSE_CP(T)                                                      \
  template CsfLayout csf_layout_for<T>(const SparseTensor<T>&, const SparseCpOptions&, bool); \
  template CpResult<T> cp_als<T>(const SparseTensor<T>&, const CpOptions&, CpStart<T>,        \
                                 const SparseCpOptions&);                                     \
  template CpResult<T> cp_als<T>(SparseTensor<T>&&, const CpOptions&, CpStart<T>,             \
                                 const SparseCpOptions&);
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_SPARSE_CP)

}  // namespace tenfold
