// tenfold gcp: generalized CP (docs/sparse.md, "GCP") of a dense .npy tensor by L-BFGS,
// with --missing nan for missing entries, or of a sparse file by stochastic gradients.
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "tenfold/error.hpp"
#include "tenfold/gcp.hpp"

namespace tenfold::cli {
namespace {

struct GcpArgs {
  std::string input;
  std::string out;
  index_t rank = 0;
  std::string loss = "gaussian";
  std::string missing;
  index_t gradient_samples = 0;
  index_t function_samples = 0;
  GcpOptions options;
  std::vector<index_t> shape;  // --shape, sparse inputs
  CommonOptions common;
};

// The first (observed) entry the loss cannot model, by its NumPy index (the library
// names modes).
template <class T>
void check_data(const GcpArgs& a, const io::NpyHeader& header, const Tensor<T>& x) {
  const GcpLoss loss = parse_gcp_loss(a.loss);
  for (index_t i = 0; i < x.numel(); ++i) {
    const double v = static_cast<double>(x[i]);
    const char* need = std::isnan(v) ? nullptr : gcp_value_requirement(loss, v);
    if (need == nullptr) continue;
    throw InvalidArgument("--loss " + a.loss + " needs " + need + "; the entry at NumPy index " +
                          numpy_index_text(header, x.dims(), i) + " is " + std::to_string(v));
  }
}

template <class T>
int run_gcp(const GcpArgs& a, const io::NpyHeader* npy) {
  if (npy != nullptr) require_no_shape(a.shape);
  require_single_cpu_process("gcp", a.common.backend);
  if (npy == nullptr && !a.missing.empty()) {
    throw InvalidArgument(
        "--missing does not apply to a sparse input (its absent entries are zeros, not missing "
        "values)");
  }
  check_outputs({{"--out", a.out, true}}, {a.input});
  GcpOptions o = a.options;
  o.rank = a.rank;
  o.loss = parse_gcp_loss(a.loss);
  o.sampling.gradient_nonzeros = o.sampling.gradient_zeros = a.gradient_samples;
  o.sampling.function_nonzeros = o.sampling.function_zeros = a.function_samples;
  if (!a.common.quiet) {
    o.callback = [sparse = npy == nullptr](const GcpProgress& p) {
      if (sparse) {
        std::fprintf(stderr, "epoch %4d  objective estimate %.10g  %8.3f s\n", p.iteration,
                     p.objective, p.seconds);
      } else {
        std::fprintf(stderr, "iter %4d  objective %.10g  gradient %.3e  %8.3f s\n", p.iteration,
                     p.objective, p.gradient_norm, p.seconds);
      }
      return true;
    };
  }
  io::NpyHeader header;
  GcpResult<T> res;
  nlohmann::json extra;
  if (npy == nullptr) {
    const SparseTensor<T> x = load_sparse_input<T>(a.input, a.shape, header);
    res = gcp(x, o);
    extra = {{"nnz", x.nnz()},
             {"epoch_iters", o.sampling.epoch_iters},
             {"rate", o.sampling.rate},
             {"gradient_samples", a.gradient_samples},
             {"function_samples", a.function_samples}};
  } else {
    header = *npy;
    const bool missing = !a.missing.empty();
    const Tensor<T> x = load_input<T>(
        a.input, header, {missing, "pass --missing nan to treat NaN entries as missing values"});
    check_data(a, header, x);
    index_t n_observed = x.numel();
    const std::vector<std::uint8_t> observed =
        missing ? observed_entries(x, n_observed) : std::vector<std::uint8_t>();
    if (n_observed == 0) throw InvalidArgument("--missing nan: every entry of the input is NaN");
    res =
        missing ? gcp(x, TensorView<const std::uint8_t>(observed.data(), x.dims()), o) : gcp(x, o);
    extra = {{"missing", missing ? "nan" : "none"}, {"observed", n_observed}};
  }
  const KTensor<T>& m = res.model;
  nlohmann::json j = report_head<T>("gcp", a.input, header.shape, m.rank());
  j.update({{"loss", a.loss},
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
             "scale (poisson: log-rates, bernoulli: log-odds; the others: the mean)"}});
  if (o.loss == GcpLoss::huber) j["huber_delta"] = o.huber_delta;
  j.update(extra);
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {m.rank()}));
    save_factors(dir, header, m.factors);
    write_json(dir / "report.json", j);
  });
  std::printf("GCP rank %lld (%s loss) of %s: objective %s%.10g, %d %s (%s), %.3f s\n",
              static_cast<long long>(m.rank()), a.loss.c_str(), a.input.c_str(),
              npy == nullptr ? "estimate " : "", res.objective, res.iterations,
              npy == nullptr ? "epochs" : "iterations", std::string(to_string(res.stop)).c_str(),
              res.seconds);
  return 0;
}

}  // namespace

Command add_gcp_command(CLI::App& app) {
  auto a = std::make_shared<GcpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gcp",
      "Generalized CP under another loss than least squares: a dense .npy by L-BFGS, a sparse "
      "file by stochastic gradients on sampled nonzeros and zeros (Adam). Writes "
      "OUT/weights.npy, OUT/factor_<a>.npy (I_a x rank per NumPy axis a) and OUT/report.json.");
  cmd->add_option("input", a->input,
                  "Input tensor: .npy (float32 or float64), or sparse .tns, .tns.gz or "
                  ".tfsparse; order >= 2")
      ->required();
  add_integer_option(*cmd, "-r,--rank", a->rank, "Number of components, >= 1")->required();
  add_out_option(*cmd, a->out);
  cmd->add_option("--loss", a->loss,
                  "gaussian (least squares), poisson (counts, log link), bernoulli (0/1 data, "
                  "logit link), gamma or rayleigh (nonnegative data; nonnegative factors), "
                  "huber (least squares robust to outliers, --huber-delta)")
      ->check(CLI::IsMember({"gaussian", "poisson", "bernoulli", "gamma", "rayleigh", "huber"}))
      ->capture_default_str();
  cmd->add_option("--huber-delta", a->options.huber_delta,
                  "The huber loss's threshold: quadratic below it, linear above")
      ->capture_default_str();
  cmd->add_option("--missing", a->missing,
                  "nan: NaN entries of a .npy are missing values, left out of the objective. "
                  "Without it a NaN is refused")
      ->check(CLI::IsMember({"nan"}));
  add_integer_option(*cmd, "--max-iters", a->options.max_iters,
                     "Maximum L-BFGS iterations (a sparse input: epochs)");
  cmd->add_option("--gtol", a->options.gtol,
                  "Stop when the gradient norm falls below this times the start's")
      ->capture_default_str();
  cmd->add_option("--ftol", a->options.ftol,
                  "Stop when the objective changes by less than this times 1 + |objective|")
      ->capture_default_str();
  add_integer_option(*cmd, "--epoch-iters", a->options.sampling.epoch_iters,
                     "Sparse input: Adam steps per epoch");
  cmd->add_option("--rate", a->options.sampling.rate, "Sparse input: Adam's step")
      ->capture_default_str();
  add_integer_option(*cmd, "--gradient-samples", a->gradient_samples,
                     "Sparse input: nonzeros and zeros sampled per step, each (0: max(1000, 3 "
                     "nnz / max-iters))");
  add_integer_option(*cmd, "--function-samples", a->function_samples,
                     "Sparse input: nonzeros and zeros of the objective's estimate, each (0: "
                     "max(nnz / 100, 100000))");
  add_integer_option(*cmd, "--seed", a->options.seed, "Seed of the start (and of the samples)");
  cmd->add_option("--time-limit", a->options.time_limit,
                  "Stop after this many seconds (0: no limit)")
      ->capture_default_str();
  add_shape_option(*cmd, a->shape);
  add_common_options(*cmd, a->common);
  return {cmd,
          [a] {
            return run_on_input(a->input, a->common.dtype, [&]<class T>(const io::NpyHeader* npy) {
              return run_gcp<T>(*a, npy);
            });
          },
          {{"gradient_nonzeros", "--gradient-samples"},
           {"gradient_zeros", "--gradient-samples"},
           {"function_nonzeros", "--function-samples"},
           {"function_zeros", "--function-samples"}}};
}

}  // namespace tenfold::cli
