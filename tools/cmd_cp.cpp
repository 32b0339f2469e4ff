// tenfold cp: CP-ALS of a dense .npy tensor or a sparse tensor file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::cli {
namespace {

struct CpArgs {
  std::string input;
  std::string out;
  index_t rank = 0;
  int max_iters = 100;
  double tol = 1e-6;
  std::string init = "auto";
  std::string init_factors;
  std::uint64_t seed = 0;
  int n_starts = 0;
  bool nonnegative = false;
  bool line_search = false;
  std::string compress = "auto";
  std::string missing;
  std::string missing_solver = "em";
  std::string solver = "exact";
  index_t samples = 0;
  int fit_check_every = 0;
  double ridge = 0.0;
  double time_limit = 0.0;
  std::string grid;            // --grid, per NumPy axis
  std::vector<index_t> shape;  // --shape, sparse inputs
  std::string csf = "auto";    // --csf, sparse inputs
  CommonOptions common;
};

// Below this congruence two components are reported as cancelling each other (the
// thresholds used for a two-factor degeneracy in the PARAFAC literature run from -0.8 to
// -0.85; the stricter one here).
constexpr double kDegenerateCongruence = -0.85;

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

// The start DIR/factor_<a>.npy of each NumPy axis a as the I_a x R matrix of its
// mode, checked against the input's shape and for finite entries in the file's terms.
template <class T>
std::vector<Matrix<T>> load_initial_factors(const CpArgs& a, const io::NpyHeader& header) {
  const int order = static_cast<int>(header.shape.size());
  std::vector<Matrix<T>> factors(static_cast<std::size_t>(order));
  for (int ax = 0; ax < order; ++ax) {
    const auto path =
        std::filesystem::path(a.init_factors) / ("factor_" + std::to_string(ax) + ".npy");
    io::NpyHeader fh;
    Tensor<T> f = io::load_npy<T>(path, &fh);
    const index_t rows = header.shape[static_cast<std::size_t>(ax)];
    if (fh.shape != std::vector<index_t>{rows, a.rank}) {
      throw DimensionMismatch("initial factor '" + path.string() + "' has shape " +
                              shape_text(fh.shape) + ", expected (" + std::to_string(rows) + ", " +
                              std::to_string(a.rank) + "): axis " + std::to_string(ax) +
                              " of the input by --rank");
    }
    // A C-order (I, R) array loads as R x I: transpose it to I x R.
    Matrix<T> m(rows, a.rank);
    for (index_t i = 0; i < m.rows(); ++i) {
      for (index_t j = 0; j < m.cols(); ++j) {
        m(i, j) = fh.fortran_order ? f(i, j) : f(j, i);
        if (!std::isfinite(m(i, j))) {
          throw InvalidArgument("initial factor '" + path.string() + "' has a non-finite entry (" +
                                (std::isnan(m(i, j)) ? "NaN" : "Inf") + ") at NumPy index [" +
                                std::to_string(i) + ", " + std::to_string(j) + "]");
        }
      }
    }
    // factor_<a>.npy of NumPy axis a holds the start of mode numpy_axis(header, a).
    factors[static_cast<std::size_t>(numpy_axis(header, ax))] = std::move(m);
  }
  return factors;
}

// --rank within the largest CP rank of the input's shape (NumPy terms).
void check_rank(const CpArgs& a, const io::NpyHeader& header) {
  if (const index_t bound = max_cp_rank(header.shape); a.rank > bound) {
    throw InvalidArgument("--rank " + std::to_string(a.rank) + " exceeds " + std::to_string(bound) +
                          ", the largest CP rank of any tensor of shape " +
                          shape_text(header.shape) +
                          " (the smallest product of all sizes but one)");
  }
}

// The options the flags give (all but the layout and the missing-value solver's input).
CpOptions cp_options(const CpArgs& a) {
  CpOptions o;
  o.rank = a.rank;
  o.max_iters = a.max_iters;
  o.tol = a.tol;
  o.init = a.init_factors.empty() ? parse_cp_init(a.init) : CpInit::given;
  o.seed = a.seed;
  o.n_starts = a.n_starts;
  o.nonnegative = a.nonnegative;
  o.line_search = a.line_search;
  o.compress = parse_cp_compress(a.compress);
  o.missing_solver = parse_cp_missing_solver(a.missing_solver);
  o.solver = parse_cp_solver(a.solver);
  o.samples = a.samples;
  o.fit_check_every = a.fit_check_every;
  o.ridge = a.ridge;
  o.time_limit = a.time_limit;
  o.backend = parse_backend(a.common.backend);
  if (!a.common.quiet && writes_outputs()) {
    o.callback = [](const CpProgress& p) {
      std::fprintf(stderr, "iter %4d  fit %.8f  change %.3e  %8.3f s\n", p.iteration, p.fit,
                   p.delta, p.seconds);
      return true;
    };
  }
  return o;
}

// The report fields of every CP-ALS run.
template <class T>
nlohmann::json cp_report(const CpArgs& a, const io::NpyHeader& header, const CpResult<T>& res) {
  const KTensor<T>& m = res.model;
  const ComponentPair degenerate = most_negative_congruence(m);
  return {
      {"command", "cp"},
      {"input", a.input},
      {"shape", header.shape},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"rank", m.rank()},
      {"init", std::string(to_string(res.init))},
      {"n_starts", a.n_starts},
      {"best_start", res.best_start},
      {"start_fits", res.start_fits},
      {"nonnegative", a.nonnegative},
      {"line_search", a.line_search},
      {"line_search_accepted", res.line_search_accepted},
      {"solver", a.solver},
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
      {"revived_components", res.revived_components},
      {"most_negative_congruence",
       {{"components", {degenerate.first, degenerate.second}},
        {"congruence", degenerate.congruence}}},
      {"seconds", res.timings.total},
      {"timings",
       {{"init", res.timings.init},
        {"compress", res.timings.compress},
        {"mttkrp", res.timings.mttkrp},
        {"gram", res.timings.gram},
        {"solve", res.timings.solve},
        {"other", res.timings.other}}},
      {"factor_files", "factor_<a>.npy is the factor of NumPy axis a of the input (I_a x rank)"}};
}

// OUT/weights.npy, OUT/factor_<a>.npy and OUT/report.json as one folder, the summary on
// stdout, and a warning for a degenerate model.
template <class T>
void write_cp_result(const CpArgs& a, const io::NpyHeader& header, const CpResult<T>& res,
                     const nlohmann::json& j) {
  const KTensor<T>& m = res.model;
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {m.rank()}));
    save_factors(dir, header, m.factors);
    write_json(dir / "report.json", j);
  });
  print_summary(a, header, res);
  const ComponentPair degenerate = most_negative_congruence(m);
  if (degenerate.congruence < kDegenerateCongruence) {
    std::fprintf(stderr,
                 "warning: components %lld and %lld nearly cancel (congruence %.3f): a "
                 "degenerate solution, whose weights grow without improving the fit; try a "
                 "lower --rank, --ridge or --nonnegative\n",
                 static_cast<long long>(degenerate.first),
                 static_cast<long long>(degenerate.second), degenerate.congruence);
  }
}

// Under mpirun, without --quiet: the MTTKRP's communication per sweep and every
// process's peak memory, from the report's mpi section (on rank 0).
template <class T>
void print_mpi_summary(const CpArgs& a, const CpResult<T>& res, const nlohmann::json& mpi) {
  if (a.common.quiet || !writes_outputs() || !mpi.contains("communication")) return;
  const auto& m = mpi["communication"].value("mttkrp", nlohmann::json::object());
  const double sweeps = std::max(res.iterations, 1);
  std::string peaks;
  for (const auto& p : mpi["peak_rss_mb"])
    peaks += (peaks.empty() ? "" : ", ") + std::to_string(std::lround(p.get<double>()));
  std::fprintf(stderr,
               "MPI: %d processes, grid %s; MTTKRP communication per sweep %.4g elements on "
               "rank 0, %.4g on all; peak resident memory per process (MB): %s\n",
               mpi["processes"].get<int>(), mpi["grid"].dump().c_str(),
               m.value("elements_rank0", 0.0) / sweeps, m.value("elements_all", 0.0) / sweeps,
               peaks.c_str());
}

template <class T>
int run_cp(const CpArgs& a, const io::NpyHeader& header) {
  // Checked before any work, in the input's NumPy terms (alike on every process, which
  // all have the same command line and input header): the rank, then the outputs (where
  // they are written) and the start's files, an error on any process one on every process.
  check_rank(a, header);
  const std::vector<int> grid = parse_grid(a.grid, header.shape);
  const bool missing = a.missing == "nan";
  if (missing && distributed()) {
    throw InvalidArgument("--missing nan is not available under mpirun");
  }
  if (a.solver == "sampled" && distributed()) {
    throw InvalidArgument("--solver sampled is not available under mpirun");
  }
  std::vector<Matrix<T>> initial_factors;
  on_every_process([&] {
    if (writes_outputs()) check_outputs({{"--out", a.out, true}}, {a.input});
    if (!a.init_factors.empty()) initial_factors = load_initial_factors<T>(a, header);
  });
  // Under mpirun each process reads only its block (distributed_cp).
  const Tensor<T> x =
      distributed()
          ? Tensor<T>()
          : load_input<T>(a.input, header,
                          {missing, "pass --missing nan to treat NaN entries as missing values"});
  // With --missing nan, the NaN entries are the missing ones.
  index_t n_observed = checked_numel(header.shape);
  const std::vector<std::uint8_t> observed =
      missing ? observed_entries(x, n_observed) : std::vector<std::uint8_t>();

  CpOptions o = cp_options(a);
  o.layout = header.fortran_order ? Layout::col_major : Layout::row_major;
  nlohmann::json mpi_report;
  const CpResult<T> res =
      distributed() ? distributed_cp<T>(a.input, header, grid, o, initial_factors, mpi_report)
      : missing
          ? cp_als(x, TensorView<const std::uint8_t>(observed.data(), x.dims()), o, initial_factors)
          : cp_als(x, o, initial_factors);
  // Rank 0 writes the result; an error there is an error on every process.
  on_every_process([&] {
    if (!writes_outputs()) return;
    // The core's size along each NumPy axis (empty without compression).
    std::vector<index_t> compression_ranks;
    for (std::size_t ax = 0; ax < res.compression_ranks.size(); ++ax) {
      compression_ranks.push_back(res.compression_ranks[static_cast<std::size_t>(
          numpy_axis(header, static_cast<int>(ax)))]);
    }
    nlohmann::json j = cp_report(a, header, res);
    j["compress"] = a.compress;
    j["compressed"] = res.compressed;
    j["compression_ranks"] = compression_ranks;
    j["compressed_iterations"] = res.compressed_iterations;
    j["missing"] = missing ? "nan" : "none";
    j["missing_solver"] = a.missing_solver;
    j["observed_entries"] = n_observed;
    if (distributed()) j["mpi"] = mpi_report;
    write_cp_result(a, header, res, j);
    print_mpi_summary(a, res, mpi_report);
  });
  return 0;
}

// CP-ALS of a sparse tensor file (.tns, .tns.gz, .tfsparse): axis n is column n of the
// coordinates, and the factors are written per axis as for a Fortran-order .npy. Under
// mpirun each process reads its share of the file (.tns, .tfsparse) and computes on its
// block (tenfold::mpi).
template <class T>
int run_sparse_cp(const CpArgs& a) {
  if (!a.missing.empty()) {
    throw InvalidArgument(
        "--missing does not apply to a sparse input (its absent entries are "
        "zeros, not missing values)");
  }
  if (a.compress == "on") throw InvalidArgument("--compress on applies to dense .npy inputs only");
  if (a.solver == "sampled") {
    throw InvalidArgument("--solver sampled applies to dense .npy inputs only");
  }
  if (distributed() && a.time_limit > 0.0) {
    throw InvalidArgument(
        "--time-limit is not available under mpirun (every process must stop at the same "
        "iteration); use --max-iters");
  }
  // The grid's form and process count before any work (its axes once the shape is known).
  const std::vector<int> grid = parse_grid(a.grid);
  on_every_process([&] {
    if (writes_outputs()) check_outputs({{"--out", a.out, true}}, {a.input});
  });
  io::NpyHeader header;
  header.fortran_order = true;
  std::unique_ptr<DistributedSparse<T>> dist;
  SparseTensor<T> x;
  if (distributed()) {
    dist = std::make_unique<DistributedSparse<T>>(a.input, a.shape, grid);
    header.shape = dist->dims();
  } else {
    x = load_sparse_input<T>(a.input, a.shape, header);
  }
  check_rank(a, header);
  CpOptions o = cp_options(a);
  std::vector<Matrix<T>> initial_factors;
  on_every_process([&] {
    if (!a.init_factors.empty()) initial_factors = load_initial_factors<T>(a, header);
  });
  const CsfLayout csf = parse_csf_layout(a.csf);
  // For the tensor cp_als takes below.
  const CsfLayout layout = dist ? dist->layout(csf) : csf_layout_for(x, {csf}, true);
  if (!a.common.quiet && writes_outputs()) {
    const char* trees = layout == CsfLayout::one   ? "one tree"
                        : layout == CsfLayout::two ? "two trees"
                                                   : "one tree per mode";
    std::fprintf(stderr, "CSF layout: %s (--csf %s)\n", trees,
                 std::string(to_string(layout)).c_str());
  }
  nlohmann::json mpi_report;
  const index_t nnz = dist ? dist->nnz() : x.nnz();
  // The entries are released once the trees are built (serial and distributed alike).
  const CpResult<T> res = dist ? dist->cp(o, initial_factors, layout, mpi_report)
                               : cp_als(std::move(x), o, initial_factors, {layout});
  on_every_process([&] {
    if (!writes_outputs()) return;
    nlohmann::json j = cp_report(a, header, res);
    j["format"] = "sparse";
    j["csf"] = to_string(layout);
    j["nnz"] = nnz;
    if (dist) j["mpi"] = mpi_report;
    write_cp_result(a, header, res, j);
    print_mpi_summary(a, res, mpi_report);
  });
  return 0;
}

}  // namespace

Command add_cp_command(CLI::App& app) {
  auto a = std::make_shared<CpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cp",
      "CP decomposition by alternating least squares. Writes OUT/weights.npy (rank), "
      "OUT/factor_<a>.npy (I_a x rank, for each NumPy axis a of the input) and OUT/report.json.");
  cmd->add_option("input", a->input,
                  "Input tensor: .npy (dense, float32 or float64) or sparse .tns, .tns.gz or "
                  ".tfsparse (float64 unless --dtype float32), order >= 2")
      ->required();
  add_integer_option(*cmd, "-r,--rank", a->rank,
                     "Number of components, 1 up to the smallest product of all axis sizes but "
                     "one")
      ->required();
  add_out_option(*cmd, a->out);
  add_integer_option(*cmd, "--max-iters", a->max_iters, "Maximum number of ALS iterations");
  cmd->add_option("--tol", a->tol, "Stop when the fit changes by less than this")
      ->capture_default_str();
  CLI::Option* init =
      cmd->add_option("--init", a->init,
                      "Initialisation: auto (gevd on a 3-way tensor compressed first where it "
                      "applies, else nvecs unless a mode past the first exceeds 4096), random, "
                      "nvecs, or gevd (algebraic, on the compressed core of a 3-way tensor with "
                      "axes 0 and 1 at least the rank)")
          ->check(CLI::IsMember({"auto", "random", "nvecs", "gevd"}))
          ->capture_default_str();
  add_integer_option(*cmd, "--n-starts", a->n_starts,
                     "Run this many starts (the first from --init, the others random with "
                     "seeds seed+1, ...) and keep the best fit; 0: up to 64 on the compressed core "
                     "with --init auto or nvecs, else 1")
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--nonnegative", a->nonnegative, "Non-negative factors (HALS updates)");
  cmd->add_flag("--line-search", a->line_search,
                "Bro's extrapolation every second iteration (as TensorLy's linesearch=True)");
  cmd->add_option("--csf", a->csf,
                  "Sparse inputs: the CSF trees of the MTTKRP. all: one per axis (fastest); "
                  "two: a tree rooted at the smallest axis and one at the largest (about 2/N "
                  "of the memory); one: a single tree (about 1/N); auto: the first of all, "
                  "two, one that fits in 3/4 of the available memory (said on stderr)")
      ->check(CLI::IsMember({"auto", "all", "two", "one"}))
      ->capture_default_str();
  cmd->add_option("--compress", a->compress,
                  "Compress first: CP of the ST-HOSVD core, then sweeps on the full tensor. "
                  "auto: when the core is 8x smaller, the tensor has 2^20 entries and no axis "
                  "exceeds 4096")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--missing", a->missing,
                  "nan: NaN entries are missing values (EM-ALS; the fit is over the observed "
                  "entries). Without it a NaN is refused")
      ->check(CLI::IsMember({"nan"}));
  cmd->add_option("--missing-solver", a->missing_solver,
                  "With --missing: em (impute with the model) or weighted (ALS on the observed "
                  "entries only, fewer sweeps when much is missing)")
      ->check(CLI::IsMember({"em", "weighted"}))
      ->capture_default_str();
  cmd->add_option("--solver", a->solver,
                  "Least squares per mode: exact, or sampled (rows of the Khatri-Rao product "
                  "drawn by leverage scores, CP-ARLS-LEV; the exact fit when the "
                  "estimated fit stalls, or every --fit-check-every sweeps; the best "
                  "checked model returned)")
      ->check(CLI::IsMember({"exact", "sampled"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--samples", a->samples,
                     "With --solver sampled: rows drawn per solve (0: 64 x rank)")
      ->check(CLI::Range(index_t{0}, std::numeric_limits<index_t>::max()));
  add_integer_option(*cmd, "--fit-check-every", a->fit_check_every,
                     "With --solver sampled: sweeps between exact fits (0: when the "
                     "estimated fit stalls)")
      ->check(CLI::Range(0, 1000000));
  CLI::Option* init_factors =
      cmd->add_option(
             "--init-factors", a->init_factors,
             "Start from DIR/factor_<a>.npy (I_a x rank per NumPy axis a), e.g. an earlier "
             "--out folder (--init, if given, must be auto)")
          ->check(CLI::ExistingDirectory);
  add_integer_option(*cmd, "--seed", a->seed, "Seed of the random initialisation");
  cmd->add_option("--ridge", a->ridge, "l2 regularisation of the normal equations")
      ->capture_default_str();
  cmd->add_option("--time-limit", a->time_limit, "Stop after this many seconds (0: no limit)")
      ->capture_default_str();
  add_grid_option(*cmd, a->grid);
  add_shape_option(*cmd, a->shape);
  add_common_options(*cmd, a->common);
  // Requests that contradict each other or that the library cannot combine, named by
  // their flags: usage errors (exit 2), raised while parsing.
  cmd->callback([a, init, init_factors] {
    if (init_factors->count() > 0 && init->count() > 0 && a->init != "auto") {
      throw CLI::ValidationError("--init " + a->init +
                                 " contradicts --init-factors, which gives the start; leave "
                                 "out one of them");
    }
    const bool missing = !a->missing.empty();
    const auto refuse = [](bool both, const std::string& first, const std::string& second) {
      if (both) throw CLI::ValidationError(first + " cannot be combined with " + second);
    };
    refuse(a->line_search && a->nonnegative, "--line-search", "--nonnegative");
    refuse(a->line_search && missing, "--line-search", "--missing nan");
    refuse(a->compress == "on" && a->nonnegative, "--compress on", "--nonnegative");
    refuse(a->compress == "on" && missing, "--compress on", "--missing nan");
    refuse(missing && a->missing_solver == "weighted" && a->nonnegative,
           "--missing-solver weighted", "--nonnegative");
    const bool sampled = a->solver == "sampled";
    refuse(sampled && missing, "--solver sampled", "--missing nan");
    refuse(sampled && a->nonnegative, "--solver sampled", "--nonnegative");
    refuse(sampled && a->line_search, "--solver sampled", "--line-search");
    refuse(sampled && a->compress == "on", "--solver sampled", "--compress on");
    refuse(sampled && a->n_starts > 1, "--solver sampled",
           "--n-starts " + std::to_string(a->n_starts));
    refuse(sampled && a->common.backend != "cpu", "--solver sampled",
           "--backend " + a->common.backend);
  });
  return {
      cmd,
      [a] {
        if (io::is_sparse_file(a->input)) {
          return a->common.dtype == "float32" ? run_sparse_cp<float>(*a)
                                              : run_sparse_cp<double>(*a);
        }
        require_no_shape(a->shape);
        if (a->csf != "auto") {
          throw CLI::ValidationError("--csf applies to sparse inputs (.tns, .tns.gz, .tfsparse)");
        }
        const io::NpyHeader header = read_input_header_everywhere(a->input);
        return choose_dtype(a->common.dtype, header.dtype) == io::DType::float32
                   ? run_cp<float>(*a, header)
                   : run_cp<double>(*a, header);
      },
      {}};
}

}  // namespace tenfold::cli
