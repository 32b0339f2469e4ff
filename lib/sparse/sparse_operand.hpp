// A sparse tensor as a CP-ALS operand: MTTKRP of mode n on the CSF tree rooted at n, or
// at n's level of one tree for all modes, or (two trees) on the second tree for the first
// one's leaf mode (sparse/csf.hpp), from row-major copies of the factors that are refreshed
// only when a factor changes. Host-memory backends only (cpu, reference).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/memory.hpp"
#include "cp/operand.hpp"
#include "sparse/csf.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::detail {

/// The root modes of a resolved layout's trees (not automatic): all, every mode in order;
/// one, the smallest mode (the first of equal ones); two, that and the mode of its tree's
/// leaves (csf_mode_order).
std::vector<int> csf_roots(std::span<const index_t> dims, CsfLayout layout);

/// The layout CsfLayout::automatic resolves to for a tensor of sizes `dims` with nnz entries
/// when `available` bytes of host memory are free: the first of all, two and one whose
/// trees' build holds at most 3/4 of them beyond the tensor held now (csf_build_bytes):
/// kept by the caller (not `taken`), the trees and one build scratch; taken by cp_als, the
/// peak of taking the entries and building the trees from them, whose bytes the tensor's
/// own, freed on the way, offset (csf_taken_trees_bytes). One when none does.
template <class T>
CsfLayout csf_layout_within(std::span<const index_t> dims, index_t nnz, double available,
                            bool taken);

template <class T>
class SparseOperand final : public CpOperand<T> {
 public:
  /// Builds the trees of `layout` rooted at csf_roots (x must outlive the operand), after
  /// checking that they fit in memory, several at once where memory allows unless
  /// `one_at_a_time` (build_csf_trees); `max_narrow` as for Csf (tests force 64-bit levels
  /// with it). Throws InvalidArgument for a backend without host memory or layout automatic
  /// (resolve it first: csf_layout_for).
  SparseOperand(Compute<T>& c, const SparseTensor<T>& x, CsfLayout layout = CsfLayout::all,
                index_t max_narrow = kNarrowLimit, bool one_at_a_time = false);
  /// The same, taking x (left empty), the trees built one at a time in one scratch, so that
  /// the entries are not held beside the trees: its indices in 32 bits and its values
  /// (TakenEntries), each array released by the last tree once it has read it; with a mode
  /// larger than 2^32, x itself, released once the trees are built. The trees give the
  /// entries back where needed (mode_gram, with_entries). Where the arguments or the memory
  /// check throw, x is unchanged.
  SparseOperand(Compute<T>& c, SparseTensor<T>&& x, CsfLayout layout = CsfLayout::all,
                index_t max_narrow = kNarrowLimit);

  const std::vector<index_t>& dims() const override { return dims_; }
  double norm_squared() override;
  void mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) override;
  void factor_changed(int m) override { fresh_[static_cast<std::size_t>(m)] = false; }
  /// X_(n) X_(n)^T from the entries grouped by their indices in the other modes.
  void mode_gram(int n, T* out) override;
  double workspace_elements(index_t rank, bool mode_grams) const override;

  CsfLayout layout() const { return layout_; }
  /// f(the tensor's entries): x, or the entries rebuilt from the first tree once released.
  template <class F>
  void with_entries(F&& f) const {
    if (x_ != nullptr) {
      f(*x_);
    } else {
      f(csf_entries(*trees_[0], dims_));
    }
  }
  /// The trees, rooted at csf_roots(dims(), layout()).
  const std::vector<std::unique_ptr<Csf<T>>>& trees() const { return trees_; }
  /// Row-major copies of the factors at `rank` (refreshed where they changed).
  std::vector<const T*> factor_rows(std::span<const T* const> factors, index_t rank, int skip);

 private:
  /// The members read from x (kept: the tensor to read again, or null); no trees yet.
  SparseOperand(Compute<T>& c, const SparseTensor<T>& x, const SparseTensor<T>* kept,
                CsfLayout layout);
  // csf_roots of the layout; throws for a backend without host memory.
  std::vector<int> checked_roots(const Compute<T>& c) const;
  // The layout named for a memory refusal.
  std::string trees_what(std::span<const int> roots) const;
  // tree_ and level_ of every mode from the trees (rooted at `roots`); rows_ sized.
  void place_modes(std::span<const int> roots);

  const SparseTensor<T>* x_;  // the entries, or nullptr once released
  std::vector<index_t> dims_;
  index_t nnz_;
  double norm_squared_;
  CsfLayout layout_;
  std::vector<std::unique_ptr<Csf<T>>> trees_;
  std::vector<int> tree_, level_;     // mode n's MTTKRP: level level_[n] of trees_[tree_[n]]
  std::vector<HostArray<T>> rows_;    // rows_[m]: U_m row-major (I_m x R)
  std::vector<HostArray<T>> copies_;  // csf_mttkrp_level's per-thread outputs, kept
  std::vector<bool> fresh_;
  index_t rows_rank_ = 0;
};

/// out (I_n x I_n) = X_(n) X_(n)^T, from the entries grouped by their indices in the
/// other modes (the columns of X_(n)).
template <class T>
void sparse_mode_gram(const SparseTensor<T>& x, int n, T* out);

}  // namespace tenfold::detail
