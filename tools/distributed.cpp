#include "distributed.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "tenfold/error.hpp"
#ifdef TENFOLD_CLI_MPI
#include "tenfold/mpi.hpp"
#endif

namespace tenfold::cli {
namespace {

bool g_distributed = false;

}  // namespace

#ifdef TENFOLD_CLI_MPI

namespace {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

// A C-order file's tensor as load_npy gives it: modes reversed, the same memory.
template <class T>
Tensor<T> reversed_modes(const Tensor<T>& x) {
  const int order = static_cast<int>(x.dims().size());
  std::vector<index_t> dims(x.dims().rbegin(), x.dims().rend());
  Tensor<T> y(dims);
  std::vector<index_t> idx(static_cast<std::size_t>(order), 0);
  for (index_t k = 0; k < x.numel(); ++k) {
    // y(i_{N-1}, ..., i_0) = x(i_0, ..., i_{N-1})
    index_t pos = 0;
    for (int m = 0; m < order; ++m)
      pos = pos * x.dims()[static_cast<std::size_t>(m)] + idx[static_cast<std::size_t>(m)];
    y[pos] = x[k];
    for (int m = 0; m < order; ++m) {
      if (++idx[static_cast<std::size_t>(m)] < x.dims()[static_cast<std::size_t>(m)]) break;
      idx[static_cast<std::size_t>(m)] = 0;
    }
  }
  return y;
}

template <class V>
V reversed(V v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// Processes, grid and the communication of every phase: this process's counts and the
// sums over all processes.
template <class T>
void describe(const mpi::DistTensor<T>& x, nlohmann::json& report) {
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
  report = {{"processes", grid.size()}, {"grid", grid.shape()}, {"communication", phases}};
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

bool writes_outputs() {
  if (!g_distributed) return true;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == 0;
}

template <class T>
CpResult<T> distributed_cp(const std::string& input, const io::NpyHeader& h,
                           const CpOptions& options, CpStart<T> initial_factors,
                           nlohmann::json& report) {
  const auto x = mpi::read_npy<T>(MPI_COMM_WORLD, input);
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
TuckerResult<T> distributed_tucker(const std::string& input, const io::NpyHeader& h,
                                   const TuckerOptions& options, nlohmann::json& report) {
  const auto x = mpi::read_npy<T>(MPI_COMM_WORLD, input);
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
    res.model.core = reversed_modes(res.model.core);
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

bool writes_outputs() { return true; }

template <class T>
CpResult<T> distributed_cp(const std::string&, const io::NpyHeader&, const CpOptions&, CpStart<T>,
                           nlohmann::json&) {
  throw NotCompiled("this tenfold was built without MPI");
}

template <class T>
TuckerResult<T> distributed_tucker(const std::string&, const io::NpyHeader&, const TuckerOptions&,
                                   nlohmann::json&) {
  throw NotCompiled("this tenfold was built without MPI");
}

#endif

bool distributed() { return g_distributed; }

template CpResult<float> distributed_cp<float>(const std::string&, const io::NpyHeader&,
                                               const CpOptions&, CpStart<float>, nlohmann::json&);
template CpResult<double> distributed_cp<double>(const std::string&, const io::NpyHeader&,
                                                 const CpOptions&, CpStart<double>,
                                                 nlohmann::json&);
template TuckerResult<float> distributed_tucker<float>(const std::string&, const io::NpyHeader&,
                                                       const TuckerOptions&, nlohmann::json&);
template TuckerResult<double> distributed_tucker<double>(const std::string&, const io::NpyHeader&,
                                                         const TuckerOptions&, nlohmann::json&);

}  // namespace tenfold::cli
