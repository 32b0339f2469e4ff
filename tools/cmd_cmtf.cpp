// tenfold cmtf: coupled matrix-tensor factorisation of a 3-way .npy tensor and a .npy
// matrix sharing their first axis.
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/cmtf.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {
namespace {

struct CmtfArgs {
  std::string tensor;
  std::string matrix;
  std::string out;
  index_t rank = 0;
  int max_iters = 100;
  double tol = 1e-6;
  std::string init = "svd";
  std::uint64_t seed = 0;
  std::string missing;
  CommonOptions common;
};

// 1 where x is not NaN (--missing nan), counted into `observed`.
template <class T>
std::vector<std::uint8_t> not_nan(const Tensor<T>& x, index_t& observed) {
  std::vector<std::uint8_t> w(static_cast<std::size_t>(x.numel()));
  for (index_t i = 0; i < x.numel(); ++i) {
    w[static_cast<std::size_t>(i)] = std::isnan(x[i]) ? 0 : 1;
    observed += w[static_cast<std::size_t>(i)];
  }
  return w;
}

template <class T>
int run_cmtf(const CmtfArgs& a, const io::NpyHeader& hx) {
  const io::NpyHeader hy = read_input_header(a.matrix);
  if (hx.shape.size() != 3) {
    throw InvalidArgument("the tensor '" + a.tensor + "' must be 3-D, got shape " +
                          shape_text(hx.shape));
  }
  if (hy.shape.size() != 2) {
    throw InvalidArgument("the matrix '" + a.matrix + "' must be 2-D, got shape " +
                          shape_text(hy.shape));
  }
  if (hy.shape[0] != hx.shape[0]) {
    throw DimensionMismatch("the matrix " + shape_text(hy.shape) + " and the tensor " +
                            shape_text(hx.shape) + " must share their first axis");
  }
  check_outputs({{"--out", a.out, true}}, {a.tensor, a.matrix});
  const bool missing = a.missing == "nan";
  const NanPolicy nan{missing, "pass --missing nan to treat NaN entries as missing"};
  Tensor<T> x = load_input<T>(a.tensor, hx, nan), y = load_input<T>(a.matrix, hy, nan);
  // One layout for both: a Fortran-order file is made C-order (its reversed view) if the
  // other is C-order.
  const auto as_c_order = [](Tensor<T>& t, const io::NpyHeader& h) {
    if (!h.fortran_order) return;
    std::vector<index_t> dims(t.dims().rbegin(), t.dims().rend());
    Tensor<T> r(dims);
    const int n = t.order();
    std::vector<index_t> idx(static_cast<std::size_t>(n), 0);
    for (index_t i = 0; i < t.numel(); ++i) {
      index_t off = 0, stride = 1;  // offset of the reversed index in r
      for (int m = n - 1; m >= 0; --m) {
        off += idx[static_cast<std::size_t>(m)] * stride;
        stride *= t.dim(m);
      }
      r[off] = t[i];
      for (int m = 0; m < n && ++idx[static_cast<std::size_t>(m)] == t.dim(m); ++m)
        idx[static_cast<std::size_t>(m)] = 0;
    }
    t = std::move(r);
  };
  as_c_order(x, hx);
  as_c_order(y, hy);
  CmtfOptions o;
  o.rank = a.rank;
  o.max_iters = a.max_iters;
  o.tol = a.tol;
  o.init = a.init == "random" ? CmtfInit::random : CmtfInit::svd;
  o.seed = a.seed;
  o.layout = Layout::row_major;
  o.backend = parse_backend(a.common.backend);
  index_t observed = 0;
  const std::vector<std::uint8_t> wx = missing ? not_nan(x, observed) : std::vector<std::uint8_t>();
  const std::vector<std::uint8_t> wy = missing ? not_nan(y, observed) : std::vector<std::uint8_t>();
  const CmtfResult<T> res =
      missing ? cmtf<T>(x.view(), y.view(), TensorView<const std::uint8_t>(wx.data(), x.dims()),
                        TensorView<const std::uint8_t>(wy.data(), y.dims()), o)
              : cmtf<T>(x.view(), y.view(), o);
  const nlohmann::json j = {
      {"command", "cmtf"},
      {"tensor", a.tensor},
      {"matrix", a.matrix},
      {"tensor_shape", hx.shape},
      {"matrix_shape", hy.shape},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"rank", a.rank},
      {"init", a.init},
      {"seed", a.seed},
      {"missing", missing ? "nan" : "none"},
      {"observed_entries", missing ? observed : x.numel() + y.numel()},
      {"tol", a.tol},
      {"max_iters", a.max_iters},
      {"iterations", res.iterations},
      {"converged", res.converged},
      {"relative_error", res.relative_error},
      {"error_history", res.error_history},
      {"seconds", res.seconds},
      {"files",
       "tensor ~ [[A, B, C]], matrix ~ A V^T: A.npy (I x rank), B.npy (J x rank), C.npy "
       "(K x rank), V.npy (M x rank)"}};
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    const auto save = [&](const char* name, const Matrix<T>& f) {
      io::save_npy<T>(dir / name, TensorView<const T>(f.data(), {f.rows(), f.cols()}));
    };
    save("A.npy", res.tensor_model.factors[0]);
    save("B.npy", res.tensor_model.factors[1]);
    save("C.npy", res.tensor_model.factors[2]);
    save("V.npy", res.matrix_model.factors[1]);
    write_json(dir / "report.json", j);
  });
  std::printf("CMTF rank %lld of %s and %s: relative error %.6g, %d iterations%s, %.3f s\n",
              static_cast<long long>(a.rank), a.tensor.c_str(), a.matrix.c_str(),
              res.relative_error, res.iterations, res.converged ? " (converged)" : "", res.seconds);
  return 0;
}

}  // namespace

Command add_cmtf_command(CLI::App& app) {
  auto a = std::make_shared<CmtfArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cmtf",
      "Coupled matrix-tensor factorisation by ALS: TENSOR (I, J, K) ~ [[A, B, C]] and MATRIX "
      "(I, M) ~ A V^T. Writes OUT/A.npy, OUT/B.npy, OUT/C.npy, OUT/V.npy and OUT/report.json.");
  cmd->add_option("tensor", a->tensor, "3-way tensor: .npy, float32 or float64")->required();
  cmd->add_option("matrix", a->matrix, "Matrix sharing the tensor's first axis: .npy")->required();
  add_out_option(*cmd, a->out);
  add_integer_option(*cmd, "--rank", a->rank, "Components")->required();
  add_integer_option(*cmd, "--max-iters", a->max_iters, "Most iterations")->capture_default_str();
  cmd->add_option("--tol", a->tol,
                  "Stop when the squared error changes by at most tol times its last value")
      ->capture_default_str();
  cmd->add_option("--init", a->init, "svd or random")
      ->check(CLI::IsMember({"svd", "random"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--seed", a->seed, "Seed of the random start");
  cmd->add_option("--missing", a->missing,
                  "nan: NaN entries of either are missing values (EM). Without it a NaN is "
                  "refused")
      ->check(CLI::IsMember({"nan"}));
  add_common_options(*cmd, a->common);
  return {cmd,
          [a] {
            if (distributed()) throw InvalidArgument("cmtf does not run under mpirun");
            const io::NpyHeader h = read_input_header(a->tensor);
            return choose_dtype(a->common.dtype, h.dtype) == io::DType::float32
                       ? run_cmtf<float>(*a, h)
                       : run_cmtf<double>(*a, h);
          },
          {}};
}

}  // namespace tenfold::cli
