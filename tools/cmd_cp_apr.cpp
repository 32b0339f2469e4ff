// tenfold cp-apr: CP-APR (Poisson) of counts, sparse (.tns, .tns.gz, .tfsparse) or dense
// (.npy).
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "tenfold/cp_apr.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::cli {
namespace {

struct CpAprArgs {
  std::string input;
  std::string out;
  index_t rank = 0;
  CpAprOptions options;
  std::vector<index_t> shape;  // --shape, sparse inputs
  CommonOptions common;
};

template <class T>
int run_cp_apr(const CpAprArgs& a, const io::NpyHeader* npy) {
  if (npy != nullptr) require_no_shape(a.shape);
  require_single_cpu_process("cp-apr", a.common.backend);
  check_outputs({{"--out", a.out, true}}, {a.input});
  CpAprOptions o = a.options;
  o.rank = a.rank;
  if (!a.common.quiet) {
    o.callback = [](const CpAprProgress& p) {
      std::fprintf(stderr, "iter %4d  kkt %.3e  inner %3d  %8.3f s\n", p.iteration, p.kkt_violation,
                   p.inner_iterations, p.seconds);
      return true;
    };
  }
  // A sparse file's axes are its coordinate columns; a .npy's are its NumPy axes.
  io::NpyHeader header;
  CpAprResult<T> res;
  index_t nnz = 0;
  if (npy == nullptr) {
    const SparseTensor<T> x = load_sparse_input<T>(a.input, a.shape, header);
    nnz = x.nnz();
    res = cp_apr(x, o);
  } else {
    // The nonzeros with their modes in NumPy axis order (a C-order file loads reversed).
    const Tensor<T> x = load_input<T>(a.input, *npy);
    SparseTensor<T> counts = SparseTensor<T>::from_dense(x.view());
    if (!npy->fortran_order) {
      std::vector<index_t> coords;
      coords.reserve(counts.coords().size());
      for (int n = counts.order() - 1; n >= 0; --n) {
        const auto idx = counts.indices(n);
        coords.insert(coords.end(), idx.begin(), idx.end());
      }
      counts = SparseTensor<T>(npy->shape, std::move(coords), counts.values());
    }
    header.fortran_order = true;
    header.shape = npy->shape;
    nnz = counts.nnz();
    res = cp_apr(counts, o);
  }
  const KTensor<T>& m = res.model;
  nlohmann::json j = report_head<T>("cp-apr", a.input, header.shape, m.rank());
  j.update(
      {{"nnz", nnz},
       {"seed", o.seed},
       {"tol", o.tol},
       {"max_iters", o.max_iters},
       {"max_inner_iters", o.max_inner_iters},
       {"kappa", o.kappa},
       {"kappa_tol", o.kappa_tol},
       {"iterations", res.iterations},
       {"inner_iterations", res.inner_iterations},
       {"converged", res.converged},
       {"stop", std::string(to_string(res.stop))},
       {"kkt_violation", res.kkt_violation},
       {"kkt_history", res.kkt_history},
       {"inadmissible_zero_fixes", res.inadmissible_zero_fixes},
       {"log_likelihood", res.log_likelihood},
       {"seconds", res.seconds},
       {"factor_files", "factor_<a>.npy is the factor of NumPy axis a of the input (I_a x rank)"}});
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {m.rank()}));
    save_factors(dir, header, m.factors);
    write_json(dir / "report.json", j);
  });
  std::printf(
      "CP-APR rank %lld of %s: log-likelihood %.6g, KKT violation %.3g, %d iterations "
      "(%s), %.3f s\n",
      static_cast<long long>(m.rank()), a.input.c_str(), res.log_likelihood, res.kkt_violation,
      res.iterations, std::string(to_string(res.stop)).c_str(), res.seconds);
  return 0;
}

}  // namespace

Command add_cp_apr_command(CLI::App& app) {
  auto a = std::make_shared<CpAprArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cp-apr",
      "CP of nonnegative counts under a Poisson model (CP-APR, multiplicative updates). Writes "
      "OUT/weights.npy, OUT/factor_<a>.npy (I_a x rank per NumPy axis a) and OUT/report.json.");
  cmd->add_option("input", a->input,
                  "Counts: sparse .tns, .tns.gz or .tfsparse, or a dense .npy; order >= 2")
      ->required();
  add_integer_option(*cmd, "-r,--rank", a->rank, "Number of components, >= 1")->required();
  add_out_option(*cmd, a->out);
  add_integer_option(*cmd, "--max-iters", a->options.max_iters, "Maximum outer iterations");
  add_integer_option(*cmd, "--max-inner-iters", a->options.max_inner_iters,
                     "Multiplicative updates per mode and iteration, at most");
  cmd->add_option("--tol", a->options.tol, "Stop when the KKT violation is below this")
      ->capture_default_str();
  cmd->add_option("--kappa", a->options.kappa, "Inadmissible-zero fix: the amount added")
      ->capture_default_str();
  cmd->add_option("--kappa-tol", a->options.kappa_tol,
                  "Inadmissible-zero fix: entries below this that should grow are shifted")
      ->capture_default_str();
  add_integer_option(*cmd, "--seed", a->options.seed, "Seed of the random start");
  cmd->add_option("--time-limit", a->options.time_limit,
                  "Stop after this many seconds (0: no limit)")
      ->capture_default_str();
  add_shape_option(*cmd, a->shape);
  add_common_options(*cmd, a->common);
  return {cmd,
          [a] {
            return run_on_input(a->input, a->common.dtype, [&]<class T>(const io::NpyHeader* npy) {
              return run_cp_apr<T>(*a, npy);
            });
          },
          {}};
}

}  // namespace tenfold::cli
