// Process grids: the automatic choice, the Cartesian communicator and its per-axis
// sub-communicators, and the block ranges.
#include <algorithm>
#include <string>

#include "mpi/comm.hpp"
#include "tenfold/error.hpp"
#include "tenfold/mpi.hpp"

namespace tenfold::mpi {
namespace {

std::string grid_text(const std::vector<int>& shape) {
  std::string s;
  for (std::size_t n = 0; n < shape.size(); ++n) s += (n > 0 ? "x" : "") + std::to_string(shape[n]);
  return s;
}

std::string shape_text(const std::vector<index_t>& dims) {
  std::string s = "(";
  for (std::size_t n = 0; n < dims.size(); ++n) s += (n > 0 ? ", " : "") + std::to_string(dims[n]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

}  // namespace

Range block_range(index_t size, int parts, int p) {
  // The first size mod parts ranges hold one index more.
  const index_t base = size / parts, extra = size % parts;
  return {p * base + std::min<index_t>(p, extra), base + (p < extra ? 1 : 0)};
}

std::vector<int> choose_grid(int processes, const std::vector<index_t>& dims) {
  if (processes < 1) throw InvalidArgument("the process count must be at least 1");
  if (dims.empty()) throw InvalidArgument("a process grid needs a tensor of order >= 1");
  std::vector<int> primes;
  for (int f = 2, rest = processes; rest > 1;) {
    if (rest % f == 0) {
      primes.push_back(f);
      rest /= f;
    } else {
      f = f * f > rest ? rest : f + 1;
    }
  }
  std::sort(primes.rbegin(), primes.rend());
  std::vector<int> shape(dims.size(), 1);
  for (int f : primes) {
    // The axis with the largest local size I_n / P_n that can still be cut f times more.
    int best = -1;
    for (std::size_t n = 0; n < dims.size(); ++n) {
      if (static_cast<index_t>(shape[n]) * f > dims[n]) continue;
      if (best < 0 || dims[n] * shape[static_cast<std::size_t>(best)] >
                          dims[static_cast<std::size_t>(best)] * shape[n]) {
        best = static_cast<int>(n);
      }
    }
    if (best < 0) {
      throw InvalidArgument(
          "no grid of " + std::to_string(processes) + " processes fits a tensor of shape " +
          shape_text(dims) + " (each process needs a non-empty block; the factor " +
          std::to_string(f) + " of " + std::to_string(processes) + " fits no axis after grid " +
          grid_text(shape) + "); use fewer processes");
    }
    shape[static_cast<std::size_t>(best)] *= f;
  }
  return shape;
}

ProcessGrid::ProcessGrid(MPI_Comm comm, const std::vector<index_t>& dims, std::vector<int> shape) {
  MPI_Comm_size(comm, &size_);
  // The same tensor and grid everywhere, so that the checks below (and MPI_Cart_create)
  // go the same way on every process.
  check_same(comm, "the arguments of ProcessGrid",
             {{"tensor shape", shape_text(dims)},
              {"grid", shape.empty() ? "automatic" : grid_text(shape)}});
  if (shape.empty()) shape = choose_grid(size_, dims);
  if (shape.size() != dims.size()) {
    throw InvalidArgument("grid " + grid_text(shape) + " has " + std::to_string(shape.size()) +
                          " axes, the tensor of shape " + shape_text(dims) + " " +
                          std::to_string(dims.size()));
  }
  long long product = 1;
  for (std::size_t n = 0; n < shape.size(); ++n) {
    if (shape[n] < 1) {
      throw InvalidArgument("grid " + grid_text(shape) + ": axis " + std::to_string(n) +
                            " has no processes");
    }
    if (shape[n] > dims[n]) {
      throw InvalidArgument("grid " + grid_text(shape) + " does not fit the tensor of shape " +
                            shape_text(dims) + ": NumPy axis " + std::to_string(n) + " has " +
                            std::to_string(dims[n]) + " indices for " + std::to_string(shape[n]) +
                            " processes (each process needs a non-empty block)");
    }
    product *= shape[n];
  }
  if (product != size_) {
    throw InvalidArgument("grid " + grid_text(shape) + " has " + std::to_string(product) +
                          " processes, the communicator " + std::to_string(size_));
  }
  shape_ = std::move(shape);
  const int order = static_cast<int>(shape_.size());
  std::vector<int> periods(shape_.size(), 0);
  MPI_Cart_create(comm, order, shape_.data(), periods.data(), 0, &cart_);
  MPI_Comm_rank(cart_, &rank_);
  coords_.resize(shape_.size());
  MPI_Cart_coords(cart_, rank_, order, coords_.data());
  for (int n = 0; n < order; ++n) {
    std::vector<int> keep(shape_.size(), 0);
    keep[static_cast<std::size_t>(n)] = 1;
    MPI_Comm fibre = MPI_COMM_NULL, slice = MPI_COMM_NULL;
    MPI_Cart_sub(cart_, keep.data(), &fibre);
    for (int& k : keep) k ^= 1;
    MPI_Cart_sub(cart_, keep.data(), &slice);
    fibres_.push_back(fibre);
    slices_.push_back(slice);
  }
}

ProcessGrid::~ProcessGrid() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm& c : fibres_) MPI_Comm_free(&c);
  for (MPI_Comm& c : slices_) MPI_Comm_free(&c);
  MPI_Comm_free(&cart_);
}

}  // namespace tenfold::mpi
