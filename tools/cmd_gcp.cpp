// tenfold gcp: generalized CP of a dense .npy tensor under a gaussian, poisson or
// bernoulli loss (docs/sparse.md, "GCP").
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold::cli {
namespace {

struct GcpArgs {
  std::string input;
  std::string out;
  index_t rank = 0;
  std::string loss = "gaussian";
  GcpOptions options;
  CommonOptions common;
};

// The first entry the loss cannot model, by its NumPy index (the library names modes).
template <class T>
void check_data(const GcpArgs& a, const io::NpyHeader& header, const Tensor<T>& x) {
  const GcpLoss loss = parse_gcp_loss(a.loss);
  for (index_t i = 0; i < x.numel(); ++i) {
    const T v = x[i];
    const bool bad = (loss == GcpLoss::poisson && v < T(0)) ||
                     (loss == GcpLoss::bernoulli && v != T(0) && v != T(1) && !std::isnan(v));
    if (!bad) continue;
    std::vector<index_t> mode_index;
    index_t rest = i;
    for (int n = 0; n < x.order(); ++n) {
      mode_index.push_back(rest % x.dim(n));
      rest /= x.dim(n);
    }
    std::string at;
    for (int ax = 0; ax < x.order(); ++ax) {
      at += (ax > 0 ? ", " : "") +
            std::to_string(mode_index[static_cast<std::size_t>(numpy_axis(header, ax))]);
    }
    throw InvalidArgument(
        "--loss " + a.loss + " needs " +
        (loss == GcpLoss::poisson ? "nonnegative counts" : "binary data (0 or 1)") +
        "; the entry at NumPy index [" + at + "] is " + std::to_string(static_cast<double>(v)));
  }
}

template <class T>
int run_gcp(const GcpArgs& a, const io::NpyHeader& header) {
  if (distributed()) throw InvalidArgument("gcp does not run under mpirun");
  if (a.common.backend != "cpu") {
    throw InvalidArgument("gcp runs on --backend cpu only, got --backend " + a.common.backend);
  }
  check_outputs({{"--out", a.out, true}}, {a.input});
  const Tensor<T> x = load_input<T>(a.input, header);
  check_data(a, header, x);
  GcpOptions o = a.options;
  o.rank = a.rank;
  o.loss = parse_gcp_loss(a.loss);
  if (!a.common.quiet) {
    o.callback = [](const GcpProgress& p) {
      std::fprintf(stderr, "iter %4d  objective %.10g  gradient %.3e  %8.3f s\n", p.iteration,
                   p.objective, p.gradient_norm, p.seconds);
      return true;
    };
  }
  const GcpResult<T> res = gcp(x, o);
  const KTensor<T>& m = res.model;
  const nlohmann::json j = {
      {"command", "gcp"},
      {"input", a.input},
      {"shape", header.shape},
      {"dtype", dtype_name<T>()},
      {"rank", m.rank()},
      {"loss", a.loss},
      {"seed", o.seed},
      {"max_iters", o.max_iters},
      {"iterations", res.iterations},
      {"converged", res.converged},
      {"stop", std::string(to_string(res.stop))},
      {"objective", res.objective},
      {"objective_history", res.objective_history},
      {"seconds", res.seconds},
      {"factor_files",
       "factor_<a>.npy is the factor of NumPy axis a of the input (I_a x rank), on the link "
       "scale (poisson: log-rates, bernoulli: log-odds)"}};
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {m.rank()}));
    save_factors(dir, header, m.factors);
    write_json(dir / "report.json", j);
  });
  std::printf("GCP rank %lld (%s loss) of %s: objective %.10g, %d iterations (%s), %.3f s\n",
              static_cast<long long>(m.rank()), a.loss.c_str(), a.input.c_str(), res.objective,
              res.iterations, std::string(to_string(res.stop)).c_str(), res.seconds);
  return 0;
}

}  // namespace

Command add_gcp_command(CLI::App& app) {
  auto a = std::make_shared<GcpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gcp",
      "Generalized CP of a dense tensor under another loss than least squares (L-BFGS). Writes "
      "OUT/weights.npy, OUT/factor_<a>.npy (I_a x rank per NumPy axis a) and OUT/report.json.");
  cmd->add_option("input", a->input, "Input tensor: .npy, float32 or float64, order >= 2")
      ->required();
  add_integer_option(*cmd, "-r,--rank", a->rank, "Number of components, >= 1")->required();
  cmd->add_option("-o,--out", a->out,
                  "Output folder, written whole: created, or replacing an earlier result")
      ->required();
  cmd->add_option("--loss", a->loss,
                  "gaussian (least squares), poisson (counts, log link) or bernoulli (0/1 data, "
                  "logit link)")
      ->check(CLI::IsMember({"gaussian", "poisson", "bernoulli"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--max-iters", a->options.max_iters, "Maximum L-BFGS iterations");
  cmd->add_option("--gtol", a->options.gtol,
                  "Stop when the gradient norm falls below this times the start's")
      ->capture_default_str();
  cmd->add_option("--ftol", a->options.ftol,
                  "Stop when the objective changes by less than this times 1 + |objective|")
      ->capture_default_str();
  add_integer_option(*cmd, "--seed", a->options.seed, "Seed of the random start");
  cmd->add_option("--time-limit", a->options.time_limit,
                  "Stop after this many seconds (0: no limit)")
      ->capture_default_str();
  add_common_options(*cmd, a->common);
  return {cmd, [a] {
            const io::NpyHeader header = read_input_header(a->input);
            return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                       ? run_gcp<float>(*a, header)
                       : run_gcp<double>(*a, header);
          }};
}

}  // namespace tenfold::cli
