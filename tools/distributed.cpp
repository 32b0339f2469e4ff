#include "distributed.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "tenfold/error.hpp"
#ifdef TENFOLD_CLI_MPI
#include "tenfold/mpi.hpp"
#endif

namespace tenfold::cli {
namespace {

bool g_distributed = false;

// "2x1x3" of a grid.
std::string grid_text(const std::vector<int>& grid) {
  std::string s;
  for (std::size_t n = 0; n < grid.size(); ++n) s += (n > 0 ? "x" : "") + std::to_string(grid[n]);
  return s;
}

}  // namespace

void add_grid_option(CLI::App& cmd, std::string& grid) {
  cmd.add_option("--grid", grid,
                 "Under mpirun: the process grid P0xP1x..., one entry per NumPy axis, product "
                 "the process count (default: chosen from the axis sizes)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return text.empty() ? std::string(
                                      "empty value; give P0xP1x... (one process count per "
                                      "NumPy axis, e.g. 2x1x2), or leave the option out "
                                      "to have the grid chosen")
                                : std::string();
          },
          ""));
}

namespace {

// The entries of --grid P0xP1x..., each a positive integer.
std::vector<int> grid_entries(const std::string& text) {
  std::vector<int> grid;
  for (std::size_t begin = 0;;) {
    const std::size_t end = std::min(text.find('x', begin), text.size());
    const std::string entry = text.substr(begin, end - begin);
    int p = 0;
    const auto [ptr, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), p);
    if (entry.empty() || ec != std::errc() || ptr != entry.data() + entry.size() || p < 1) {
      throw InvalidArgument("--grid '" + text +
                            "' is not of the form P0xP1x... (one positive process count per "
                            "NumPy axis, e.g. 2x1x2)");
    }
    grid.push_back(p);
    if (end == text.size()) return grid;
    begin = end + 1;
  }
}

// The grid, when its product is the number of processes.
std::vector<int> with_all_processes(std::vector<int> grid) {
  int processes = 1;
#ifdef TENFOLD_CLI_MPI
  if (g_distributed) MPI_Comm_size(MPI_COMM_WORLD, &processes);
#endif
  long long product = 1;
  for (int p : grid) product *= p;
  if (product != processes) {
    throw InvalidArgument(
        "--grid " + grid_text(grid) + " has " + std::to_string(product) + " processes, but " +
        (processes == 1
             ? "this run has one (start it with mpirun -np " + std::to_string(product) + ")"
             : "mpirun started " + std::to_string(processes)));
  }
  return grid;
}

}  // namespace

std::vector<int> parse_grid(const std::string& text) {
  if (text.empty()) return {};
  return with_all_processes(grid_entries(text));
}

std::vector<int> parse_grid(const std::string& text, const std::vector<index_t>& shape) {
  if (text.empty()) return {};
  std::vector<int> grid = grid_entries(text);
  if (grid.size() != shape.size()) {
    throw InvalidArgument("--grid " + text + " has " + std::to_string(grid.size()) +
                          (grid.size() == 1 ? " entry" : " entries") + ", but the input has " +
                          std::to_string(shape.size()) + " axes (one entry per NumPy axis)");
  }
  for (std::size_t n = 0; n < grid.size(); ++n) {
    if (grid[n] > shape[n]) {
      throw InvalidArgument("--grid " + grid_text(grid) + ": NumPy axis " + std::to_string(n) +
                            " has " + std::to_string(shape[n]) + " indices for " +
                            std::to_string(grid[n]) +
                            " processes (each process needs a non-empty block)");
    }
  }
  return with_all_processes(std::move(grid));
}

#ifdef TENFOLD_CLI_MPI

namespace {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

template <class V>
V reversed(V v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// Processes, grid and the communication of every phase: this process's counts and the
// sums over all processes.
template <class X>
void describe(const X& x, nlohmann::json& report) {
  const mpi::ProcessGrid& grid = *x.grid;
  nlohmann::json phases = nlohmann::json::object();
  // Every process knows the same phase names (the algorithms are replicated).
  for (const auto& [phase, count] : *x.stats) {
    long long mine[2] = {count.calls, count.elements}, all[2] = {0, 0};
    MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, grid.comm());
    phases[phase] = {{"calls_rank0", mine[0]},
                     {"elements_rank0", mine[1]},
                     {"calls_all", all[0]},
                     {"elements_all", all[1]}};
  }
  // The peak resident memory of every process so far (VmHWM), in MB.
  double peak = -1.0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) peak = std::stod(line.substr(6)) / 1024.0;
  std::vector<double> peaks(static_cast<std::size_t>(grid.size()));
  MPI_Allgather(&peak, 1, MPI_DOUBLE, peaks.data(), 1, MPI_DOUBLE, grid.comm());
  report = {{"processes", grid.size()},
            {"grid", grid.shape()},
            {"communication", phases},
            {"peak_rss_mb", peaks}};
}

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
  if (!launched_by_mpirun()) return;
  MPI_Init(&argc, &argv);
  g_distributed = true;
}

MpiSession::~MpiSession() {
  if (g_distributed) MPI_Finalize();
}

template <class T>
CpResult<T> distributed_cp(const std::string& input, const io::NpyHeader& h,
                           const std::vector<int>& grid, const CpOptions& options,
                           CpStart<T> initial_factors, nlohmann::json& report) {
  const auto x = mpi::read_npy<T>(MPI_COMM_WORLD, input, grid);
  // The distributed tensor is in NumPy axis order, where the serial call computes too.
  const bool c_order = !h.fortran_order;
  CpOptions o = options;
  o.layout = Layout::col_major;
  std::vector<Matrix<T>> start(initial_factors.begin(), initial_factors.end());
  if (c_order) start = reversed(std::move(start));
  CpResult<T> res = mpi::cp_als(x, o, start);
  if (c_order) res.model.factors = reversed(std::move(res.model.factors));
  describe(x, report);
  return res;
}

template <class T>
struct DistributedSparse<T>::Data {
  mpi::DistSparseTensor<T> x;
};

template <class T>
DistributedSparse<T>::DistributedSparse(const std::string& input, const std::vector<index_t>& shape,
                                        const std::vector<int>& grid)
    : x_(std::make_unique<Data>(Data{mpi::read_sparse<T>(MPI_COMM_WORLD, input, grid, shape)})) {}

template <class T>
DistributedSparse<T>::~DistributedSparse() = default;

template <class T>
const std::vector<index_t>& DistributedSparse<T>::dims() const {
  return x_->x.dims;
}

template <class T>
index_t DistributedSparse<T>::nnz() const {
  return x_->x.nnz;
}

template <class T>
CsfLayout DistributedSparse<T>::layout(CsfLayout csf) const {
  return mpi::csf_layout_for(x_->x, {csf}, true);  // cp() takes the blocks
}

template <class T>
CpResult<T> DistributedSparse<T>::cp(const CpOptions& options, CpStart<T> initial_factors,
                                     CsfLayout layout, nlohmann::json& report) {
  CpResult<T> res = mpi::cp_als(std::move(x_->x), options, initial_factors, {layout});
  describe(x_->x, report);
  return res;
}

template <class T>
TuckerResult<T> distributed_tucker(const std::string& input, const io::NpyHeader& h,
                                   const std::vector<int>& grid, const TuckerOptions& options,
                                   nlohmann::json& report) {
  const auto x = mpi::read_npy<T>(MPI_COMM_WORLD, input, grid);
  const bool c_order = !h.fortran_order;
  const int order = static_cast<int>(h.shape.size());
  TuckerOptions o = options;
  o.layout = Layout::col_major;
  if (c_order) {
    o.ranks = reversed(std::move(o.ranks));
    o.mode_order = reversed(std::move(o.mode_order));
    for (int& m : o.mode_order) m = order - 1 - m;
  }
  TuckerResult<T> res = mpi::tucker(x, o);
  if (c_order) {
    res.model.core = transpose<T>(res.model.core);
    res.model.factors = reversed(std::move(res.model.factors));
    res.eigenvalues = reversed(std::move(res.eigenvalues));
    for (int& m : res.mode_order) m = order - 1 - m;
  }
  describe(x, report);
  return res;
}

#else  // built without MPI

namespace {

// Processes of the job the launcher started, from its environment (1 without one).
int launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  }
  return 1;
}

}  // namespace

MpiSession::MpiSession(int& /*argc*/, char**& /*argv*/) {
  if (launched_processes() > 1) {
    throw NotCompiled("this tenfold was built without MPI (TENFOLD_WITH_MPI=OFF), so each of the " +
                      std::to_string(launched_processes()) +
                      " processes mpirun started would run the whole job; run it without "
                      "mpirun or build with MPI");
  }
}

MpiSession::~MpiSession() = default;

template <class T>
CpResult<T> distributed_cp(const std::string&, const io::NpyHeader&, const std::vector<int>&,
                           const CpOptions&, CpStart<T>, nlohmann::json&) {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
TuckerResult<T> distributed_tucker(const std::string&, const io::NpyHeader&,
                                   const std::vector<int>&, const TuckerOptions&, nlohmann::json&) {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
struct DistributedSparse<T>::Data {};

template <class T>
DistributedSparse<T>::DistributedSparse(const std::string&, const std::vector<index_t>&,
                                        const std::vector<int>&) {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
DistributedSparse<T>::~DistributedSparse() = default;

template <class T>
const std::vector<index_t>& DistributedSparse<T>::dims() const {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
index_t DistributedSparse<T>::nnz() const {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
CsfLayout DistributedSparse<T>::layout(CsfLayout) const {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
CpResult<T> DistributedSparse<T>::cp(const CpOptions&, CpStart<T>, CsfLayout, nlohmann::json&) {
  throw NotCompiled("this tenfold was built without MPI");
}

#endif

bool distributed() { return g_distributed; }

bool writes_outputs() {
#ifdef TENFOLD_CLI_MPI
  if (g_distributed) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
  }
#endif
  return true;
}

void check_same_command_line(int argc, char** argv) {
#ifdef TENFOLD_CLI_MPI
  if (!g_distributed) return;
  // argv[0] may name the program by another path on another node.
  mpi::Fields args{{"argument count", std::to_string(argc - 1)}};
  for (int i = 1; i < argc; ++i)
    args.emplace_back("argument " + std::to_string(i), "'" + std::string(argv[i]) + "'");
  mpi::check_same(MPI_COMM_WORLD, "the command lines", args);
#else
  (void)argc;
  (void)argv;
#endif
}

void on_every_process(const std::function<void()>& f) {
#ifdef TENFOLD_CLI_MPI
  if (g_distributed) return mpi::on_every_process(MPI_COMM_WORLD, f);
#endif
  f();
}

io::NpyHeader read_input_header_everywhere(const std::string& path) {
#ifdef TENFOLD_CLI_MPI
  // The same header on every process first, so that the checks below go alike everywhere.
  if (g_distributed) (void)mpi::read_npy_header(MPI_COMM_WORLD, path);
#endif
  return read_input_header(path);
}

template CpResult<float> distributed_cp<float>(const std::string&, const io::NpyHeader&,
                                               const std::vector<int>&, const CpOptions&,
                                               CpStart<float>, nlohmann::json&);
template CpResult<double> distributed_cp<double>(const std::string&, const io::NpyHeader&,
                                                 const std::vector<int>&, const CpOptions&,
                                                 CpStart<double>, nlohmann::json&);
template class DistributedSparse<float>;
template class DistributedSparse<double>;
template TuckerResult<float> distributed_tucker<float>(const std::string&, const io::NpyHeader&,
                                                       const std::vector<int>&,
                                                       const TuckerOptions&, nlohmann::json&);
template TuckerResult<double> distributed_tucker<double>(const std::string&, const io::NpyHeader&,
                                                         const std::vector<int>&,
                                                         const TuckerOptions&, nlohmann::json&);

}  // namespace tenfold::cli
