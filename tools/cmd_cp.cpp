// tenfold cp: CP-ALS of a dense .npy tensor.
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {
namespace {

struct CpArgs {
  std::string input;
  std::string out;
  index_t rank = 0;
  int max_iters = 100;
  double tol = 1e-6;
  std::string init = "random";
  std::string init_factors;
  std::uint64_t seed = 0;
  double ridge = 0.0;
  double time_limit = 0.0;
  CommonOptions common;
};

// One line per component: weight, then per NumPy axis the index of the
// largest-magnitude loading and its value.
template <class T>
void print_summary(const CpArgs& a, const io::NpyHeader& h, const CpResult<T>& res) {
  const KTensor<T>& m = res.model;
  const int order = m.order();
  std::printf("CP rank %lld of %s: fit %.6f, relative error %.6f, %d iterations (%s), %.3f s\n",
              static_cast<long long>(m.rank()), a.input.c_str(), res.fit, res.relative_error,
              res.iterations, std::string(to_string(res.stop)).c_str(), res.timings.total);
  std::printf("%-9s %12s", "component", "weight");
  for (int ax = 0; ax < order; ++ax) std::printf("   axis %d: top (loading)", ax);
  std::printf("\n");
  for (index_t r = 0; r < m.rank(); ++r) {
    std::printf("%-9lld %12.5g", static_cast<long long>(r), static_cast<double>(m.weights[r]));
    for (int ax = 0; ax < order; ++ax) {
      // NumPy axis ax is tenfold mode numpy_axis(h, ax) (the map is its own inverse).
      const Matrix<T>& f = m.factors[static_cast<std::size_t>(numpy_axis(h, ax))];
      index_t best = 0;
      for (index_t i = 1; i < f.rows(); ++i)
        if (std::abs(f(i, r)) > std::abs(f(best, r))) best = i;
      std::printf("   %8lld (%+.3f)%9s", static_cast<long long>(best),
                  static_cast<double>(f(best, r)), "");
    }
    std::printf("\n");
  }
}

template <class T>
int run_cp(const CpArgs& a, const io::NpyHeader& header) {
  const Tensor<T> x = load_input<T>(a.input, header);
  const int order = x.order();
  std::vector<std::string> names = factor_names(header);
  names.insert(names.end(), {"weights.npy", "report.json"});
  prepare_output_dir(a.out, a.input, names);

  CpOptions<T> o;
  o.rank = a.rank;
  o.max_iters = a.max_iters;
  o.tol = a.tol;
  o.init = parse_cp_init(a.init);
  if (!a.init_factors.empty()) {
    // factor_<a>.npy of NumPy axis a holds the start of mode numpy_axis(header, a).
    o.init = CpInit::given;
    o.initial_factors.resize(static_cast<std::size_t>(order));
    for (int ax = 0; ax < order; ++ax) {
      const auto path =
          std::filesystem::path(a.init_factors) / ("factor_" + std::to_string(ax) + ".npy");
      io::NpyHeader fh;
      Tensor<T> f = io::load_npy<T>(path, &fh);
      if (f.order() != 2) {
        throw DimensionMismatch("initial factor '" + path.string() + "' is not a matrix");
      }
      // A C-order (I, R) array loads as R x I: transpose it to I x R.
      Matrix<T> m(fh.shape[0], fh.shape[1]);
      for (index_t i = 0; i < m.rows(); ++i)
        for (index_t j = 0; j < m.cols(); ++j) m(i, j) = fh.fortran_order ? f(i, j) : f(j, i);
      o.initial_factors[static_cast<std::size_t>(numpy_axis(header, ax))] = std::move(m);
    }
  }
  o.seed = a.seed;
  o.layout = header.fortran_order ? Layout::col_major : Layout::row_major;
  o.ridge = a.ridge;
  o.time_limit = a.time_limit;
  o.backend = parse_backend(a.common.backend);
  if (!a.common.quiet) {
    o.callback = [](const CpProgress& p) {
      std::fprintf(stderr, "iter %4d  fit %.8f  change %.3e  %8.3f s\n", p.iteration, p.fit,
                   p.delta, p.seconds);
      return true;
    };
  }
  const CpResult<T> res = cp_als(x, o);

  const std::filesystem::path dir(a.out);
  const KTensor<T>& m = res.model;
  io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {m.rank()}));
  save_factors(dir, header, m.factors);
  nlohmann::json j = {
      {"command", "cp"},
      {"input", a.input},
      {"shape", header.shape},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"rank", m.rank()},
      {"init", std::string(to_string(o.init))},
      {"seed", a.seed},
      {"tol", a.tol},
      {"max_iters", a.max_iters},
      {"iterations", res.iterations},
      {"converged", res.converged},
      {"stop", std::string(to_string(res.stop))},
      {"fit", res.fit},
      {"relative_error", res.relative_error},
      {"fit_history", res.fit_history},
      {"eigen_fallbacks", res.eigen_fallbacks},
      {"seconds", res.timings.total},
      {"timings",
       {{"init", res.timings.init},
        {"mttkrp", res.timings.mttkrp},
        {"gram", res.timings.gram},
        {"solve", res.timings.solve},
        {"other", res.timings.other}}},
      {"factor_files", "factor_<a>.npy is the factor of NumPy axis a of the input (I_a x rank)"}};
  write_json(dir / "report.json", j);
  print_summary(a, header, res);
  return 0;
}

}  // namespace

Command add_cp_command(CLI::App& app) {
  auto a = std::make_shared<CpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cp",
      "CP decomposition by alternating least squares. Writes OUT/weights.npy (rank), "
      "OUT/factor_<a>.npy (I_a x rank, for each NumPy axis a of the input) and OUT/report.json.");
  cmd->add_option("input", a->input, "Input tensor: .npy, float32 or float64, order >= 2")
      ->required();
  cmd->add_option("-r,--rank", a->rank, "Number of components (>= 1)")->required();
  cmd->add_option("-o,--out", a->out, "Output folder (created if missing)")->required();
  cmd->add_option("--max-iters", a->max_iters, "Maximum number of ALS iterations")
      ->capture_default_str();
  cmd->add_option("--tol", a->tol, "Stop when the fit changes by less than this")
      ->capture_default_str();
  cmd->add_option("--init", a->init, "Initialisation: random or nvecs")
      ->check(CLI::IsMember({"random", "nvecs"}))
      ->capture_default_str();
  cmd->add_option("--init-factors", a->init_factors,
                  "Start from DIR/factor_<a>.npy (I_a x rank per NumPy axis a), e.g. an earlier "
                  "--out folder; overrides --init")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--seed", a->seed, "Seed of the random initialisation")->capture_default_str();
  cmd->add_option("--ridge", a->ridge, "l2 regularisation of the normal equations")
      ->capture_default_str();
  cmd->add_option("--time-limit", a->time_limit, "Stop after this many seconds (0: no limit)")
      ->capture_default_str();
  add_common_options(*cmd, a->common);
  return {cmd, [a] {
            const io::NpyHeader header = io::read_npy_header(a->input);
            return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                       ? run_cp<float>(*a, header)
                       : run_cp<double>(*a, header);
          }};
}

}  // namespace tenfold::cli
