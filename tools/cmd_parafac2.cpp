// tenfold parafac2: PARAFAC2 of a folder of .npy slices (I_k, J).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "distributed.hpp"
#include "npz_folder.hpp"
#include "tenfold/error.hpp"
#include "tenfold/parafac2.hpp"

namespace tenfold::cli {
namespace {

struct Parafac2Args {
  std::string input;
  std::string out;
  index_t rank = 0;
  int max_iters = 2000;
  int inner_iters = 5;
  double tol = 1e-8;
  std::string init = "svd";
  std::uint64_t seed = 0;
  bool no_line_search = false;
  bool normalize = false;
  std::vector<index_t> nonnegative_modes;
  std::string missing;
  CommonOptions common;
};

// Whether file name a sorts before b, runs of digits compared as numbers (slice_2 before
// slice_10).
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      const std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      const auto strip = [](const std::string& s) {
        return s.substr(std::min(s.find_first_not_of('0'), s.size() - 1));
      };
      const std::string sa = strip(na), sb = strip(nb);
      if (sa.size() != sb.size()) return sa.size() < sb.size();
      if (sa != sb) return sa < sb;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

// The .npy files of the folder, in natural order of their names.
std::vector<std::filesystem::path> slice_files(const std::string& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });
  if (files.empty()) throw InvalidArgument("'" + folder + "' holds no .npy slice");
  return files;
}

// Slice k as a column-major I_k x J matrix (a C-order file transposed), NaN refused unless
// --missing nan.
template <class T>
Matrix<T> load_slice(const std::filesystem::path& path, bool missing) {
  const io::NpyHeader h = read_input_header(path.string());
  if (h.shape.size() != 2) {
    throw InvalidArgument("slice '" + path.string() + "' must be 2-D (I_k, J), got shape " +
                          shape_text(h.shape));
  }
  Tensor<T> x;
  try {
    x = load_input<T>(path.string(), h,
                      {missing, "pass --missing nan to treat NaN entries as missing"});
  } catch (const InvalidArgument& e) {  // the message says "input": name the slice's file
    throw InvalidArgument("slice '" + path.filename().string() + "': " + e.what());
  }
  Matrix<T> m(h.shape[0], h.shape[1]);
  for (index_t j = 0; j < m.cols(); ++j)
    for (index_t i = 0; i < m.rows(); ++i) m(i, j) = h.fortran_order ? x(i, j) : x(j, i);
  return m;
}

template <class T>
int run_parafac2(const Parafac2Args& a, const std::string& folder) {
  const std::vector<std::filesystem::path> files = slice_files(folder);
  check_outputs({{"--out", a.out, true}}, {a.input});
  const bool missing = a.missing == "nan";
  std::vector<Matrix<T>> slices;
  std::vector<TensorView<const T>> views;
  std::vector<std::vector<std::uint8_t>> masks;
  std::vector<TensorView<const std::uint8_t>> mask_views;
  for (const auto& f : files) slices.push_back(load_slice<T>(f, missing));
  index_t observed = 0, entries = 0;
  for (const Matrix<T>& s : slices) {
    views.emplace_back(s.data(), std::vector<index_t>{s.rows(), s.cols()});
    if (!missing) continue;
    masks.emplace_back(static_cast<std::size_t>(s.size()));
    for (index_t i = 0; i < s.size(); ++i) {
      masks.back()[static_cast<std::size_t>(i)] = std::isnan(s.data()[i]) ? 0 : 1;
      observed += masks.back()[static_cast<std::size_t>(i)];
    }
    entries += s.size();
    mask_views.emplace_back(masks.back().data(), std::vector<index_t>{s.rows(), s.cols()});
  }
  Parafac2Options o;
  o.rank = a.rank;
  o.max_iters = a.max_iters;
  o.inner_iters = a.inner_iters;
  o.tol = a.tol;
  o.init = a.init == "random" ? Parafac2Init::random : Parafac2Init::svd;
  o.seed = a.seed;
  o.line_search = !a.no_line_search;
  o.normalize = a.normalize;
  o.nonnegative_modes.assign(a.nonnegative_modes.begin(), a.nonnegative_modes.end());
  o.backend = parse_backend(a.common.backend);
  const Parafac2Result<T> res = parafac2<T>(views, mask_views, o);
  const Parafac2Model<T>& m = res.model;
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.filename().string());
  const nlohmann::json j = {
      {"command", "parafac2"},
      {"input", a.input},
      {"slices", names},
      {"columns", slices[0].cols()},
      {"dtype", dtype_name<T>()},
      {"backend", a.common.backend},
      {"rank", a.rank},
      {"init", a.init},
      {"seed", a.seed},
      {"line_search", !a.no_line_search},
      {"line_search_accepted", res.line_search_accepted},
      {"inner_iters", a.inner_iters},
      {"nonnegative_modes", a.nonnegative_modes},
      {"missing", missing ? "nan" : "none"},
      {"observed_entries", missing ? observed : entries},
      {"tol", a.tol},
      {"max_iters", a.max_iters},
      {"iterations", res.iterations},
      {"converged", res.converged},
      {"relative_error", res.relative_error},
      {"error_history", res.error_history},
      {"seconds", res.seconds},
      {"files",
       "X_k ~ projection_<k> @ B @ diag(weights * A[k]) @ C.T; A.npy (K x rank), B.npy "
       "(rank x rank), C.npy (J x rank), projection_<k>.npy (I_k x rank), k in the order of "
       "'slices'"}};
  io::write_folder_atomically(a.out, [&](const std::filesystem::path& dir) {
    io::save_npy<T>(dir / "weights.npy", TensorView<const T>(m.weights.data(), {a.rank}));
    const std::pair<const char*, const Matrix<T>*> factors[] = {
        {"A", &m.a}, {"B", &m.b}, {"C", &m.c}};
    for (const auto& [name, f] : factors)
      io::save_npy<T>(dir / (std::string(name) + ".npy"),
                      TensorView<const T>(f->data(), {f->rows(), f->cols()}));
    for (std::size_t k = 0; k < m.projections.size(); ++k) {
      const Matrix<T>& p = m.projections[k];
      io::save_npy<T>(dir / ("projection_" + std::to_string(k) + ".npy"),
                      TensorView<const T>(p.data(), {p.rows(), p.cols()}));
    }
    write_json(dir / "report.json", j);
  });
  std::printf(
      "PARAFAC2 rank %lld of %zu slices in %s: relative error %.6g, %d iterations%s, %.3f s\n",
      static_cast<long long>(a.rank), files.size(), a.input.c_str(), res.relative_error,
      res.iterations, res.converged ? " (converged)" : "", res.seconds);
  return 0;
}

}  // namespace

Command add_parafac2_command(CLI::App& app) {
  auto a = std::make_shared<Parafac2Args>();
  CLI::App* cmd = app.add_subcommand(
      "parafac2",
      "PARAFAC2 by ALS of slices X_k (I_k x J, the row counts free): X_k ~ P_k B diag(a_k) C^T. "
      "Writes OUT/weights.npy, OUT/A.npy, OUT/B.npy, OUT/C.npy, OUT/projection_<k>.npy and "
      "OUT/report.json.");
  cmd->add_option("input", a->input,
                  "Folder of .npy slices (I_k, J), float32 or float64, taken in the natural "
                  "order of their names (slice_2 before slice_10), or an .npz archive of them "
                  "(numpy.savez: arr_0, arr_1, ...)")
      ->required()
      ->check(CLI::ExistingPath);
  add_out_option(*cmd, a->out);
  add_integer_option(*cmd, "--rank", a->rank, "Components, 1 ... J")->required();
  add_integer_option(*cmd, "--max-iters", a->max_iters, "Most outer iterations")
      ->capture_default_str();
  add_integer_option(*cmd, "--inner-iters", a->inner_iters,
                     "ALS sweeps of the projected slices' CP per iteration")
      ->capture_default_str();
  cmd->add_option("--tol", a->tol, "Stop when the relative error changes by less")
      ->capture_default_str();
  cmd->add_option("--init", a->init, "svd or random")
      ->check(CLI::IsMember({"svd", "random"}))
      ->capture_default_str();
  add_integer_option(*cmd, "--seed", a->seed, "Seed of the random start");
  cmd->add_flag("--no-line-search", a->no_line_search, "Without Bro's extrapolation");
  cmd->add_flag("--normalize", a->normalize, "Unit factor columns, their norms in the weights");
  add_integer_option(*cmd, "--nonnegative-modes", a->nonnegative_modes,
                     "Non-negative modes (HALS), e.g. 0,2: 0 is A, 1 is B, 2 is C");
  cmd->add_option("--missing", a->missing,
                  "nan: NaN entries are missing values (EM; the error is over the observed "
                  "entries). Without it a NaN is refused")
      ->check(CLI::IsMember({"nan"}));
  add_common_options(*cmd, a->common);
  return {cmd,
          [a] {
            if (distributed()) throw InvalidArgument("parafac2 does not run under mpirun");
            // An .npz archive: its arrays unpacked into a temporary folder
            const bool npz = !std::filesystem::is_directory(a->input);
            const std::unique_ptr<NpzFolder> unpacked =
                npz ? std::make_unique<NpzFolder>(a->input) : nullptr;
            const std::string folder = npz ? unpacked->path().string() : a->input;
            const io::NpyHeader h = read_input_header(slice_files(folder)[0].string());
            return choose_dtype(a->common.dtype, h.dtype) == io::DType::float32
                       ? run_parafac2<float>(*a, folder)
                       : run_parafac2<double>(*a, folder);
          },
          {}};
}

}  // namespace tenfold::cli
