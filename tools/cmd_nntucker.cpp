// tenfold nntucker: non-negative Tucker of a dense .npy tensor (multiplicative updates or
// HALS with FISTA / active set on the core, as TensorLy's).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"
#include "tenfold/nonnegative_tucker.hpp"

namespace tenfold::cli {
namespace {

struct NnTuckerArgs {
  std::string input;
  std::string out;
  std::vector<index_t> ranks;  // NumPy axis order
  std::string method = "hals";
  std::string core_solver = "fista";
  std::string init = "svd";
  int max_iters = 100;
  double tol = 1e-8;
  std::uint64_t seed = 0;
  bool normalize = false;
  CommonOptions common;
};

template <class T>
int run_nntucker(const NnTuckerArgs& a, const io::NpyHeader& header) {
  if (distributed()) {
    throw InvalidArgument("tenfold nntucker runs as one process, not under mpirun");
  }
  const int order = static_cast<int>(header.shape.size());
  if (static_cast<int>(a.ranks.size()) != order) {
    throw InvalidArgument("--ranks has " + std::to_string(a.ranks.size()) +
                          " values, but the input has " + std::to_string(order) + " axes");
  }
  NonnegativeTuckerOptions o;
  o.layout = header.fortran_order ? Layout::col_major : Layout::row_major;
  o.backend = parse_backend(a.common.backend);
  o.method = parse_nonnegative_tucker_method(a.method);
  o.core_solver = a.core_solver == "fista" ? NonnegativeTuckerCoreSolver::fista
                                           : NonnegativeTuckerCoreSolver::active_set;
  o.init = a.init == "svd" ? NonnegativeTuckerInit::svd : NonnegativeTuckerInit::random;
  o.max_iters = a.max_iters;
  o.tol = a.tol;
  o.seed = a.seed;
  o.normalize_factors = a.normalize;
  o.ranks.resize(static_cast<std::size_t>(order));
  for (int ax = 0; ax < order; ++ax) {
    const index_t r = a.ranks[static_cast<std::size_t>(ax)];
    const index_t size = header.shape[static_cast<std::size_t>(ax)];
    if (r < 1 || r > size) {
      throw InvalidArgument("--ranks: rank " + std::to_string(r) + " of axis " +
                            std::to_string(ax) + " is outside [1, " + std::to_string(size) + "]");
    }
    o.ranks[static_cast<std::size_t>(numpy_axis(header, ax))] = r;
  }
  if (!a.common.quiet) {
    o.callback = [](const NonnegativeTuckerProgress& p) {
      std::fprintf(stderr, "iter %4d  error %.6e  %8.3f s\n", p.iteration, p.relative_error,
                   p.seconds);
      return true;
    };
  }
  check_outputs({{"--out", a.out, true}}, {a.input});
  const NonnegativeTuckerResult<T> res = nonnegative_tucker(load_input<T>(a.input, header), o);
  nlohmann::json j = {
      {"command", "nntucker"},
      {"input", a.input},
      {"shape", header.shape},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"method", a.method},
      {"core_solver", a.core_solver},
      {"ranks", a.ranks},
      {"relative_error", res.relative_error},
      {"iterations", res.iterations},
      {"converged", res.converged},
      {"error_history", res.error_history},
      {"seconds", res.seconds},
      {"files", "core.npy and factor_<a>.npy (I_a x r_a) follow the NumPy axes of the input"}};
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "core.npy", res.model.core.view(),
                    header.fortran_order ? io::NpyOrder::fortran : io::NpyOrder::c_reversed);
    save_factors(dir, header, res.model.factors);
    write_json(dir / "report.json", j);
  });
  if (!a.common.quiet) {
    std::printf("Non-negative Tucker (%s) of %s: relative error %.6g after %d iterations, %.3f s\n",
                a.method.c_str(), a.input.c_str(), res.relative_error, res.iterations, res.seconds);
  }
  return 0;
}

}  // namespace

Command add_nntucker_command(CLI::App& app) {
  auto a = std::make_shared<NnTuckerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "nntucker",
      "Non-negative Tucker decomposition (HALS or multiplicative updates, as TensorLy's). Writes "
      "OUT/core.npy, OUT/factor_<a>.npy (I_a x r_a, for each NumPy axis a) and OUT/report.json.");
  cmd->add_option("input", a->input, "Input tensor: .npy, float32 or float64, order >= 2")
      ->required();
  add_integer_option(*cmd, "--ranks", a->ranks, "Ranks per NumPy axis, e.g. 10,8,5")->required();
  add_out_option(*cmd, a->out);
  cmd->add_option("--method", a->method, "hals or multiplicative")
      ->check(CLI::IsMember({"hals", "multiplicative"}))
      ->capture_default_str();
  cmd->add_option("--core-solver", a->core_solver, "HALS: the core's solver, fista or active_set")
      ->check(CLI::IsMember({"fista", "active_set"}))
      ->capture_default_str();
  cmd->add_option("--init", a->init, "svd (|leading singular vectors|) or random")
      ->check(CLI::IsMember({"svd", "random"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--max-iters", a->max_iters, "Most iterations");
  cmd->add_option("--tol", a->tol,
                  "Stop when the relative error changes by less (from the third iteration)")
      ->capture_default_str();
  add_integer_option(*cmd, "--seed", a->seed, "Seed of the random start");
  cmd->add_flag("--normalize", a->normalize,
                "Unit-norm factor columns after each iteration, the norms in the core");
  add_common_options(*cmd, a->common);
  return {cmd,
          [a] {
            const io::NpyHeader header = read_input_header_everywhere(a->input);
            return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                       ? run_nntucker<float>(*a, header)
                       : run_nntucker<double>(*a, header);
          },
          {}};
}

}  // namespace tenfold::cli
