// Collective calls with per-phase counting, and errors raised on every process.
#pragma once

#include <mpi.h>

#include <span>
#include <string>

#include "core/scaling.hpp"
#include "tenfold/mpi.hpp"

namespace tenfold::mpi::detail {

template <class T>
MPI_Datatype datatype();
template <>
inline MPI_Datatype datatype<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype datatype<double>() {
  return MPI_DOUBLE;
}

inline int comm_size(MPI_Comm comm) {
  int p = 1;
  MPI_Comm_size(comm, &p);
  return p;
}

/// MPI counts are int: throws InvalidArgument naming `what` beyond that.
int checked_count(index_t n, const char* what);

/// Adds one call of n elements to stats[phase] (communicators of one process move nothing).
inline void count(CommStats& stats, const std::string& phase, MPI_Comm comm, index_t n) {
  if (comm_size(comm) < 2) return;
  CommCount& c = stats[phase];
  ++c.calls;
  c.elements += n;
}

/// In place: buf (n elements) = sum over the processes of comm, bit-identical on every
/// process (a reduction to rank 0 and a broadcast: an all-reduce may round differently
/// on different processes, and the replicated ALS must take the same decisions
/// everywhere).
template <class T>
void allreduce_sum(CommStats& stats, const std::string& phase, MPI_Comm comm, T* buf, index_t n) {
  count(stats, phase, comm, n);
  if (comm_size(comm) < 2 || n == 0) return;
  const int k = checked_count(n, phase.c_str());
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Reduce(rank == 0 ? MPI_IN_PLACE : buf, buf, k, datatype<T>(), MPI_SUM, 0, comm);
  MPI_Bcast(buf, k, datatype<T>(), 0, comm);
}

/// Rows of a matrix split over the fibre's processes, process q holding the range
/// [bounds[q], bounds[q + 1]): `out` (total x cols, leading dimension total =
/// bounds.back()) holds this process's rows in place, and receives everyone's.
template <class T>
void allgather_rows(CommStats& stats, const std::string& phase, MPI_Comm fibre,
                    std::span<const index_t> bounds, index_t cols, T* out);

/// A value as a field of check_same: shortest round-trip text, so that two doubles
/// compare equal exactly when their texts do.
std::string exact(double v);

/// "IxJ, checksum <hex>" of a matrix's sizes and bytes (FNV-1a), for check_same.
template <class T>
std::string fingerprint(const Matrix<T>& m);

/// check_finite(x, what) with its scan on this library's own thread pool (the public
/// function, which names the entry, runs only when the scan finds one: it would start
/// libtenfold.so's pool beside this one).
template <class T>
void check_local_finite(TensorView<const T> x, const char* what) {
  if (!tenfold::detail::magnitudes(x).finite) check_finite(x, what);
}

}  // namespace tenfold::mpi::detail
