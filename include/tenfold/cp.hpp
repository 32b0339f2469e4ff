// CP decomposition by alternating least squares (CP-ALS).
#pragma once

#include <complex>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tenfold/backend.hpp"
#include "tenfold/export.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold {

/// How the factor matrices are initialised.
enum class CpInit {
  /// nvecs when every mode n >= 1 has I_n <= kCpNvecsMaxSize, random otherwise; gevd
  /// instead on a real 3-way tensor compressed first whose core has sizes R, R, >= 2
  /// (falling back to nvecs where the slices' mixtures are singular)
  automatic,
  random,  ///< entries uniform in [0, 1), from `seed`
  nvecs,   ///< leading eigenvectors of each mode's Gram X_(n) X_(n)^T (random columns past I_n)
  given,   ///< the initial factors passed to cp_als (see CpStart)
  /// Algebraic start on the compressed core G (real 3-way tensors compressed first, I_0
  /// and I_1 at least R >= 2, I_2 >= 2): A from the eigenvectors of S_a S_b^{-1} for two
  /// random mixtures S = sum_k w_k G(:, :, k) = A diag(C^T w) B^T of its slices, B from
  /// A^{-1} S_a, C by least squares (Leurgans, Ross and Abel 1993; Tensorlab's
  /// cpd_gevd). Exact on an exact rank-R tensor; a start near the planted solution where
  /// random and nvecs starts stop in local minima (docs/algorithms.md).
  gevd,
};

/// Most starts that CpOptions::n_starts = 0 (automatic) runs on a compressed core.
inline constexpr int kCpMaxCompressedStarts = 64;

/// Largest mode size for which CpInit::automatic forms the I_n x I_n Gram of nvecs.
inline constexpr index_t kCpNvecsMaxSize = 4096;

/// "auto", "random", "nvecs" or "given".
TENFOLD_API std::string_view to_string(CpInit init);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CpInit parse_cp_init(std::string_view name);

/// Whether dense CP-ALS first compresses the tensor (docs/algorithms.md, "Compression
/// first").
enum class CpCompress {
  automatic,  ///< on when the compressed core is at least kCpCompressMinReduction times
              ///< smaller than the tensor, the tensor has kCpCompressMinEntries entries
              ///< and every I_n <= kCpNvecsMaxSize (ST-HOSVD forms each mode's Gram)
  on,         ///< whenever the compression ranks are smaller than the tensor
  off,        ///< never
};

/// Smallest numel(X) / numel(core) at which CpCompress::automatic compresses.
inline constexpr double kCpCompressMinReduction = 8.0;
/// Smallest number of entries of a tensor that CpCompress::automatic compresses.
inline constexpr index_t kCpCompressMinEntries = index_t{1} << 20;

/// "auto", "on" or "off".
TENFOLD_API std::string_view to_string(CpCompress compress);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CpCompress parse_cp_compress(std::string_view name);

/// The multilinear ranks to which compression reduces a tensor of shape `dims` for a
/// rank-R CP: r_n = min(I_n, R, prod_{m != n} I_m).
TENFOLD_API std::vector<index_t> cp_compression_ranks(std::span<const index_t> dims, index_t rank);

/// Starts that CpOptions::n_starts = 0 runs on the compressed core of a tensor of shape
/// `dims` at rank R: 1 + as many more as fit in two fifths of the cost of one compressed
/// start (ST-HOSVD, 20 core sweeps of 4 R numel(core) flops plus a fixed cost per sweep
/// worth 4e5 flops, two full sweeps of 4 R numel(X) each), at most kCpMaxCompressedStarts.
TENFOLD_API int cp_compressed_starts(std::span<const index_t> dims, index_t rank);

/// How cp_als with a mask of observed entries fits them (docs/cp-variants.md).
enum class CpMissingSolver {
  em,        ///< EM-ALS: sweeps over the tensor with its missing entries filled by the model
  weighted,  ///< ALS on the observed entries only: each row of U_n solves its own normal
             ///< equations over the entries it observes (O(N R^2) per observed entry)
};

/// "em" or "weighted".
TENFOLD_API std::string_view to_string(CpMissingSolver solver);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CpMissingSolver parse_cp_missing_solver(std::string_view name);

/// How each mode's least-squares problem is solved (docs/cp-variants.md, "Sampled
/// least squares").
enum class CpSolver {
  exact,    ///< the normal equations of the whole tensor (an MTTKRP over every entry)
  sampled,  ///< CP-ARLS-LEV (Larsen and Kolda 2022): rows of the Khatri-Rao product,
            ///< with their fibres of the tensor, sampled by leverage scores
};

/// "exact" or "sampled".
TENFOLD_API std::string_view to_string(CpSolver solver);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CpSolver parse_cp_solver(std::string_view name);

/// Rows of the Khatri-Rao product that CpSolver::sampled draws per solve when
/// CpOptions::samples is 0, per component: S = kCpSamplesPerRank R (capped at the rows
/// there are).
inline constexpr index_t kCpSamplesPerRank = 64;

/// Which rule CpOptions::line_search follows (docs/algorithms.md, "Line search").
enum class CpLineSearchRule {
  /// The jump is kept when it lowers the error of the sweep it extends.
  tenfold,
  /// TensorLy's parafac: kept when it lowers the previous sweep's error, the factors
  /// extrapolated at the scales TensorLy's unnormalised factors have (its
  /// normalize_factors=True rescales them between iterations, which leaves the jump as is).
  tensorly,
};

/// "tenfold" or "tensorly".
TENFOLD_API std::string_view to_string(CpLineSearchRule rule);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CpLineSearchRule parse_cp_line_search_rule(std::string_view name);

/// Why the iteration stopped.
enum class CpStop { converged, max_iters, time_limit, callback };
TENFOLD_API std::string_view to_string(CpStop stop);

/// What the per-iteration callback sees.
struct TENFOLD_API CpProgress {
  int iteration = 0;     ///< 1-based
  double fit = 0.0;      ///< 1 - ||X - M|| / ||X||
  double delta = 0.0;    ///< |fit - previous fit| (the first iteration reports fit itself)
  double seconds = 0.0;  ///< wall time since the start of the call
  /// The model after this iteration (the weights and factors as the iteration holds
  /// them, converted to double; factors in sweep order: the tensor's modes, or for
  /// Layout::row_major the NumPy axes). Forming it copies the factors (from the
  /// device); empty while compression first iterates on the core, and for a complex
  /// tensor (see complex_model).
  std::function<KTensor<double>()> model;
  /// For a complex tensor, the model as `model` gives it for a real one, in
  /// std::complex<double> (the weights real); empty for a real tensor.
  std::function<KTensor<std::complex<double>>()> complex_model;
};

/// Options of cp_als. The Tensor Toolbox's cp_als stops after 50 iterations or when the
/// fit changes by less than 1e-4; the defaults here run longer (100) and to a tighter
/// tolerance (1e-6). Normalisation and the start follow the Tensor Toolbox and GenTen.
/// A start of one's own is not an option but cp_als's argument after the options (CpStart).
struct TENFOLD_API CpOptions {
  index_t rank = 1;     ///< number of components R >= 1
  int max_iters = 100;  ///< outer iterations (sweeps over all modes), >= 0 (0: the start)
  /// Stop when |change of fit| < tol (>= 0; 0 runs max_iters sweeps). Below the fit's
  /// own resolution (docs/algorithms.md, "Limit of this formula") rounding decides.
  double tol = 1e-6;
  /// The start. The default resolves to nvecs, which recovers planted low-rank
  /// problems far more often than one random start (docs/cp-planted-problems.md).
  CpInit init = CpInit::automatic;
  std::uint64_t seed = 0;  ///< seed of the random initialisation
  /// Starts to run (>= 0): start 0 uses `init` and `seed`, start s > 0 is random with
  /// seed `seed + s`; the result is the start with the best final fit. 0 (the default)
  /// is automatic: cp_compressed_starts(dims, rank) when the tensor is compressed first
  /// and `init` is automatic or nvecs without given factors (the starts then run on the
  /// small core, where they cost little); else, with `init` automatic and no given or
  /// fixed factors, the first start and random ones within half its sweeps (a random
  /// one kept only when it converged and fits clearly better; docs/algorithms.md); else 1.
  int n_starts = 0;
  /// Non-negative factors: each mode update is HALS (projected coordinate descent on
  /// the columns) instead of the normal-equation solve. The start is made non-negative
  /// (absolute values).
  bool nonnegative = false;
  /// With nonnegative: the modes constrained, numbered as the initial factors (TensorLy's
  /// nn_modes); the others take the plain normal-equation update and keep their start's
  /// signs. Empty: every mode.
  std::vector<int> nonnegative_modes;
  /// Bro's extrapolation every second iteration after the fifth (as TensorLy's
  /// linesearch=True); accepted only when it lowers the error. Not with nonnegative or
  /// missing values.
  bool line_search = false;
  /// The rule of line_search (ignored without it).
  CpLineSearchRule line_search_rule = CpLineSearchRule::tenfold;
  /// Dense input only: ST-HOSVD of the tensor to the ranks cp_compression_ranks gives,
  /// CP-ALS of the small core (every start, n_starts included, runs there), the
  /// factors lifted back (U_n times the core's factors), then ALS sweeps on the full
  /// tensor until the usual stopping rule. max_iters bounds the sweeps of both phases
  /// together. Not with nonnegative (on is refused, automatic is off).
  CpCompress compress = CpCompress::automatic;
  /// With a mask of observed entries: EM (the default) or weighted ALS, which converges
  /// in far fewer sweeps when much is missing but costs O(N R^2) per observed entry and
  /// sweep. Not with nonnegative. Ignored without a mask.
  CpMissingSolver missing_solver = CpMissingSolver::em;
  /// Modes whose start factor is kept as given (TensorLy's fixed_modes), numbered as the
  /// initial factors are: needs initial factors and at least one free mode; not with
  /// n_starts > 1, compression (on is refused, automatic is off) or, with line_search,
  /// the last mode of the sweep (mode N-1; for Layout::row_major NumPy axis N-1,
  /// mode 0), whose factor carries the jump's weights. The result is then not arranged: fixed
  /// factors come back bit for bit, the others with unit 2-norm columns (the scale in the weights),
  /// components in the start's order and signs.
  std::vector<int> fixed_modes;
  /// Dense in-memory input without a mask (not sparse, distributed or in model form),
  /// cpu backend: exact or sampled least squares. sampled
  /// draws `samples` rows per solve (deterministic given `seed`) and estimates the fit
  /// of every sweep from a fixed uniform sample of 2^14 entries, with its standard
  /// error. With `fit_check_every` = 0 (the default) the exact fit is computed only when
  /// 15 sweeps in a row have not raised the estimate by more than `tol` and two
  /// standard errors of the change (paired, on the same entries), and after the last sweep; the run
  /// stops at such a check when the exact fit lies within three standard errors of the estimate
  /// (else when a later check does not beat the best by `tol`). With `fit_check_every` = k >= 1 the
  /// exact fit is computed every k sweeps and after the last, and the run stops after three checks
  /// in a row that do not beat the best by `tol`. Either way the best checked model is returned and
  /// `fit` is its exact fit; `fit_history` holds the estimates of the unchecked sweeps
  /// (docs/cp-variants.md, "Sampled least squares"). Its start: automatic means nvecs from the
  /// Gram of `samples` uniformly drawn fibres per mode (the whole Gram would cost more than the
  /// sampled sweeps); nvecs means the same. Not with nonnegative, line_search, n_starts > 1,
  /// fixed_modes or compress = on (automatic is off).
  CpSolver solver = CpSolver::exact;
  index_t samples = 0;      ///< sampled: rows per solve (0: kCpSamplesPerRank R)
  int fit_check_every = 0;  ///< sampled: sweeps between exact fits (>= 0; 0: automatic)
  /// TensorLy's orthogonalise: each of the first `orthogonalise` sweeps (>= 0) starts by
  /// replacing every factor with I_n >= R by the Q of its thin QR (Q^T Q = I) and the
  /// weights by ones. Not with nonnegative, fixed_modes or compression (on is refused,
  /// automatic is off).
  int orthogonalise = 0;
  /// TensorLy's sparsity (robust CP; dense input without a mask only): the error the loop
  /// measures (fit, stopping rule, line search) is that of X - M - S, S the `sparsity`
  /// largest-magnitude entries of the residual X - M (every entry at least as large as
  /// the sparsity-th largest), while the sweeps fit X itself, as TensorLy 0.10's do.
  /// 0: off. Not with compression (on is refused, automatic is off).
  index_t sparsity = 0;
  double ridge = 0.0;       ///< l2 regulariser added to the diagonal of each normal matrix
  double time_limit = 0.0;  ///< seconds; 0 means none (checked after each iteration)
  /// The NumPy-order entry. row_major: the input is a C-order array seen as its
  /// reversed column-major tensor (mode n is NumPy axis N-1-n, as io::load_npy returns
  /// it). Everything whose order matters then follows the NumPy axes: the random start
  /// is drawn for axis 0 first, nvecs and the sweeps take the axes in order, products
  /// over modes and ties (final sort and sign fix) go by axis. A dense input is read
  /// as row_major_input says: on its column-major copy in axis order (the result is
  /// bit-identical to that of the array's Fortran-order copy passed with col_major) or
  /// in place (no copy; equal to it up to rounding). Kruskal- and Tucker-form inputs
  /// always give the Fortran-order bits. The initial factors and the result stay in
  /// the input's mode order.
  Layout layout = Layout::col_major;
  /// Dense row_major input: copied up to kRowMajorCopyMaxBytes, read in place above
  /// (automatic), or as chosen.
  RowMajorInput row_major_input = RowMajorInput::automatic;
  Backend backend = Backend::cpu;
  /// Called after every iteration; return false to stop early.
  std::function<bool(const CpProgress&)> callback;
};

/// The start of cp_als, its last argument: one I_n x R factor matrix per mode of the
/// tensor, in the tensor's mode order (the weights are taken as one), or none (empty,
/// the default). Given factors are the start: init must then be `given` or `automatic`,
/// and `given` needs them; any other init with factors throws InvalidArgument. A
/// std::vector<Matrix<T>> converts to it. T follows the tensor's (std::type_identity_t
/// keeps this argument out of template argument deduction), e.g.
///   cp_als(x, options)               // start from options.init
///   cp_als(x, options, factors)      // start from `factors`
template <class T>
using CpStart = std::type_identity_t<std::span<const Matrix<T>>>;

/// Wall-clock seconds spent in each phase of the iteration.
struct TENFOLD_API CpTimings {
  double init = 0.0;      ///< setup and initialisation (incl. data transfer to the device)
  double compress = 0.0;  ///< ST-HOSVD of the tensor and the lifting of the factors
  double mttkrp = 0.0;    ///< matricised tensor times Khatri-Rao product
  double gram = 0.0;      ///< factor Grams (syrk) and their Hadamard products
  double solve = 0.0;     ///< normal-equation solves (Cholesky, or eigen fallback)
  double other = 0.0;     ///< normalisation, fit, final arrangement
  double total = 0.0;
};

/// Result of cp_als.
template <class T>
struct TENFOLD_API CpResult {
  /// Normalised columns, weights sorted descending, sign-fixed (see fixed_modes).
  KTensor<T> model;
  int iterations = 0;
  bool converged = false;  ///< stop == CpStop::converged
  CpStop stop = CpStop::max_iters;
  double fit = 0.0;                 ///< 1 - relative_error (over the observed entries with a mask)
  double relative_error = 0.0;      ///< ||X - M|| / ||X||
  std::vector<double> fit_history;  ///< fit after each iteration
  int eigen_fallbacks = 0;         ///< solves where Cholesky failed and the pseudo-inverse was used
  CpInit init = CpInit::random;    ///< the start of the returned run (never automatic)
  int best_start = 0;              ///< index of the returned start (0 with a single start)
  std::vector<double> start_fits;  ///< final fit of every start
  int line_search_accepted = 0;    ///< extrapolations taken (line_search only)
  /// Components started again from random columns after they fell to exactly zero (their
  /// MTTKRP orthogonal to the data, as when the start misses every nonzero of a
  /// hyper-sparse tensor); each at most 3 times, after which it stays at weight 0.
  int revived_components = 0;
  /// Whether the tensor was compressed first; then `compression_ranks` are the core's
  /// sizes, the first `compressed_iterations` sweeps ran on the core, and fit_history
  /// holds the full tensor's fit throughout (exact: ||X - M||^2 = ||X||^2 - ||G||^2 +
  /// ||G - core model||^2 for a model M inside the Tucker subspaces).
  bool compressed = false;
  std::vector<index_t> compression_ranks;
  int compressed_iterations = 0;
  CpTimings timings;
};

/// An upper bound on the CP rank of every tensor of shape `dims`: min over n of the
/// product of all sizes but I_n (a tensor is the sum of its mode-n fibres, one
/// rank-one term each), e.g. 48 for 10 x 8 x 6. cp_als refuses a larger rank, since
/// an exact model never needs it. Products saturate at the largest index_t.
TENFOLD_API index_t max_cp_rank(std::span<const index_t> dims);

/// CP-ALS of a dense tensor (order >= 2, all sizes >= 1, finite entries,
/// rank <= max_cp_rank(x.dims())). The memory the iteration needs (factors, Grams,
/// MTTKRP buffers) is estimated first; a request that cannot fit throws MemoryError
/// with the estimate and the memory available, before anything large is allocated.
///
/// T is float, double, std::complex<float> or std::complex<double>. A complex tensor is
/// fitted by X ~ sum_r lambda_r a_r o b_r o c_r with complex factors, each update the
/// least-squares solution U_n = X_(n) conj(K) (K^T conj(K))^{-1} (K the Khatri-Rao
/// product of the other factors; docs/algorithms.md, "Complex tensors"); the weights
/// are real and positive (stored with a zero imaginary part), the phases stay in the
/// factors, and arrangement makes the largest-magnitude entry of each column real and
/// positive in all modes but one (the one whose largest magnitude is smallest). Complex
/// tensors run on the cpu backend only; nonnegative and compress = on are refused for
/// them (compress = automatic never compresses), and they have no masked overload.
template <class T>
TENFOLD_API CpResult<T> cp_als(TensorView<const T> x, const CpOptions& options,
                               CpStart<T> initial_factors = {});

template <class T>
CpResult<T> cp_als(const Tensor<T>& x, const CpOptions& options, CpStart<T> initial_factors = {}) {
  return cp_als(x.view(), options, initial_factors);
}

/// CP-ALS of a dense tensor with missing entries: `observed` has x's shape, and an
/// entry counts where it is non-zero (a missing entry of x may hold anything, NaN
/// included). EM-ALS: each sweep sees x with its missing entries filled by the current
/// model (by the mean of the observed entries before the first sweep), as TensorLy's
/// parafac(mask=...); the fit is 1 - ||W (X - M)|| / ||W X|| over the observed entries.
template <class T>
TENFOLD_API CpResult<T> cp_als(TensorView<const T> x, TensorView<const std::uint8_t> observed,
                               const CpOptions& options, CpStart<T> initial_factors = {});

template <class T>
CpResult<T> cp_als(const Tensor<T>& x, TensorView<const std::uint8_t> observed,
                   const CpOptions& options, CpStart<T> initial_factors = {}) {
  return cp_als(x.view(), observed, options, initial_factors);
}

/// CP-ALS of a tensor given in CP form (it is never formed): approximates a
/// rank-S model by a rank-R one, at O(sum_n I_n S R) per iteration. The rank bound
/// and the memory estimate are those of the dense call (the tensor's own rank is at
/// most S, but R > S is accepted: the extra components are redundant, not wrong).
template <class T>
TENFOLD_API CpResult<T> cp_als(const KTensor<T>& x, const CpOptions& options,
                               CpStart<T> initial_factors = {});

/// The compressed sparse fibre trees of sparse CP-ALS (docs/sparse.md, "Layout").
enum class CsfLayout {
  /// the first of all, two and one whose build holds at most 3/4 of the memory available
  /// beyond the tensor (csf_layout_for)
  automatic,
  /// one tree per mode, rooted at it: each output row is one root's subtree
  all,
  /// one tree, rooted at the smallest mode (about 1/N of the memory): the other modes'
  /// MTTKRPs add into a copy of the output per thread (I_n x R each), summed in order
  one,
  /// the tree of one and a second rooted at its leaf mode (the largest), whose MTTKRP,
  /// the dearest on one tree, then runs as a root's (about 2/N of the memory)
  two,
};

/// "auto", "all", "two" or "one".
TENFOLD_API std::string_view to_string(CsfLayout layout);
/// Parses the names above; throws InvalidArgument otherwise.
TENFOLD_API CsfLayout parse_csf_layout(std::string_view name);

/// What sparse CP-ALS adds to CpOptions.
struct TENFOLD_API SparseCpOptions {
  CsfLayout csf = CsfLayout::automatic;
};

/// The layout cp_als(x, ..., sparse) builds: sparse.csf, or for automatic the first of all,
/// two and one whose build holds at most 3/4 of the memory available now beyond x: for x
/// kept by the caller (cp_als(const SparseTensor&)), the trees and one build scratch; when
/// `taken` (the layout is for cp_als(std::move(x), ...)), the peak of taking x's entries
/// (x beside their 32-bit copy) and of building the trees from them, less x's bytes, which
/// the take frees (docs/sparse.md, "Layout").
template <class T>
TENFOLD_API CsfLayout csf_layout_for(const SparseTensor<T>& x, const SparseCpOptions& sparse,
                                     bool taken = false);

/// CP-ALS of a sparse tensor (order >= 2; docs/sparse.md): the same loop, stopping rule
/// and closed-form fit as the dense call, with the MTTKRP of each mode on compressed
/// sparse fibre trees (built once per call; their memory is checked first): by default
/// one tree per mode, rooted at that mode, or two trees or one for all modes when
/// sparse.csf says so or the N trees do not fit. With one tree per mode the MTTKRP gives
/// the same bits for any thread count; with two or one, for the same thread count (as
/// the loop's dense steps, docs/api.md "Threads"). Options as for dense tensors (starts,
/// n_starts, line_search, nonnegative, ridge, time_limit, callback); automatic init is
/// nvecs under the same size rule (the mode Grams are formed from the nonzeros). Refused:
/// compress = on, layout = row_major (the modes are the coordinate columns), backends
/// without host memory.
template <class T>
TENFOLD_API CpResult<T> cp_als(const SparseTensor<T>& x, const CpOptions& options,
                               CpStart<T> initial_factors = {}, const SparseCpOptions& sparse = {});

/// The same, taking the tensor, so that its entries are not held beside the CSF trees: the
/// trees are built one at a time in one build scratch (the same trees), from the entries
/// taken with 32-bit indices (where every size is at most 2^32: 4 bytes per index instead
/// of 8), the last tree releasing each array once it has read it (docs/sparse.md,
/// "CP-ALS"). nvecs' mode Grams read the entries back from the first tree (N indices and a
/// value per nonzero, held while one Gram is formed). The result is that of the call
/// above. x is left empty (no dimensions, no entries); where the call throws before the
/// trees are built (arguments, memory), x is unchanged.
template <class T>
TENFOLD_API CpResult<T> cp_als(SparseTensor<T>&& x, const CpOptions& options,
                               CpStart<T> initial_factors = {}, const SparseCpOptions& sparse = {});

}  // namespace tenfold
