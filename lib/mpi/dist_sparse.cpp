// Distributed sparse tensors: the medium-grained distribution (SPLATT), the collective
// reading of .tns and .tfsparse files (each process its share of the file), and the
// mode Gram.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "mpi/comm.hpp"
#include "mpi/dist_operand.hpp"
#include "sparse/sparse_operand.hpp"
#include "sparse/sparse_read.hpp"
#include "tenfold/error.hpp"

namespace tenfold::mpi {

using io::detail::quoted;

namespace detail {
namespace {

// Sends entry k (coords mode-major, N x nnz, and values) to process dest[k] of comm, and
// replaces the entries by those received: by sending rank, each sender's in its order.
// Counted in `phase` as the indices and values sent to other processes.
template <class T>
void exchange_entries(CommStats& stats, const std::string& phase, MPI_Comm comm,
                      const std::vector<int>& dest, std::size_t order, std::vector<index_t>& coords,
                      std::vector<T>& values) {
  const int p = comm_size(comm);
  int me = 0;
  MPI_Comm_rank(comm, &me);
  const std::size_t nnz = values.size(), ps = static_cast<std::size_t>(p);
  std::vector<int> send(ps, 0), recv(ps, 0), send_at(ps, 0), recv_at(ps, 0);
  for (int d : dest) ++send[static_cast<std::size_t>(d)];
  MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, comm);
  index_t received = 0;
  std::vector<index_t> next(ps, 0);  // the next place of each destination's entries
  for (std::size_t q = 0, sent = 0; q < ps; ++q) {
    send_at[q] = checked_count(static_cast<index_t>(sent), phase.c_str());
    recv_at[q] = checked_count(received, phase.c_str());
    next[q] = static_cast<index_t>(sent);
    sent += static_cast<std::size_t>(send[q]);
    received += recv[q];
  }
  count(stats, phase, comm,
        static_cast<index_t>(nnz - static_cast<std::size_t>(send[static_cast<std::size_t>(me)])) *
            static_cast<index_t>(order + 1));
  // Each array packed by destination (stable), exchanged, and its old copy dropped.
  std::vector<index_t> place(nnz);
  for (std::size_t k = 0; k < nnz; ++k) place[k] = next[static_cast<std::size_t>(dest[k])]++;
  const auto exchange = [&](const auto* from, auto* to, MPI_Datatype type) {
    std::vector<std::remove_const_t<std::remove_pointer_t<decltype(from)>>> packed(nnz);
    for (std::size_t k = 0; k < nnz; ++k) packed[static_cast<std::size_t>(place[k])] = from[k];
    MPI_Alltoallv(packed.data(), send.data(), send_at.data(), type, to, recv.data(), recv_at.data(),
                  type, comm);
  };
  const auto got = static_cast<std::size_t>(received);
  std::vector<index_t> new_coords(order * got);
  for (std::size_t n = 0; n < order; ++n)
    exchange(coords.data() + n * nnz, new_coords.data() + n * got, MPI_INT64_T);
  std::vector<index_t>().swap(coords);
  std::vector<T> new_values(got);
  exchange(values.data(), new_values.data(), datatype<T>());
  coords = std::move(new_coords);
  values = std::move(new_values);
}

// The P_n + 1 boundaries of `parts` ranges of indices with about equal nonzeros: b_p is
// the index whose prefix count sum_{i < b_p} c_i is nearest p/P_n of all, each range
// kept non-empty.
std::vector<index_t> balanced_bounds(const std::vector<std::int64_t>& counts, int parts) {
  const auto size = static_cast<index_t>(counts.size());
  const long double total = std::accumulate(counts.begin(), counts.end(), 0.0L);
  std::vector<index_t> b(static_cast<std::size_t>(parts) + 1, size);
  b[0] = 0;
  index_t i = 0;
  long double prefix = 0;  // sum of counts[< i]
  for (int p = 1; p < parts; ++p) {
    const long double target = total * p / parts;
    while (i < size && prefix + counts[static_cast<std::size_t>(i)] <= target)
      prefix += counts[static_cast<std::size_t>(i++)];
    if (i < size && target - prefix > prefix + counts[static_cast<std::size_t>(i)] - target)
      prefix += counts[static_cast<std::size_t>(i++)];
    const index_t want = std::clamp(i, b[static_cast<std::size_t>(p) - 1] + 1, size - (parts - p));
    for (; i < want; ++i) prefix += counts[static_cast<std::size_t>(i)];
    for (; i > want; --i) prefix -= counts[static_cast<std::size_t>(i) - 1];
    b[static_cast<std::size_t>(p)] = i;
  }
  return b;
}

// "entry k has index i in mode n ..." for the first entry out of range or not finite, k
// counted from first_entry.
template <class T>
void check_entries(const std::vector<index_t>& dims, const std::vector<index_t>& coords,
                   const std::vector<T>& values, index_t first_entry) {
  const std::size_t nnz = values.size();
  for (std::size_t n = 0; n < dims.size(); ++n) {
    for (std::size_t k = 0; k < nnz; ++k) {
      const index_t i = coords[n * nnz + k];
      if (i < 0 || i >= dims[n]) {
        throw InvalidArgument("entry " + std::to_string(first_entry + static_cast<index_t>(k)) +
                              " has index " + std::to_string(i) + " in mode " + std::to_string(n) +
                              " (NumPy axis " + std::to_string(n) + "), outside [0, " +
                              std::to_string(dims[n]) + ")");
      }
    }
  }
  for (std::size_t k = 0; k < nnz; ++k) {
    if (!std::isfinite(values[k])) {
      throw InvalidArgument("entry " + std::to_string(first_entry + static_cast<index_t>(k)) +
                            " has a non-finite value (" + (std::isnan(values[k]) ? "NaN" : "Inf") +
                            ")");
    }
  }
}

}  // namespace

template <class T>
void distributed_mode_gram(const DistSparseTensor<T>& x, const SparseTensor<T>& block, int n,
                           T* out) {
  const ProcessGrid& grid = *x.grid;
  const auto ni = static_cast<std::size_t>(n), order = static_cast<std::size_t>(x.order());
  const int parts = grid.shape()[ni];
  const index_t in = x.dims[ni];
  const auto nnz = static_cast<std::size_t>(block.nnz());
  // The block's entries with their global mode-n indices; the other indices are local,
  // and the same along the fibre (its blocks share their ranges in the other modes).
  std::vector<index_t> coords = block.coords();
  std::vector<T> values = block.values();
  for (std::size_t k = 0; k < nnz; ++k) coords[ni * nnz + k] += x.offsets[ni];
  if (parts > 1) {
    // Column c of X_(n) (its indices in the other modes) to fibre process hash(c) mod P_n,
    // so that every column's entries meet on one process.
    std::vector<int> dest(nnz);
    for (std::size_t k = 0; k < nnz; ++k) {
      std::uint64_t h = 0x9E3779B97F4A7C15ull;
      for (std::size_t m = 0; m < order; ++m)
        if (m != ni) h = (h ^ static_cast<std::uint64_t>(coords[m * nnz + k])) * 0x100000001b3ull;
      dest[k] = static_cast<int>((h ^ (h >> 29)) % static_cast<std::uint64_t>(parts));
    }
    exchange_entries(*x.stats, "gram", grid.fibre(n), dest, order, coords, values);
  }
  // G_p = sum over this process's columns c of x_c x_c^T
  std::vector<index_t> dims = block.dims();
  dims[ni] = in;
  tenfold::detail::sparse_mode_gram(SparseTensor<T>(dims, std::move(coords), std::move(values)), n,
                                    out);
  // G = sum over all processes (every column lies on exactly one)
  allreduce_sum(*x.stats, "gram", grid.comm(), out, in * in);
}

template void distributed_mode_gram<float>(const DistSparseTensor<float>&,
                                           const SparseTensor<float>&, int, float*);
template void distributed_mode_gram<double>(const DistSparseTensor<double>&,
                                            const SparseTensor<double>&, int, double*);

}  // namespace detail

template <class T>
DistSparseTensor<T> distribute(MPI_Comm comm, std::vector<index_t> dims,
                               std::vector<index_t> coords, std::vector<T> values,
                               std::vector<int> grid_shape) {
  DistSparseTensor<T> x;
  x.grid = std::make_shared<const ProcessGrid>(comm, dims, std::move(grid_shape));
  const ProcessGrid& grid = *x.grid;
  const std::size_t order = dims.size(), nnz = values.size();
  long long first = 0, mine = static_cast<long long>(nnz);
  MPI_Exscan(&mine, &first, 1, MPI_LONG_LONG, MPI_SUM, grid.comm());
  if (grid.rank() == 0) first = 0;
  on_every_process(grid.comm(), [&] {
    if (coords.size() != order * nnz) {
      throw DimensionMismatch("distribute: " + std::to_string(nnz) + " values need " +
                              std::to_string(order) + " x " + std::to_string(nnz) +
                              " coordinates, got " + std::to_string(coords.size()));
    }
    detail::check_entries(dims, coords, values, first);
  });
  // Per axis: the nonzeros of each index, summed over the grid, cut into P_n ranges of
  // about equal nonzeros.
  std::vector<int> part(order);  // stride of each axis in a block number (axis 0 fastest)
  for (std::size_t n = 0; n < order; ++n) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(dims[n]), 0);
    for (std::size_t k = 0; k < nnz; ++k) ++counts[static_cast<std::size_t>(coords[n * nnz + k])];
    detail::count(*x.stats, "distribute", grid.comm(), dims[n]);
    MPI_Allreduce(MPI_IN_PLACE, counts.data(), detail::checked_count(dims[n], "distribute"),
                  MPI_INT64_T, MPI_SUM, grid.comm());
    x.bounds.push_back(detail::balanced_bounds(counts, grid.shape()[n]));
    part[n] = n == 0 ? 1 : part[n - 1] * grid.shape()[n - 1];
  }
  // The process of each block (its grid coordinates, axis 0 fastest), then of each entry.
  std::vector<int> owner(static_cast<std::size_t>(grid.size()));
  for (int b = 0; b < grid.size(); ++b) {
    std::vector<int> c(order);
    for (std::size_t n = 0; n < order; ++n) c[n] = b / part[n] % grid.shape()[n];
    MPI_Cart_rank(grid.comm(), c.data(), &owner[static_cast<std::size_t>(b)]);
  }
  std::vector<int> dest(nnz);
  for (std::size_t k = 0; k < nnz; ++k) {
    int b = 0;
    for (std::size_t n = 0; n < order; ++n) {
      const auto& bn = x.bounds[n];
      const auto p = std::upper_bound(bn.begin(), bn.end(), coords[n * nnz + k]) - bn.begin() - 1;
      b += static_cast<int>(p) * part[n];
    }
    dest[k] = owner[static_cast<std::size_t>(b)];
  }
  detail::exchange_entries(*x.stats, "distribute", grid.comm(), dest, order, coords, values);
  std::vector<int>().swap(dest);
  // Local indices in the block [offset_n, offset_n + size_n) of every axis.
  const std::size_t got = values.size();
  std::vector<index_t> local_dims(order);
  for (std::size_t n = 0; n < order; ++n) {
    const auto c = static_cast<std::size_t>(grid.coords()[n]);
    x.offsets.push_back(x.bounds[n][c]);
    local_dims[n] = x.bounds[n][c + 1] - x.bounds[n][c];
    for (std::size_t k = 0; k < got; ++k) coords[n * got + k] -= x.offsets[n];
  }
  x.dims = std::move(dims);
  // Duplicates (from anywhere in the input) meet here and are summed.
  on_every_process(grid.comm(), [&] {
    x.local = SparseTensor<T>(std::move(local_dims), std::move(coords), std::move(values));
  });
  long long total = x.local.nnz();
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG_LONG, MPI_SUM, grid.comm());
  x.nnz = total;
  return x;
}

template <class T>
DistSparseTensor<T> read_sparse(MPI_Comm comm, const std::filesystem::path& path,
                                std::vector<int> grid_shape, const std::vector<index_t>& shape) {
  int p = 1, rank = 0;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &rank);
  const bool text = io::detail::ends_with(path, ".tns");
  io::detail::TnsLayout layout;
  io::detail::SparseFileHeader header;
  // Every process reads what precedes the entries, and all must find the same.
  on_every_process(comm, [&] {
    if (io::detail::ends_with(path, ".tns.gz")) {
      throw IoError(quoted(path) +
                    ": a gzip file cannot be read in parts by the processes of an MPI job; "
                    "gunzip it first");
    }
    if (text) {
      layout = io::detail::read_tns_layout(path, shape);
    } else if (io::detail::ends_with(path, ".tfsparse")) {
      header = io::detail::read_sparse_header(path);
      if (!shape.empty() && shape != header.dims) {
        throw IoError(quoted(path) + " holds a tensor of shape " +
                      tenfold::detail::shape_string(header.dims) + ", not the shape given " +
                      tenfold::detail::shape_string(shape));
      }
    } else {
      throw IoError("cannot tell the format of " + quoted(path) +
                    " (sparse tensor files end in .tns or .tfsparse)");
    }
  });
  check_same(comm, "the headers of " + quoted(path),
             text ? Fields{{"order", std::to_string(layout.order)},
                           {"shape", tenfold::detail::shape_string(layout.dims)},
                           {"bytes", std::to_string(layout.bytes)}}
                  : Fields{{"order", std::to_string(header.order)},
                           {"shape", tenfold::detail::shape_string(header.dims)},
                           {"nnz", std::to_string(header.nnz)},
                           {"value bytes", std::to_string(header.value_bytes)}});
  std::vector<index_t> coords, dims;
  std::vector<T> values;
  if (text) {
    // This process's lines: those that start in its 1/P of the bytes, numbered after the
    // lines of the processes before it.
    const Range r = block_range(static_cast<index_t>(layout.bytes), p, rank);
    const io::detail::ByteRange bytes{static_cast<std::uint64_t>(r.begin),
                                      static_cast<std::uint64_t>(r.begin + r.size)};
    io::detail::LineCount lines;
    on_every_process(comm, [&] { lines = io::detail::count_tns_lines(path, bytes); });
    unsigned long long before = 0, mine = lines.lines;
    MPI_Exscan(&mine, &before, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
    if (rank == 0) before = 0;
    const auto order = static_cast<std::size_t>(layout.order);
    const auto nnz = static_cast<std::size_t>(lines.entries);
    std::vector<index_t> largest(order, 0);
    on_every_process(comm, [&] {
      coords.resize(order * nnz);
      values.resize(nnz);
      std::vector<index_t*> idx(order);
      for (std::size_t n = 0; n < order; ++n) idx[n] = coords.data() + n * nnz;
      if (io::detail::parse_tns_lines<T>(path, layout, bytes, before + 1, idx, values.data(), nnz,
                                         largest) != nnz)
        throw IoError(quoted(path) + " changed while it was being read");
    });
    // The shape given or declared, else the largest index of each mode over all processes.
    dims = layout.dims;
    if (dims.empty()) {
      dims = largest;
      MPI_Allreduce(MPI_IN_PLACE, dims.data(), static_cast<int>(order), MPI_INT64_T, MPI_MAX, comm);
    }
  } else {
    // This process's entries [e0, e1) of the file's nnz.
    const Range r = block_range(header.nnz, p, rank);
    dims = header.dims;
    on_every_process(comm, [&] {
      io::detail::read_sparse_entries<T>(path, header, r.begin, r.begin + r.size, coords, values);
      try {
        detail::check_entries(dims, coords, values, r.begin);
      } catch (const InvalidArgument& e) {
        throw IoError(quoted(path) + ": " + e.what());
      }
    });
  }
  return distribute<T>(comm, std::move(dims), std::move(coords), std::move(values),
                       std::move(grid_shape));
}

#define TENFOLD_INSTANTIATE_DIST_SPARSE(T)                                                         \
  template DistSparseTensor<T> distribute<T>(MPI_Comm, std::vector<index_t>, std::vector<index_t>, \
                                             std::vector<T>, std::vector<int>);                    \
  template DistSparseTensor<T> read_sparse<T>(MPI_Comm, const std::filesystem::path&,              \
                                              std::vector<int>, const std::vector<index_t>&);
TENFOLD_INSTANTIATE_DIST_SPARSE(float)
TENFOLD_INSTANTIATE_DIST_SPARSE(double)

}  // namespace tenfold::mpi
