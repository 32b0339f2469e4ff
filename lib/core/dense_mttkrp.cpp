#include "core/dense_mttkrp.hpp"

#include <algorithm>

#include "core/instantiate.hpp"
#include "core/multilinear.hpp"

namespace tenfold::detail {

template <class T>
DeviceTensor<T>::DeviceTensor(Compute<T>& c, TensorView<const T> x) : c_(c), dims_(x.dims()) {
  if (c.host_memory()) {
    x_ = x.data();
  } else {
    copy_ = Buffer<T>(c, static_cast<std::size_t>(x.numel()));
    c.upload(copy_.get(), x.data(), static_cast<std::size_t>(x.numel()));
    x_ = copy_.get();
  }
}

template <class T>
DeviceTensor<T>::DeviceTensor(Compute<T>& c, const T* backend_data, std::vector<index_t> dims)
    : c_(c), dims_(std::move(dims)), x_(backend_data) {}

template <class T>
double DeviceTensor<T>::norm_squared() {
  if (norm_squared_ < 0.0) {
    std::size_t numel = 1;
    for (const index_t d : dims_) numel *= static_cast<std::size_t>(d);
    norm_squared_ = c_.sum_squares(numel, x_);
  }
  return norm_squared_;
}

template <class T>
DenseMttkrp<T>::DenseMttkrp(Compute<T>& c, TensorView<const T> x) : c_(c), x_(c, x) {
  choose_blocks();
}

template <class T>
DenseMttkrp<T>::DenseMttkrp(Compute<T>& c, const T* backend_data, std::vector<index_t> dims)
    : c_(c), x_(c, backend_data, std::move(dims)) {
  choose_blocks();
}

template <class T>
void DenseMttkrp<T>::choose_blocks() {
  const int order = this->order();
  changed_at_.assign(static_cast<std::size_t>(order), 0);
  if (order <= 3) {
    // Order 2: each mode from the other factor; order 3: see mttkrp_three.
    lead_end_ = trail_begin_ = 1;
  } else {
    // Split into two blocks of at least two modes, as balanced in size as possible.
    int best = 2;
    for (int h = 2; h <= order - 2; ++h) {
      if (std::max(prod(0, h), prod(h, order)) < std::max(prod(0, best), prod(best, order)))
        best = h;
    }
    lead_end_ = trail_begin_ = best;
  }
}

template <class T>
index_t DenseMttkrp<T>::prod(int lo, int hi) const {
  index_t p = 1;
  for (int m = lo; m < hi; ++m) p *= dims()[static_cast<std::size_t>(m)];
  return p;
}

template <class T>
bool DenseMttkrp<T>::slab_products(index_t rank) const {
  if (order() != 3) return false;
  const index_t i0 = dims()[0], i1 = dims()[1];
  return i0 >= 32 && i0 * i1 * rank >= 65536;
}

template <class T>
void DenseMttkrp<T>::factor_changed(int m) {
  changed_at_[static_cast<std::size_t>(m)] = ++changes_;
  changed_since_pass_ = true;
  if (cached_mode_ == m) cached_mode_ = -1;
  if ((cached_ == Cached::leading && m >= lead_end_) ||
      (cached_ == Cached::trailing && m < trail_begin_)) {
    cached_ = Cached::none;
  }
}

template <class T>
const T* khatri_rao_range(Compute<T>& c, const std::vector<index_t>& dims,
                          std::span<const T* const> factors, int lo, int hi, index_t rank,
                          Buffer<T>& kr, Buffer<T>& tmp) {
  if (hi - lo == 1) return factors[static_cast<std::size_t>(lo)];
  index_t rows_all = 1;
  for (int m = lo; m < hi; ++m) rows_all *= dims[static_cast<std::size_t>(m)];
  const auto total = static_cast<std::size_t>(rows_all * rank);
  T* bufs[2] = {ensure(c, kr, total), ensure(c, tmp, total)};
  // Built from the last mode down so that mode lo ends fastest, landing in kr.
  int target = (hi - lo - 1) % 2 == 1 ? 0 : 1;
  const T* acc = factors[static_cast<std::size_t>(hi - 1)];
  index_t acc_rows = dims[static_cast<std::size_t>(hi - 1)];
  for (int m = hi - 2; m >= lo; --m) {
    const index_t rows = dims[static_cast<std::size_t>(m)];
    c.khatri_rao(rows, acc_rows, rank, factors[static_cast<std::size_t>(m)], acc, bufs[target]);
    acc = bufs[target];
    acc_rows *= rows;
    target ^= 1;
  }
  return acc;
}

namespace {

// out(:, r) = the MTTKRP of the middle index of a partial tensor y (jl x jn x jr, then
// R; column-major) against the Khatri-Rao products left() (jl x R) and right() (jr x R),
// each called for only where that side holds modes (`has_left`, `has_right`; a side of
// size one still scales by its factor's single row). v: scratch for the middle step.
template <class T, class Left, class Right>
void finish_sides(Compute<T>& c, Buffer<T>& v_buf, const T* y, index_t jl, index_t jn, index_t jr,
                  bool has_left, bool has_right, Left left, Right right, index_t rank, T* out) {
  const index_t jall = jl * jn * jr;
  const T* v = y;
  if (has_right) {
    // V(:, r) = Y_r (Jl*Jn x Jr) * KR_right(:, r), one matrix-vector product per column.
    const T* kr = right();
    T* dst = has_left ? ensure(c, v_buf, static_cast<std::size_t>(jl * jn * rank)) : out;
    c.gemm_strided_batched(Op::none, Op::none, jl * jn, 1, jr, T(1), y, jl * jn, jall, kr, jr, jr,
                           T(0), dst, jl * jn, jl * jn, rank);
    v = dst;
  }
  if (has_left) {
    // out(:, r) = V_r (Jl x Jn)^T * KR_left(:, r).
    const T* kr = left();
    c.gemm_strided_batched(Op::trans, Op::none, jn, 1, jl, T(1), v, jl, jl * jn, kr, jl, jl, T(0),
                           out, jn, jn, rank);
  }
}

}  // namespace

template <class T>
void DenseMttkrp<T>::finish(const T* y, int lo, int hi, int n, std::span<const T* const> factors,
                            index_t rank, T* out) {
  // Blocks hold at least two modes, so n has a neighbour on the left or the right.
  finish_sides(
      c_, v_, y, prod(lo, n), dims()[static_cast<std::size_t>(n)], prod(n + 1, hi), lo < n,
      n + 1 < hi, [&] { return khatri_rao_range(c_, dims(), factors, lo, n, rank, kr_, kr_tmp_); },
      [&] { return khatri_rao_range(c_, dims(), factors, n + 1, hi, rank, kr_, kr_tmp_); }, rank,
      out);
}

template <class T>
int DenseMttkrp<T>::mode_to_contract(int n, index_t rank) const {
  // The other mode changed last (it stays fixed through the next two updates of a
  // cycle); the middle one only where its slab products are worth their calls. Before
  // any change, the far end from n (a sweep from mode 0 or from mode 2 goes on to 1).
  const int first = n == 2 ? 0 : 2;
  int best = -1;
  for (const int m : {first, 3 - n - first}) {
    if (m == 1 && !slab_products(rank)) continue;
    if (best < 0 ||
        changed_at_[static_cast<std::size_t>(m)] > changed_at_[static_cast<std::size_t>(best)])
      best = m;
  }
  return best;
}

template <class T>
void DenseMttkrp<T>::contract_mode(int m, const T* u, index_t rank) {
  Compute<T>& c = c_;
  const index_t i0 = dims()[0], i1 = dims()[1], i2 = dims()[2];
  const index_t rows = (m == 0 ? i1 : i0) * (m == 2 ? i1 : i2);
  T* y = ensure(c, y_, static_cast<std::size_t>(rows * rank));
  if (m == 0) {
    // Y(i1 + I1 i2, r) = sum_i0 X(i0, i1, i2) U_0(i0, r): X_(0)^T U_0.
    c.gemm(Op::trans, Op::none, rows, rank, i0, T(1), x_.data(), i0, u, i0, T(0), y, rows);
  } else if (m == 1) {
    // Slab by slab, Y(:, i2, r) = X(:, :, i2) U_1 (every product tall and thin, the
    // tensor read in memory order).
    c.gemm_strided_batched(Op::none, Op::none, i0, rank, i1, T(1), x_.data(), i0, i0 * i1, u, i1, 0,
                           T(0), y, rows, i0, i2);
  } else {
    // Y = X_(01 x 2) U_2.
    c.gemm(Op::none, Op::none, rows, rank, i2, T(1), x_.data(), rows, u, i2, T(0), y, rows);
  }
  cached_mode_ = m;
  ++passes_;
  changed_since_pass_ = false;
}

template <class T>
void DenseMttkrp<T>::mttkrp_three(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = c_;
  const index_t i0 = dims()[0], i1 = dims()[1], i2 = dims()[2];
  if (cached_mode_ < 0 || cached_mode_ == n) {
    const int m = mode_to_contract(n, rank);
    if (n == 2 && m == 1) {
      // Where the backend can, out(i2, r) = (X(:, :, i2) U_1)(:, r) . U_0(:, r) is summed
      // as each slab's product is formed (no matrix-vector pass over Y_1 after it). Y_1
      // is written for mode 0's finish, unless every mode is asked at one point (a
      // gradient: the last one needs no partial tensor to keep).
      const bool gradient = !changed_since_pass_ && cached_mode_ >= 0;
      T* y = gradient ? nullptr : ensure(c, y_, static_cast<std::size_t>(i0 * i2 * rank));
      if (c.gemm_column_dots(i0, rank, i1, T(1), x_.data(), i0, i0 * i1, factors[1], i1, factors[0],
                             i0, out, i2, i2, y, i0 * i2, i0)) {
        ++passes_;
        if (!gradient) {
          cached_mode_ = 1;
          changed_since_pass_ = false;
        }
        return;
      }
    }
    contract_mode(m, factors[static_cast<std::size_t>(m)], rank);
  }
  // Finish from Y_m (I_a x I_b x R): mode a against U_b, mode b against U_a.
  const int a = cached_mode_ == 0 ? 1 : 0, b = cached_mode_ == 2 ? 1 : 2;
  const index_t ia = dims()[static_cast<std::size_t>(a)], ib = dims()[static_cast<std::size_t>(b)];
  const T* ua = factors[static_cast<std::size_t>(a)];
  const T* ub = factors[static_cast<std::size_t>(b)];
  if (n == a) {
    finish_sides(
        c, v_, y_.get(), 1, ia, ib, false, true, [] { return static_cast<const T*>(nullptr); },
        [&] { return ub; }, rank, out);
  } else {
    finish_sides(
        c, v_, y_.get(), ia, ib, 1, true, false, [&] { return ua; },
        [] { return static_cast<const T*>(nullptr); }, rank, out);
  }
}

template <class T>
void DenseMttkrp<T>::mttkrp(int n, std::span<const T* const> factors, index_t rank, T* out) {
  Compute<T>& c = c_;
  const int order = this->order();
  if (rank != cached_rank_) {
    cached_ = Cached::none;
    cached_mode_ = -1;
  }
  cached_rank_ = rank;
  if (order == 3) {
    mttkrp_three(n, factors, rank, out);
    return;
  }
  if (n < lead_end_) {
    // Leading block: Y = X_(lead x trail) * KR(U_{N-1}, ..., U_{lead_end}).
    const index_t il = prod(0, lead_end_), ir = prod(lead_end_, order);
    const bool single = lead_end_ == 1;
    if (single || cached_ != Cached::leading) {
      const T* kr = khatri_rao_range(c, dims(), factors, lead_end_, order, rank, kr_, kr_tmp_);
      T* y = single ? out : ensure(c, y_, static_cast<std::size_t>(il * rank));
      c.gemm(Op::none, Op::none, il, rank, ir, T(1), x_.data(), il, kr, ir, T(0), y, il);
      ++passes_;
      if (single) return;
      cached_ = Cached::leading;
    }
    finish(y_.get(), 0, lead_end_, n, factors, rank, out);
  } else {
    // Trailing block: Y = X_(lead x trail)^T * KR(U_{trail_begin-1}, ..., U_0).
    const index_t il = prod(0, trail_begin_), ir = prod(trail_begin_, order);
    const bool single = trail_begin_ == order - 1;
    if (single || cached_ != Cached::trailing) {
      const T* kr = khatri_rao_range(c, dims(), factors, 0, trail_begin_, rank, kr_, kr_tmp_);
      T* y = single ? out : ensure(c, y_, static_cast<std::size_t>(ir * rank));
      c.gemm(Op::trans, Op::none, ir, rank, il, T(1), x_.data(), il, kr, il, T(0), y, ir);
      ++passes_;
      if (single) return;
      cached_ = Cached::trailing;
    }
    finish(y_.get(), trail_begin_, order, n, factors, rank, out);
  }
}

template <class T>
double DenseMttkrp<T>::workspace_elements(index_t rank) const {
  const int order = this->order();
  const auto size = [this](int lo, int hi) { return static_cast<double>(prod(lo, hi)); };
  if (order == 3) {
    // y_: the tensor contracted with one factor (the middle one only with slab products).
    return static_cast<double>(rank) *
           std::max({size(0, 2), size(1, 3), slab_products(rank) ? size(0, 1) * size(2, 3) : 0.0});
  }
  // A block of three or more modes finishes through a partial product and Khatri-Rao
  // products of its sub-ranges, each smaller than the block.
  const auto finish = [&](int lo, int hi) { return hi - lo > 2 ? size(lo, hi) : 0.0; };
  // y_: X contracted with the other block; kr_, kr_tmp_: the Khatri-Rao products of
  // the contracted block (or of sub-ranges); v_: the partial result within a block.
  const double y = std::max(lead_end_ > 1 ? size(0, lead_end_) : 0.0,
                            trail_begin_ < order - 1 ? size(trail_begin_, order) : 0.0);
  const double kr = std::max({order - lead_end_ > 1 ? size(lead_end_, order) : 0.0,
                              trail_begin_ > 1 ? size(0, trail_begin_) : 0.0, finish(0, lead_end_),
                              finish(trail_begin_, order)});
  const double v = std::max(finish(0, lead_end_), finish(trail_begin_, order));
  return static_cast<double>(rank) * (y + 2.0 * kr + v);
}

template <class T>
void DenseMttkrp<T>::mode_gram(int n, T* out) {
  detail::mode_gram(c_, x_.data(), dims(), n, out);
}

#define TENFOLD_INSTANTIATE_DENSE_MTTKRP(T)                                                       \
  template const T* khatri_rao_range<T>(Compute<T>&, const std::vector<index_t>&,                 \
                                        std::span<const T* const>, int, int, index_t, Buffer<T>&, \
                                        Buffer<T>&);                                              \
  template class DeviceTensor<T>;                                                                 \
  template class DenseMttkrp<T>;
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_DENSE_MTTKRP)
TENFOLD_INSTANTIATE_FOR_EACH_COMPLEX_TYPE(TENFOLD_INSTANTIATE_DENSE_MTTKRP)

}  // namespace tenfold::detail
