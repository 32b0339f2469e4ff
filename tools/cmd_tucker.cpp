// tenfold tucker: HOSVD, ST-HOSVD or HOOI of a dense .npy tensor.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::cli {
namespace {

struct TuckerArgs {
  std::string input;
  std::string out;
  std::vector<index_t> ranks;  // NumPy axis order
  double eps = 0.0;
  std::string method = "sthosvd";
  int max_iters = 50;
  std::string grid;  // --grid, per NumPy axis
  CommonOptions common;
};

template <class T>
int run_tucker(const TuckerArgs& a, const io::NpyHeader& header) {
  // Checked before any work, in the input's NumPy terms: the sizes, then the outputs.
  const int order = static_cast<int>(header.shape.size());
  TuckerOptions o;
  o.method = parse_tucker_method(a.method);
  o.max_iters = a.max_iters;
  o.layout = header.fortran_order ? Layout::col_major : Layout::row_major;
  o.backend = parse_backend(a.common.backend);
  if (!a.ranks.empty()) {
    if (static_cast<int>(a.ranks.size()) != order) {
      throw InvalidArgument("--ranks has " + std::to_string(a.ranks.size()) +
                            " values, but the input has " + std::to_string(order) + " axes");
    }
    const index_t numel = checked_numel(header.shape);
    o.ranks.resize(static_cast<std::size_t>(order));
    for (int ax = 0; ax < order; ++ax) {
      const index_t r = a.ranks[static_cast<std::size_t>(ax)];
      const index_t size = header.shape[static_cast<std::size_t>(ax)];
      // The axis-a unfolding is I_a x (product of the other sizes): its rank bounds r_a.
      const index_t bound = size > 0 ? std::min(size, numel / size) : 0;
      if (r < 1 || r > bound) {
        throw InvalidArgument("--ranks: rank " + std::to_string(r) + " of axis " +
                              std::to_string(ax) + " is outside [1, " + std::to_string(bound) +
                              "] (the axis size, or the product of the other sizes if smaller)");
      }
      o.ranks[static_cast<std::size_t>(numpy_axis(header, ax))] = r;
    }
  } else {
    o.eps = a.eps;
  }
  const std::vector<int> grid = parse_grid(a.grid, header.shape);
  // Where the outputs are written; under mpirun an error there is one on every process.
  on_every_process([&] {
    if (writes_outputs()) check_outputs({{"--out", a.out, true}}, {a.input});
  });
  nlohmann::json mpi_report;
  // Under mpirun each process reads only its block (distributed_tucker).
  const TuckerResult<T> res = distributed()
                                  ? distributed_tucker<T>(a.input, header, grid, o, mpi_report)
                                  : tucker(load_input<T>(a.input, header), o);
  // Rank 0 writes the result; an error there is an error on every process.
  on_every_process([&] {
    if (!writes_outputs()) return;
    const TTensor<T>& m = res.model;
    std::vector<index_t> ranks(static_cast<std::size_t>(order));
    std::vector<std::vector<double>> eigenvalues(static_cast<std::size_t>(order));
    for (int ax = 0; ax < order; ++ax) {
      const auto mode = static_cast<std::size_t>(numpy_axis(header, ax));
      ranks[static_cast<std::size_t>(ax)] = m.core.dim(static_cast<int>(mode));
      eigenvalues[static_cast<std::size_t>(ax)] = res.eigenvalues[mode];
    }
    nlohmann::json j = {
        {"command", "tucker"},
        {"input", a.input},
        {"shape", header.shape},
        {"dtype", dtype_name<T>()},
        {"backend", a.common.backend},
        {"method", a.method},
        {"ranks", ranks},
        {"relative_error", res.relative_error},
        {"compression_ratio", res.compression_ratio},
        {"iterations", res.iterations},
        {"converged", res.converged},
        {"error_history", res.error_history},
        {"eigenvalues", eigenvalues},
        {"seconds", res.timings.total},
        {"timings",
         {{"gram", res.timings.gram}, {"eig", res.timings.eig}, {"ttm", res.timings.ttm}}},
        {"files", "core.npy and factor_<a>.npy (I_a x r_a) follow the NumPy axes of the input"}};
    if (o.eps) j["tol"] = *o.eps;
    if (distributed()) j["mpi"] = mpi_report;
    io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
      // The core's axes follow the input's NumPy axes, like the factors.
      io::save_npy<T>(dir / "core.npy", m.core.view(),
                      header.fortran_order ? io::NpyOrder::fortran : io::NpyOrder::c_reversed);
      save_factors(dir, header, m.factors);
      write_json(dir / "report.json", j);
    });
    std::printf("Tucker (%s) of %s: ranks", a.method.c_str(), a.input.c_str());
    for (index_t r : ranks) std::printf(" %lld", static_cast<long long>(r));
    std::printf(", relative error %.6g, compression %.1fx, %.3f s\n", res.relative_error,
                res.compression_ratio, res.timings.total);
  });
  return 0;
}

}  // namespace

Command add_tucker_command(CLI::App& app) {
  auto a = std::make_shared<TuckerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tucker",
      "Tucker decomposition (ST-HOSVD, HOSVD or HOOI). Writes OUT/core.npy, "
      "OUT/factor_<a>.npy (I_a x r_a, for each NumPy axis a of the input) and OUT/report.json.");
  cmd->add_option("input", a->input, "Input tensor: .npy, float32 or float64, order >= 2")
      ->required();
  auto* ranks = add_integer_option(*cmd, "--ranks", a->ranks, "Ranks per NumPy axis, e.g. 10,8,5");
  auto* tol = cmd->add_option("--tol", a->eps,
                              "Relative error bound eps in (0, 1): smallest ranks with "
                              "||X - X^|| <= eps ||X||");
  ranks->excludes(tol);
  tol->excludes(ranks);
  add_out_option(*cmd, a->out);
  cmd->add_option("--method", a->method, "sthosvd, hosvd or hooi")
      ->check(CLI::IsMember({"sthosvd", "hosvd", "hooi"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--max-iters", a->max_iters, "HOOI: most iterations");
  add_grid_option(*cmd, a->grid);
  add_common_options(*cmd, a->common);
  // A usage error (exit 2), raised while parsing.
  cmd->callback([ranks, tol] {
    if (ranks->count() == 0 && tol->count() == 0) {
      throw CLI::ValidationError("give either --ranks or --tol");
    }
  });
  return {cmd,
          [a] {
            const io::NpyHeader header = read_input_header_everywhere(a->input);
            return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                       ? run_tucker<float>(*a, header)
                       : run_tucker<double>(*a, header);
          },
          {{"eps", "--tol"}}};
}

}  // namespace tenfold::cli
