#include "mpi/comm.hpp"

#include <algorithm>
#include <climits>
#include <vector>

#include "tenfold/error.hpp"

namespace tenfold::mpi::detail {

int checked_count(index_t n, const char* what) {
  if (n > INT_MAX) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(n) +
                          " elements in one MPI call exceed the MPI limit of " +
                          std::to_string(INT_MAX) + "; use more processes");
  }
  return static_cast<int>(n);
}

namespace {

// The error types raised again, as themselves, on every process (a derived type before
// its base); any other exception arrives as tenfold::Error.
template <class... E>
struct ErrorKinds {
  static constexpr int other = sizeof...(E);
  /// The index of the first of E that e is, else `other`.
  static int of(const std::exception& e) {
    int kind = 0;
    (void)((dynamic_cast<const E*>(&e) != nullptr || (++kind, false)) || ...);
    return kind;
  }
  /// Throws E_kind (Error for `other`) with the message `what`.
  [[noreturn]] static void raise(int kind, const std::string& what) {
    int k = 0;
    ((k++ == kind ? throw E(what) : void()), ...);
    throw Error(what);
  }
};
using Kinds = ErrorKinds<IoError, DimensionMismatch, InvalidArgument, NumericalError, MemoryError>;

}  // namespace

void on_every_process(MPI_Comm comm, const std::function<void()>& f) {
  int kind = -1;  // no error
  std::string message;
  try {
    f();
  } catch (const std::exception& e) {
    kind = Kinds::of(e);
    message = e.what();
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // The lowest failing rank speaks for all.
  int first = kind >= 0 ? rank : size;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int header[2] = {kind, static_cast<int>(message.size())};
  MPI_Bcast(header, 2, MPI_INT, first, comm);
  std::vector<char> text(message.begin(), message.end());
  text.resize(static_cast<std::size_t>(header[1]));
  MPI_Bcast(text.data(), header[1], MPI_CHAR, first, comm);
  std::string what(text.begin(), text.end());
  if (size > 1) what = "process " + std::to_string(first) + ": " + what;
  Kinds::raise(header[0], what);
}

template <class T>
void allgather_rows(CommStats& stats, const std::string& phase, MPI_Comm fibre, const T* rows,
                    index_t total, index_t cols, T* out) {
  const int parts = comm_size(fibre);
  int me = 0;
  MPI_Comm_rank(fibre, &me);
  const Range mine = block_range(total, parts, me);
  count(stats, phase, fibre, mine.size * cols);
  if (parts == 1) {
    std::copy_n(rows, static_cast<std::size_t>(total * cols), out);
    return;
  }
  // Gathered block by block (each rows_q x cols, contiguous), then placed as rows.
  std::vector<int> counts(static_cast<std::size_t>(parts)), displs(static_cast<std::size_t>(parts));
  for (int q = 0; q < parts; ++q) {
    const Range r = block_range(total, parts, q);
    counts[static_cast<std::size_t>(q)] = checked_count(r.size * cols, phase.c_str());
    displs[static_cast<std::size_t>(q)] = checked_count(r.begin * cols, phase.c_str());
  }
  std::vector<T> blocks(static_cast<std::size_t>(total * cols));
  MPI_Allgatherv(rows, counts[static_cast<std::size_t>(me)], datatype<T>(), blocks.data(),
                 counts.data(), displs.data(), datatype<T>(), fibre);
  for (int q = 0; q < parts; ++q) {
    const Range r = block_range(total, parts, q);
    const T* b = blocks.data() + r.begin * cols;
    for (index_t j = 0; j < cols; ++j)
      std::copy_n(b + j * r.size, r.size, out + r.begin + j * total);
  }
}

template void allgather_rows<float>(CommStats&, const std::string&, MPI_Comm, const float*, index_t,
                                    index_t, float*);
template void allgather_rows<double>(CommStats&, const std::string&, MPI_Comm, const double*,
                                     index_t, index_t, double*);

}  // namespace tenfold::mpi::detail
