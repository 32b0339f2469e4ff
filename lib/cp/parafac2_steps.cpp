#include "cp/parafac2_steps.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/host_lapack.hpp"
#include "core/instantiate.hpp"
#include "core/multilinear.hpp"
#include "core/thread_pool.hpp"
#include "tenfold/error.hpp"

namespace tenfold::detail {
namespace {

template <class T>
std::vector<double> as_double(const T* x, index_t n) {
  return std::vector<double>(x, x + n);
}

// M^T M for a column-major rows x cols matrix M, in double
std::vector<double> gram(const std::vector<double>& m, index_t rows, index_t cols) {
  std::vector<double> g(static_cast<std::size_t>(cols * cols));
  for (index_t p = 0; p < cols; ++p)
    for (index_t q = 0; q < cols; ++q) {
      double s = 0.0;
      for (index_t i = 0; i < rows; ++i)
        s += m[static_cast<std::size_t>(i + rows * p)] * m[static_cast<std::size_t>(i + rows * q)];
      g[static_cast<std::size_t>(p + cols * q)] = s;
    }
  return g;
}

}  // namespace

template <class T>
Parafac2Slices<T>::Parafac2Slices(Compute<T>& c, std::span<const TensorView<const T>> slices,
                                  std::span<const TensorView<const std::uint8_t>> observed,
                                  Layout layout)
    : c_(c), masked_(!observed.empty()) {
  const bool row_major = layout == Layout::row_major;
  cols_ = slices[0].dim(row_major ? 0 : 1);
  offsets_.push_back(0);
  for (const auto& s : slices) offsets_.push_back(offsets_.back() + s.dim(row_major ? 1 : 0));
  const index_t n = rows();
  const auto size = static_cast<std::size_t>(n * cols_);
  std::vector<T> x(size), w(masked_ ? size : 0);
  double observed_sum = 0.0;
  index_t observed_count = 0;
  std::vector<double> means(slices.size(), 0.0);
  for (std::size_t k = 0; k < slices.size(); ++k) {
    const index_t ik = rows(static_cast<index_t>(k)), off = offset(static_cast<index_t>(k));
    double sum = 0.0;
    index_t count = 0;
    for (index_t j = 0; j < cols_; ++j) {
      for (index_t i = 0; i < ik; ++i) {
        // entry (i, j) of slice k: column-major I_k x J, or the C-order array's J x I_k view
        const index_t at = row_major ? j + cols_ * i : i + ik * j;
        const auto to = static_cast<std::size_t>(off + i + n * j);
        const bool seen = !masked_ || observed[k][at] != 0;
        if (!seen) continue;
        const T v = slices[k][at];
        if (!std::isfinite(v)) {
          throw InvalidArgument("slice " + std::to_string(k) + " has a non-finite entry at (" +
                                std::to_string(i) + ", " + std::to_string(j) + ")" +
                                (masked_ ? " that its mask marks observed"
                                         : " (pass a mask of observed entries to treat it as "
                                           "missing)"));
        }
        x[to] = v;
        if (masked_) w[to] = T(1);
        sum += static_cast<double>(v);
        norm2_ += static_cast<double>(v) * static_cast<double>(v);
        ++count;
      }
    }
    // (NaN: no observed entry; the slice takes the mean of all slices below)
    means[k] = count > 0 ? sum / static_cast<double>(count) : std::nan("");
    observed_sum += sum;
    observed_count += count;
  }
  if (observed_count == 0) {
    throw InvalidArgument("the masks mark no entry of the slices as observed");
  }
  x_ = Buffer<T>(c, size);
  if (masked_) {
    observed_x_ = Buffer<T>(c, size);
    weight_ = Buffer<T>(c, size);
    c.upload(observed_x_.get(), x.data(), size);
    c.upload(weight_.get(), w.data(), size);
    // Missing entries start at their slice's observed mean (all slices' for one with none).
    const double all = observed_sum / static_cast<double>(observed_count);
    for (std::size_t k = 0; k < slices.size(); ++k) {
      const T mean = static_cast<T>(std::isnan(means[k]) ? all : means[k]);
      const index_t ik = rows(static_cast<index_t>(k)), off = offset(static_cast<index_t>(k));
      for (index_t j = 0; j < cols_; ++j) {
        for (index_t i = 0; i < ik; ++i) {
          const auto to = static_cast<std::size_t>(off + i + n * j);
          if (w[to] == T(0)) x[to] = mean;
        }
      }
    }
  }
  c.upload(x_.get(), x.data(), size);
}

template <class T>
double Parafac2Slices<T>::masked_error2(T* model, bool impute) {
  const auto size = static_cast<std::size_t>(rows() * cols_);
  Buffer<T> s(c_, size);
  // S = W M - W X, ||S||^2; the filled slices M - S = W X + (1 - W) M
  c_.copy(s.get(), model, size);
  c_.hadamard(size, weight_.get(), s.get());
  c_.axpy(size, T(-1), observed_x_.get(), s.get());
  const double e2 = c_.sum_squares(size, s.get());
  if (impute) {
    c_.axpy(size, T(-1), s.get(), model);
    c_.copy(x_.get(), model, size);
  }
  return e2;
}

template <class T>
Parafac2Steps<T>::Parafac2Steps(Compute<T>& c, Parafac2Slices<T>& x, index_t rank)
    : c_(c), x_(x), r_(rank) {
  const auto r = static_cast<std::size_t>(rank);
  at_ = Buffer<T>(c, r * static_cast<std::size_t>(x.count()));
  b_ = Buffer<T>(c, r * r);
  cf_ = Buffer<T>(c, static_cast<std::size_t>(x.cols()) * r);
  xc_ = Buffer<T>(c, static_cast<std::size_t>(x.rows()) * r);
  zz_ = Buffer<T>(c, r * r * static_cast<std::size_t>(x.count()));
  if (x.masked()) {
    model_ = Buffer<T>(c, static_cast<std::size_t>(x.rows() * x.cols()));
    return;
  }
  // R_k of the thin QR X_k = Q_k R_k (min(I_k, J) x J), once: the slices do not change
  // without masks
  const index_t j = x.cols();
  // (R_k at min(I_k, J) J times k's share: at most the size of the slices)
  cross_at_.push_back(0);
  for (index_t k = 0; k < x.count(); ++k)
    cross_at_.push_back(cross_at_.back() + std::min(x.rows(k), j) * j);
  cross_.assign(static_cast<std::size_t>(cross_at_.back()), 0.0);
  parallel_for(x.count(), [&](index_t k) {
    std::vector<double> xk = slice(k);
    const std::vector<double> r = thin_qr(x.rows(k), j, xk);
    if (r.empty()) throw NumericalError("the QR of slice " + std::to_string(k) + " failed");
    std::copy(r.begin(), r.end(), cross_.begin() + cross_at_[static_cast<std::size_t>(k)]);
  });
}

template <class T>
Parafac2Projection<T> Parafac2Steps<T>::make_projection() {
  Parafac2Projection<T> p;
  p.p = Buffer<T>(c_, static_cast<std::size_t>(x_.rows() * r_));
  p.host.resize(p.p.size());
  p.y = Buffer<T>(c_, static_cast<std::size_t>(r_ * x_.cols() * x_.count()));
  p.formed.assign(static_cast<std::size_t>(x_.count()), 1);
  return p;
}

template <class T>
std::vector<double> Parafac2Steps<T>::slice(index_t k) {
  const index_t ik = x_.rows(k), j = x_.cols();
  std::vector<T> h(static_cast<std::size_t>(ik));
  std::vector<double> out(static_cast<std::size_t>(ik * j));
  for (index_t c = 0; c < j; ++c) {
    c_.download(h.data(), x_.data() + x_.offset(k) + x_.rows() * c, h.size());
    std::copy(h.begin(), h.end(), out.begin() + ik * c);
  }
  return out;
}

template <class T>
void Parafac2Steps<T>::upload_factors(const Parafac2Factors<T>& f) {
  const index_t k = x_.count();
  host_.resize(static_cast<std::size_t>(r_ * k));
  for (index_t i = 0; i < k; ++i)
    for (index_t j = 0; j < r_; ++j) host_[static_cast<std::size_t>(j + r_ * i)] = f.a()(i, j);
  c_.upload(at_.get(), host_.data(), host_.size());
  c_.upload(b_.get(), f.b().data(), static_cast<std::size_t>(f.b().size()));
  c_.upload(cf_.get(), f.c().data(), static_cast<std::size_t>(f.c().size()));
}

template <class T>
void Parafac2Steps<T>::project(const Parafac2Factors<T>& f, Parafac2Projection<T>& out) {
  const index_t n = x_.rows(), j = x_.cols(), r = r_;
  if (!x_.masked()) {
    const Matrix<T>& a = f.a();
    const Matrix<T>& b = f.b();
    const Matrix<T>& cm = f.c();
    const index_t kk = x_.count(), jr = j * r;
    out.q.resize(static_cast<std::size_t>(jr * kk));
    std::vector<T> y(static_cast<std::size_t>(r * j * kk));
    parallel_for(kk, [&](index_t k) {
      const index_t mk = std::min(x_.rows(k), j);
      const double* rk = cross_.data() + cross_at_[static_cast<std::size_t>(k)];  // mk x J
      // W = C diag(a_k) B^T (J x R), M = R_k W (mk x R)
      std::vector<double> w(static_cast<std::size_t>(jr), 0.0);
      for (index_t q = 0; q < r; ++q)
        for (index_t l = 0; l < r; ++l) {
          const double v = static_cast<double>(a(k, l)) * static_cast<double>(b(q, l));
          for (index_t i = 0; i < j; ++i)
            w[static_cast<std::size_t>(i + j * q)] += static_cast<double>(cm(i, l)) * v;
        }
      std::vector<double> m(static_cast<std::size_t>(mk * r), 0.0);
      for (index_t q = 0; q < r; ++q)
        for (index_t l = 0; l < j; ++l) {
          const double v = w[static_cast<std::size_t>(l + j * q)];
          for (index_t i = 0; i < mk; ++i)
            m[static_cast<std::size_t>(i + mk * q)] += rk[i + mk * l] * v;
        }
      // Z_k = Q_k M: P_k = Q_k polar(M), Y_k = P_k^T X_k = polar(M)^T R_k
      const std::vector<double> pm = polar_factor(mk, r, std::move(m));
      if (pm.empty()) {
        throw NumericalError("the SVD of slice " + std::to_string(k) +
                             "'s projection problem did not converge (non-finite factors?)");
      }
      std::copy(pm.begin(), pm.end(), out.q.begin() + jr * k);
      for (index_t i = 0; i < j; ++i)
        for (index_t q = 0; q < r; ++q) {
          double v = 0.0;
          for (index_t l = 0; l < mk; ++l)
            v += pm[static_cast<std::size_t>(l + mk * q)] * rk[l + mk * i];
          y[static_cast<std::size_t>(q + r * (i + j * k))] = static_cast<T>(v);
        }
    });
    out.formed.assign(static_cast<std::size_t>(kk), 0);
    c_.upload(out.y.get(), y.data(), y.size());
    return;
  }
  upload_factors(f);
  // X C for all slices in one product; then per slice, on the host in double,
  // Z_k = (X_k C) diag(a_k) B^T and its polar factor, one slice per task
  c_.gemm(Op::none, Op::none, n, r, j, T(1), x_.data(), n, cf_.get(), j, T(0), xc_.get(), n);
  std::vector<T> xc(static_cast<std::size_t>(n * r));
  c_.download(xc.data(), xc_.get(), xc.size());
  const Matrix<T>& a = f.a();
  const Matrix<T>& b = f.b();
  parallel_for(x_.count(), [&](index_t k) {
    const index_t ik = x_.rows(k), off = x_.offset(k);
    // M = diag(a_k) B^T, Z_k = (X_k C) M
    std::vector<double> m(static_cast<std::size_t>(r * r)), zk(static_cast<std::size_t>(ik * r));
    for (index_t q = 0; q < r; ++q)
      for (index_t l = 0; l < r; ++l)
        m[static_cast<std::size_t>(l + r * q)] =
            static_cast<double>(a(k, l)) * static_cast<double>(b(q, l));
    for (index_t q = 0; q < r; ++q)
      for (index_t l = 0; l < r; ++l) {
        const double v = m[static_cast<std::size_t>(l + r * q)];
        const T* col = xc.data() + off + n * l;
        double* zq = zk.data() + ik * q;
        for (index_t i = 0; i < ik; ++i) zq[i] += static_cast<double>(col[i]) * v;
      }
    const std::vector<double> p = polar_factor(ik, r, std::move(zk));
    if (p.empty()) {
      throw NumericalError("the SVD of slice " + std::to_string(k) +
                           "'s projection problem did not converge (non-finite factors?)");
    }
    for (index_t c = 0; c < r; ++c)
      for (index_t i = 0; i < ik; ++i)
        out.host[static_cast<std::size_t>(off + i + n * c)] =
            static_cast<T>(p[static_cast<std::size_t>(i + ik * c)]);
  });
  c_.upload(out.p.get(), out.host.data(), out.host.size());
  project_slices(out);
}

template <class T>
void Parafac2Steps<T>::materialise(Parafac2Projection<T>& out) {
  const index_t n = x_.rows(), j = x_.cols(), r = r_;
  const bool any = std::find(out.formed.begin(), out.formed.end(), 0) != out.formed.end();
  parallel_for(x_.count(), [&](index_t k) {
    if (out.formed[static_cast<std::size_t>(k)]) return;
    // P_k = Q_k polar(M) with Q_k of the thin QR of X_k again
    const index_t ik = x_.rows(k), mk = std::min(ik, j);
    std::vector<double> qk = slice(k);
    if (thin_qr(ik, j, qk).empty())
      throw NumericalError("the QR of slice " + std::to_string(k) + " failed");
    const double* pm = out.q.data() + j * r * k;
    for (index_t q = 0; q < r; ++q)
      for (index_t i = 0; i < ik; ++i) {
        double v = 0.0;
        for (index_t l = 0; l < mk; ++l)
          v += qk[static_cast<std::size_t>(i + ik * l)] * pm[l + mk * q];
        out.host[static_cast<std::size_t>(x_.offset(k) + i + n * q)] = static_cast<T>(v);
      }
    out.formed[static_cast<std::size_t>(k)] = 1;
  });
  if (any) c_.upload(out.p.get(), out.host.data(), out.host.size());
}

template <class T>
void Parafac2Steps<T>::project_slices(Parafac2Projection<T>& out) {
  const index_t n = x_.rows(), j = x_.cols(), r = r_;
  // Y_k = P_k^T X_k (R x J)
  for (index_t k = 0; k < x_.count(); ++k) {
    c_.gemm(Op::trans, Op::none, r, j, x_.rows(k), T(1), out.p.get() + x_.offset(k), n,
            x_.data() + x_.offset(k), n, T(0), out.y.get() + k * r * j, r);
  }
}

template <class T>
double Parafac2Steps<T>::error2(const Parafac2Factors<T>& f, const Parafac2Projection<T>& pr,
                                bool impute) {
  const index_t n = x_.rows(), j = x_.cols(), r = r_, kk = x_.count();
  upload_factors(f);
  if (x_.masked()) {
    // M = (P B) with the rows of slice k scaled by a_k, times C^T
    c_.gemm(Op::none, Op::none, n, r, r, T(1), pr.p.get(), n, b_.get(), r, T(0), xc_.get(), n);
    for (index_t k = 0; k < kk; ++k)
      c_.scale_columns(x_.rows(k), r, xc_.get() + x_.offset(k), n, at_.get() + k * r);
    c_.gemm(Op::none, Op::trans, n, j, r, T(1), xc_.get(), n, cf_.get(), j, T(0), model_.get(), n);
    return x_.masked_error2(model_.get(), impute);
  }
  // <X, M> = sum_k sum_r a_kr (B^T Y_k C)_rr, with Y_k C for all k by one mode product
  const std::array<index_t, 3> dims = {r, j, kk};
  ttm(c_, pr.y.get(), std::span<const index_t>(dims), 1, Op::trans, cf_.get(), j, r, zz_.get());
  std::vector<T> yc(static_cast<std::size_t>(r * r * kk));
  c_.download(yc.data(), zz_.get(), yc.size());
  const Matrix<T>& a = f.a();
  const Matrix<T>& b = f.b();
  const Matrix<T>& cm = f.c();
  double inner = 0.0;
  for (index_t k = 0; k < kk; ++k)
    for (index_t q = 0; q < r; ++q) {
      double s = 0.0;
      for (index_t i = 0; i < r; ++i)
        s += static_cast<double>(b(i, q)) *
             static_cast<double>(yc[static_cast<std::size_t>(i + r * (q + r * k))]);
      inner += static_cast<double>(a(k, q)) * s;
    }
  // ||M||^2 = sum_k a_k^T ((B^T G_k B) * C^T C) a_k, G_k = P_k^T P_k (I where I_k >= R)
  const std::vector<double> btb = gram(as_double(b.data(), b.size()), r, r);
  const std::vector<double> ctc = gram(as_double(cm.data(), cm.size()), j, r);
  double model2 = 0.0;
  for (index_t k = 0; k < kk; ++k) {
    std::vector<double> h = btb;
    const index_t ik = x_.rows(k);
    if (ik < r) {
      // P_k B (I_k x R; complete data: Pm_k B, the same Gram), whose Gram is B^T G_k B
      std::vector<double> pb(static_cast<std::size_t>(ik * r), 0.0);
      const bool formed = pr.formed[static_cast<std::size_t>(k)] != 0;
      for (index_t q = 0; q < r; ++q)
        for (index_t l = 0; l < r; ++l)
          for (index_t i = 0; i < ik; ++i)
            pb[static_cast<std::size_t>(i + ik * q)] +=
                (formed ? static_cast<double>(
                              pr.host[static_cast<std::size_t>(x_.offset(k) + i + n * l)])
                        : pr.q[static_cast<std::size_t>(j * r * k + i + ik * l)]) *
                static_cast<double>(b(l, q));
      h = gram(pb, ik, r);
    }
    for (index_t p = 0; p < r; ++p)
      for (index_t q = 0; q < r; ++q)
        model2 += static_cast<double>(a(k, p)) * h[static_cast<std::size_t>(p + r * q)] *
                  ctc[static_cast<std::size_t>(p + r * q)] * static_cast<double>(a(k, q));
  }
  return x_.norm2() - 2.0 * inner + model2;
}

template <class T>
Matrix<T> Parafac2Steps<T>::leading_column_space(index_t r) {
  const index_t j = x_.cols();
  Buffer<T> g(c_, static_cast<std::size_t>(j * j));
  std::vector<real_t<T>> w(static_cast<std::size_t>(j));
  // X^T X = sum_k X_k^T X_k, eigenvectors ascending
  c_.syrk(Op::trans, j, x_.rows(), T(1), x_.data(), x_.rows(), T(0), g.get(), j);
  c_.syevd(j, g.get(), j, w.data());
  Matrix<T> out(j, r);
  for (index_t q = 0; q < r; ++q)
    c_.download(out.col(q), g.get() + (j - 1 - q) * j, static_cast<std::size_t>(j));
  return out;
}

#define TENFOLD_INSTANTIATE_PARAFAC2_STEPS(T) \
  template class Parafac2Slices<T>;           \
  template class Parafac2Steps<T>;
TENFOLD_INSTANTIATE_FOR_EACH_VALUE_TYPE(TENFOLD_INSTANTIATE_PARAFAC2_STEPS)

}  // namespace tenfold::detail
