// Block-distributed dense tensors: collective .npy reading and writing with MPI-IO
// (each process touches only its block), and gathering small tensors.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "core/layout.hpp"
#include "io/npy.hpp"
#include "mpi/comm.hpp"
#include "tenfold/error.hpp"
#include "tenfold/mpi.hpp"

namespace tenfold::mpi {
namespace {

using detail::checked_count;

// A file view selecting one block of a global array (count elements of etype), or
// nothing for an empty block.
struct BlockType {
  BlockType(MPI_Datatype etype, const std::vector<index_t>& global,
            const std::vector<index_t>& offsets, const std::vector<index_t>& sizes, int order) {
    index_t n = 1;
    for (index_t s : sizes) n *= s;
    count = checked_count(n, "block of the distributed tensor");
    if (n == 0) {
      MPI_Type_contiguous(0, etype, &type);
    } else {
      std::vector<int> g, o, s;
      for (std::size_t i = 0; i < global.size(); ++i) {
        g.push_back(checked_count(global[i], "axis size"));
        o.push_back(static_cast<int>(offsets[i]));
        s.push_back(static_cast<int>(sizes[i]));
      }
      MPI_Type_create_subarray(static_cast<int>(g.size()), g.data(), s.data(), o.data(), order,
                               etype, &type);
    }
    MPI_Type_commit(&type);
  }
  ~BlockType() { MPI_Type_free(&type); }
  BlockType(const BlockType&) = delete;
  BlockType& operator=(const BlockType&) = delete;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 0;
};

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

void check_mpi(int code, const std::string& what) {
  if (code != MPI_SUCCESS) throw IoError(what + ": " + mpi_error(code));
}

// File-order entries of type F converted to T.
template <class T, class F>
void convert(const std::vector<char>& raw, std::vector<T>& out) {
  const F* f = reinterpret_cast<const F*>(raw.data());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(f[i]);
}

}  // namespace

template <class T>
DistTensor<T> DistTensor<T>::make(std::shared_ptr<const ProcessGrid> grid,
                                  std::vector<index_t> global) {
  DistTensor<T> x;
  std::vector<index_t> sizes;
  for (int n = 0; n < static_cast<int>(global.size()); ++n) {
    const Range r = grid->range(n, global[static_cast<std::size_t>(n)]);
    x.offsets.push_back(r.begin);
    sizes.push_back(r.size);
  }
  x.grid = std::move(grid);
  x.dims = std::move(global);
  x.local = Tensor<T>(std::move(sizes));
  return x;
}

io::NpyHeader read_npy_header(MPI_Comm comm, const std::filesystem::path& path) {
  io::NpyHeader h;
  on_every_process(comm, [&] { h = io::read_npy_header(path); });
  // Everything the block reads depend on: a process with another file (a float32 copy,
  // another shape or order) would read its block at the wrong place or size.
  check_same(comm, "the headers of '" + path.string() + "'",
             {{"dtype", h.dtype == io::DType::float32 ? "float32" : "float64"},
              {"memory order", h.fortran_order ? "Fortran" : "C"},
              {"shape", tenfold::detail::shape_string(h.shape)},
              {"data offset", std::to_string(h.data_offset)}});
  return h;
}

template <class T>
DistTensor<T> read_npy(MPI_Comm comm, const std::filesystem::path& path,
                       std::vector<int> grid_shape) {
  check_same(comm, "the arguments of read_npy",
             {{"element type", sizeof(T) == 4 ? "float32" : "float64"}});
  const io::NpyHeader h = read_npy_header(comm, path);
  if (h.shape.empty())
    throw InvalidArgument("'" + path.string() + "' holds a scalar, not a tensor");
  auto grid = std::make_shared<const ProcessGrid>(comm, h.shape, std::move(grid_shape));
  const bool f32 = h.dtype == io::DType::float32;
  const bool same = (sizeof(T) == 4) == f32;
  // The block, and a buffer of the file's type when that is not T (a process short of
  // memory fails every process).
  DistTensor<T> x;
  std::vector<char> raw;
  on_every_process(grid->comm(), [&] {
    x = DistTensor<T>::make(grid, h.shape);
    if (!same) raw.resize(static_cast<std::size_t>(x.local.numel()) * (f32 ? 4 : 8));
  });
  const MPI_Datatype etype = f32 ? MPI_FLOAT : MPI_DOUBLE;
  // A C-order file is read as its reversed Fortran array: the block of the reversed
  // axes, then transposed in memory to axis 0 fastest.
  std::vector<index_t> global = h.shape, offsets = x.offsets, sizes = x.local.dims();
  if (!h.fortran_order) {
    std::reverse(global.begin(), global.end());
    std::reverse(offsets.begin(), offsets.end());
    std::reverse(sizes.begin(), sizes.end());
  }
  const BlockType block(etype, global, offsets, sizes, MPI_ORDER_FORTRAN);
  // Read straight into the block when the file holds T, else through a buffer of the
  // file's type.
  std::vector<T>& values = x.local.values();
  void* target = same ? static_cast<void*>(values.data()) : static_cast<void*>(raw.data());
  MPI_File file = MPI_FILE_NULL;
  const int opened =
      MPI_File_open(grid->comm(), path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &file);
  on_every_process(grid->comm(), [&] { check_mpi(opened, "cannot open '" + path.string() + "'"); });
  int rc = MPI_File_set_view(file, static_cast<MPI_Offset>(h.data_offset), etype, block.type,
                             "native", MPI_INFO_NULL);
  MPI_Status status;
  if (rc == MPI_SUCCESS) rc = MPI_File_read_all(file, target, block.count, etype, &status);
  int got = 0;
  if (rc == MPI_SUCCESS) MPI_Get_count(&status, etype, &got);
  MPI_File_close(&file);
  on_every_process(grid->comm(), [&] {
    check_mpi(rc, "reading '" + path.string() + "'");
    if (got != block.count) {
      throw IoError("reading '" + path.string() + "': got " + std::to_string(got) + " of " +
                    std::to_string(block.count) + " entries of this process's block");
    }
  });
  detail::count(*x.stats, "read", grid->comm(), x.local.numel());
  if (!same) {
    if (f32) {
      convert<T, float>(raw, values);
    } else {
      convert<T, double>(raw, values);
    }
    std::vector<char>().swap(raw);
  }
  if (!h.fortran_order) {
    const Tensor<T> c_block(std::move(sizes), std::move(values));
    x.local = tenfold::detail::reverse_modes(c_block.view());
  }
  return x;
}

template <class T>
void write_npy(const std::filesystem::path& path, const DistTensor<T>& x) {
  const ProcessGrid& grid = *x.grid;
  MPI_Comm comm = grid.comm();
  check_same(comm, "the arguments of write_npy",
             {{"path", path.string()},
              {"element type", sizeof(T) == 4 ? "float32" : "float64"},
              {"shape", tenfold::detail::shape_string(x.dims)}});
  const io::DType dtype = sizeof(T) == 4 ? io::DType::float32 : io::DType::float64;
  const std::string header = io::npy_header(dtype, true, x.dims);
  // A hidden temporary beside the target (named by rank 0's clock), renamed at the end.
  long long stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  MPI_Bcast(&stamp, 1, MPI_LONG_LONG, 0, comm);
  const std::filesystem::path tmp =
      path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(stamp));
  const BlockType block(detail::datatype<T>(), x.dims, x.offsets, x.local.dims(),
                        MPI_ORDER_FORTRAN);
  MPI_File file = MPI_FILE_NULL;
  const int opened =
      MPI_File_open(comm, tmp.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
  on_every_process(comm, [&] { check_mpi(opened, "cannot create '" + tmp.string() + "'"); });
  // Each process writes its block through the subarray view (independent writes: Open
  // MPI 4.1's two-phase MPI_File_write_all lost whole blocks here in repeated runs with
  // four processes), then rank 0 the header.
  int rc_write = MPI_File_set_view(file, static_cast<MPI_Offset>(header.size()),
                                   detail::datatype<T>(), block.type, "native", MPI_INFO_NULL);
  MPI_Status status;
  if (rc_write == MPI_SUCCESS) {
    rc_write = MPI_File_write(file, x.local.data(), block.count, detail::datatype<T>(), &status);
  }
  // Back to a byte view from offset 0 (collective) for the header.
  int rc = MPI_File_sync(file);
  if (rc == MPI_SUCCESS)
    rc = MPI_File_set_view(file, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
  MPI_Barrier(comm);
  if (grid.rank() == 0 && rc == MPI_SUCCESS) {
    rc = MPI_File_write_at(file, 0, header.data(), static_cast<int>(header.size()), MPI_CHAR,
                           &status);
  }
  const int rc_close = MPI_File_close(&file);
  detail::count(*x.stats, "write", comm, x.local.numel());
  try {
    on_every_process(comm, [&] {
      check_mpi(rc, "writing the header of '" + path.string() + "'");
      check_mpi(rc_write, "writing '" + path.string() + "'");
      check_mpi(rc_close, "closing '" + path.string() + "'");
    });
    on_every_process(comm, [&] {
      if (grid.rank() == 0) std::filesystem::rename(tmp, path);
    });
  } catch (...) {
    if (grid.rank() == 0) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
    }
    throw;
  }
}

template <class T>
Tensor<T> gather(const DistTensor<T>& x) {
  const ProcessGrid& grid = *x.grid;
  check_same(grid.comm(), "the arguments of gather",
             {{"element type", sizeof(T) == 4 ? "float32" : "float64"},
              {"tensor shape", tenfold::detail::shape_string(x.dims)}});
  const int p = grid.size(), order = x.order();
  // Every process's block, in rank order, then placed by its offsets.
  std::vector<int> counts(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p));
  std::vector<std::vector<int>> coords(static_cast<std::size_t>(p));
  index_t total = 0;
  for (int q = 0; q < p; ++q) {
    auto& c = coords[static_cast<std::size_t>(q)];
    c.resize(static_cast<std::size_t>(order));
    MPI_Cart_coords(grid.comm(), q, order, c.data());
    index_t n = 1;
    for (int m = 0; m < order; ++m)
      n *= block_range(x.dims[static_cast<std::size_t>(m)],
                       grid.shape()[static_cast<std::size_t>(m)], c[static_cast<std::size_t>(m)])
               .size;
    counts[static_cast<std::size_t>(q)] = checked_count(n, "gather");
    displs[static_cast<std::size_t>(q)] = checked_count(total, "gather");
    total += n;
  }
  detail::count(*x.stats, "gather", grid.comm(), x.local.numel());
  std::vector<T> blocks(static_cast<std::size_t>(total));
  MPI_Allgatherv(x.local.data(), checked_count(x.local.numel(), "gather"), detail::datatype<T>(),
                 blocks.data(), counts.data(), displs.data(), detail::datatype<T>(), grid.comm());
  Tensor<T> out(x.dims);
  for (int q = 0; q < p; ++q) {
    std::vector<Range> r;
    for (int m = 0; m < order; ++m)
      r.push_back(block_range(x.dims[static_cast<std::size_t>(m)],
                              grid.shape()[static_cast<std::size_t>(m)],
                              coords[static_cast<std::size_t>(q)][static_cast<std::size_t>(m)]));
    const T* b = blocks.data() + displs[static_cast<std::size_t>(q)];
    // Walk the block's entries (axis 0 fastest) and their global positions.
    std::vector<index_t> idx(static_cast<std::size_t>(order), 0);
    for (int k = 0; k < counts[static_cast<std::size_t>(q)]; ++k) {
      index_t pos = 0, stride = 1;
      for (int m = 0; m < order; ++m) {
        pos += (r[static_cast<std::size_t>(m)].begin + idx[static_cast<std::size_t>(m)]) * stride;
        stride *= x.dims[static_cast<std::size_t>(m)];
      }
      out.data()[pos] = b[k];
      for (int m = 0; m < order; ++m) {
        if (++idx[static_cast<std::size_t>(m)] < r[static_cast<std::size_t>(m)].size) break;
        idx[static_cast<std::size_t>(m)] = 0;
      }
    }
  }
  return out;
}

template struct DistTensor<float>;
template struct DistTensor<double>;
template DistTensor<float> read_npy<float>(MPI_Comm, const std::filesystem::path&,
                                           std::vector<int>);
template DistTensor<double> read_npy<double>(MPI_Comm, const std::filesystem::path&,
                                             std::vector<int>);
template void write_npy<float>(const std::filesystem::path&, const DistTensor<float>&);
template void write_npy<double>(const std::filesystem::path&, const DistTensor<double>&);
template Tensor<float> gather<float>(const DistTensor<float>&);
template Tensor<double> gather<double>(const DistTensor<double>&);

}  // namespace tenfold::mpi
