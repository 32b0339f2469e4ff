// tenfold tt: tensor train (TT-SVD) of a dense .npy tensor.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"
#include "tenfold/tensor_train.hpp"

namespace tenfold::cli {
namespace {

struct TtArgs {
  std::string input;
  std::string out;
  std::vector<index_t> ranks;  // r_0 .. r_N, NumPy bond order
  index_t rank = 0;            // every inner bond
  double eps = 0.0;
  CommonOptions common;
};

template <class T>
int run_tt(const TtArgs& a, const io::NpyHeader& header) {
  if (distributed()) throw InvalidArgument("tenfold tt runs as one process, not under mpirun");
  const int order = static_cast<int>(header.shape.size());
  TensorTrainOptions o;
  o.layout = header.fortran_order ? Layout::col_major : Layout::row_major;
  o.backend = parse_backend(a.common.backend);
  if (a.rank > 0) {
    // Every inner bond; the library clips each to what its unfolding allows.
    o.ranks.assign(static_cast<std::size_t>(order + 1), a.rank);
    o.ranks.front() = o.ranks.back() = 1;
  } else if (!a.ranks.empty()) {
    if (static_cast<int>(a.ranks.size()) != order + 1) {
      throw InvalidArgument("--ranks has " + std::to_string(a.ranks.size()) +
                            " values, but a tensor train of the input's " + std::to_string(order) +
                            " axes has " + std::to_string(order + 1) + " (1, r_1, ..., 1)");
    }
    for (std::size_t k = 0; k < a.ranks.size(); ++k) {
      const bool end = k == 0 || k + 1 == a.ranks.size();
      if (a.ranks[k] < 1 || (end && a.ranks[k] != 1)) {
        throw InvalidArgument(
            "--ranks: r_" + std::to_string(k) + " = " + std::to_string(a.ranks[k]) +
            (end ? " must be 1 (the ends of a tensor train)" : " must be at least 1"));
      }
    }
    // NumPy bond k is the view's bond N-k for a C-order file.
    o.ranks.assign(a.ranks.begin(), a.ranks.end());
    if (!header.fortran_order) o.ranks.assign(a.ranks.rbegin(), a.ranks.rend());
  } else {
    o.eps = a.eps;
  }
  check_outputs({{"--out", a.out, true}}, {a.input});
  const TensorTrainResult<T> res = tensor_train(load_input<T>(a.input, header), o);
  // The cores in NumPy axis order: a C-order file's TT is the view's, reversed.
  std::vector<index_t> ranks(1, 1);
  std::vector<std::vector<double>> singular_values = res.singular_values;
  for (int ax = 0; ax < order; ++ax) {
    const Tensor<T>& g = res.model.cores[static_cast<std::size_t>(numpy_axis(header, ax))];
    ranks.push_back(header.fortran_order ? g.dim(2) : g.dim(0));
  }
  nlohmann::json j = {
      {"command", "tt"},
      {"input", a.input},
      {"shape", header.shape},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"ranks", ranks},
      {"relative_error", res.relative_error},
      {"compression_ratio", res.compression_ratio},
      {"singular_values", singular_values},
      {"seconds", res.timings.total},
      {"timings",
       {{"gram", res.timings.gram}, {"eig", res.timings.eig}, {"contract", res.timings.contract}}},
      {"files", "core_<a>.npy of shape (r_a, I_a, r_a+1) for each NumPy axis a of the input"}};
  if (o.eps) j["tol"] = *o.eps;
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    for (int ax = 0; ax < order; ++ax) {
      const Tensor<T>& g = res.model.cores[static_cast<std::size_t>(numpy_axis(header, ax))];
      io::save_npy<T>(dir / ("core_" + std::to_string(ax) + ".npy"), g.view(),
                      header.fortran_order ? io::NpyOrder::fortran : io::NpyOrder::c_reversed);
    }
    write_json(dir / "report.json", j);
  });
  if (!a.common.quiet) {
    std::printf("Tensor train of %s: ranks", a.input.c_str());
    for (index_t r : ranks) std::printf(" %lld", static_cast<long long>(r));
    std::printf(", relative error %.6g, compression %.1fx, %.3f s\n", res.relative_error,
                res.compression_ratio, res.timings.total);
  }
  return 0;
}

}  // namespace

Command add_tt_command(CLI::App& app) {
  auto a = std::make_shared<TtArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tt",
      "Tensor train by TT-SVD. Writes OUT/core_<a>.npy (r_a x I_a x r_a+1, for each NumPy axis "
      "a of the input) and OUT/report.json.");
  cmd->add_option("input", a->input, "Input tensor: .npy, float32 or float64, order >= 2")
      ->required();
  auto* rank = add_integer_option(*cmd, "--rank", a->rank,
                                  "Largest rank of every inner bond (clipped to what each allows)",
                                  index_t{1});
  auto* ranks = add_integer_option(*cmd, "--ranks", a->ranks,
                                   "Largest ranks r_0, ..., r_N per bond, e.g. 1,10,10,1");
  auto* tol = cmd->add_option("--tol", a->eps,
                              "Relative error bound eps in (0, 1): smallest ranks with "
                              "||X - X^|| <= eps ||X||");
  rank->excludes(ranks)->excludes(tol);
  ranks->excludes(tol);
  add_out_option(*cmd, a->out);
  add_common_options(*cmd, a->common);
  cmd->callback([rank, ranks, tol] {
    if (rank->count() + ranks->count() + tol->count() == 0) {
      throw CLI::ValidationError("give one of --rank, --ranks or --tol");
    }
  });
  return {cmd,
          [a] {
            const io::NpyHeader header = read_input_header_everywhere(a->input);
            return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                       ? run_tt<float>(*a, header)
                       : run_tt<double>(*a, header);
          },
          {{"eps", "--tol"}}};
}

}  // namespace tenfold::cli
