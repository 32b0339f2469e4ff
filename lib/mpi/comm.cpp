#include "mpi/comm.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <new>
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

std::string exact(double v) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), v);
  return std::string(text, ec == std::errc() ? end : text);
}

template <class T>
std::string fingerprint(const Matrix<T>& m) {
  // FNV-1a, 64 bits, over the entries' bytes
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(m.data());
  for (std::size_t i = 0; i < static_cast<std::size_t>(m.size()) * sizeof(T); ++i)
    h = (h ^ bytes[i]) * 0x100000001b3ull;
  char hex[16];
  const auto [end, ec] = std::to_chars(hex, hex + sizeof(hex), h, 16);
  return std::to_string(m.rows()) + "x" + std::to_string(m.cols()) + ", checksum " +
         std::string(hex, end);
}

}  // namespace tenfold::mpi::detail

namespace tenfold::mpi {

void on_every_process(MPI_Comm comm, const std::function<void()>& f) {
  int kind = -1;  // no error
  std::string message;
  try {
    f();
  } catch (const std::bad_alloc&) {
    kind = detail::Kinds::of(MemoryError("out of memory"));
    message = "out of memory";
  } catch (const std::exception& e) {
    kind = detail::Kinds::of(e);
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
  detail::Kinds::raise(header[0], what);
}

void check_same(MPI_Comm comm, const std::string& what, const Fields& fields) {
  // Process 0's fields, each name and value followed by a NUL, to every process.
  std::string mine;
  for (const auto& [name, value] : fields) mine += name + '\0' + value + '\0';
  long long length = static_cast<long long>(mine.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, comm);
  std::string theirs(static_cast<std::size_t>(length), '\0');
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) theirs = mine;
  MPI_Bcast(theirs.data(), detail::checked_count(length, "check_same"), MPI_CHAR, 0, comm);
  Fields zero;
  for (std::size_t at = 0; at < theirs.size();) {
    const std::size_t name_end = theirs.find('\0', at), value_end = theirs.find('\0', name_end + 1);
    zero.emplace_back(theirs.substr(at, name_end - at),
                      theirs.substr(name_end + 1, value_end - name_end - 1));
    at = value_end + 1;
  }
  // The first field that differs from process 0's (a missing one counts as "none").
  std::string difference;
  for (std::size_t i = 0; difference.empty() && i < std::max(fields.size(), zero.size()); ++i) {
    const auto& here = i < fields.size() ? fields[i] : std::pair<std::string, std::string>{};
    const auto& there = i < zero.size() ? zero[i] : std::pair<std::string, std::string>{};
    if (here == there) continue;
    const std::string& name = here.first.empty() ? there.first : here.first;
    difference = name + " is " + (here.first == name ? here.second : "none") + " here, " +
                 (there.first == name ? there.second : "none") + " on process 0";
  }
  on_every_process(comm, [&] {
    if (!difference.empty()) {
      throw InvalidArgument(what + " differ between processes: " + difference +
                            " (every process must be given the same)");
    }
  });
}

}  // namespace tenfold::mpi

namespace tenfold::mpi::detail {

template <class T>
void allgather_rows(CommStats& stats, const std::string& phase, MPI_Comm fibre,
                    std::span<const index_t> bounds, index_t cols, T* out) {
  const int parts = comm_size(fibre);
  int me = 0;
  MPI_Comm_rank(fibre, &me);
  const auto begin = [&](int q) { return bounds[static_cast<std::size_t>(q)]; };
  count(stats, phase, fibre, (begin(me + 1) - begin(me)) * cols);
  if (parts == 1) return;
  // One row of `out` (cols entries, stride total) as one unit of extent one entry, so
  // that process q's rows_q units land at row begin_q, straight in place.
  MPI_Datatype strided = MPI_DATATYPE_NULL, row = MPI_DATATYPE_NULL;
  MPI_Type_vector(checked_count(cols, phase.c_str()), 1,
                  checked_count(bounds.back(), phase.c_str()), datatype<T>(), &strided);
  MPI_Type_create_resized(strided, 0, sizeof(T), &row);
  MPI_Type_commit(&row);
  std::vector<int> counts(static_cast<std::size_t>(parts)), displs(static_cast<std::size_t>(parts));
  for (int q = 0; q < parts; ++q) {
    counts[static_cast<std::size_t>(q)] = checked_count(begin(q + 1) - begin(q), phase.c_str());
    displs[static_cast<std::size_t>(q)] = checked_count(begin(q), phase.c_str());
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, counts.data(), displs.data(), row, fibre);
  MPI_Type_free(&row);
  MPI_Type_free(&strided);
}

template void allgather_rows<float>(CommStats&, const std::string&, MPI_Comm,
                                    std::span<const index_t>, index_t, float*);
template std::string fingerprint<float>(const Matrix<float>&);
template std::string fingerprint<double>(const Matrix<double>&);
template void allgather_rows<double>(CommStats&, const std::string&, MPI_Comm,
                                     std::span<const index_t>, index_t, double*);

}  // namespace tenfold::mpi::detail
