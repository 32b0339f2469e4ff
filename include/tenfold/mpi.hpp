// Distributed dense and sparse tensors and decompositions over MPI (the tenfold::mpi
// component, libtenfold_mpi). See docs/distributed.md.
//
// A tensor of NumPy shape (I_0, ..., I_{N-1}) is cut into blocks over a Cartesian grid
// of P_0 x ... x P_{N-1} processes: along axis n, the I_n indices are split into P_n
// contiguous ranges, the first I_n mod P_n of them one longer. Each process holds its
// block as a column-major (axis 0 fastest) tensor, and nothing else of the tensor.
// Every function here is collective over the grid's communicator: all processes call
// it with the same arguments; an error found on any process is thrown, with the same
// message, on every process, and so are arguments that differ between processes
// (shapes, element type, grid, options, initial factors): an error, never a hang or a
// silently mixed result.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tenfold/cp.hpp"
#include "tenfold/export.hpp"
#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/tensor.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::mpi {

/// Collective calls and elements (T entries, or doubles for norms) a process passed to
/// MPI in one phase of a computation, summed over the phase.
struct TENFOLD_API CommCount {
  std::int64_t calls = 0;     ///< collective calls on communicators of two or more processes
  std::int64_t elements = 0;  ///< elements this process contributed to those calls
};

/// Per-phase communication of this process, e.g. {"read", ...}, {"mttkrp", ...}.
using CommStats = std::map<std::string, CommCount>;

/// Runs f on every process of comm; when it throws on any, every process throws the
/// error of the lowest failing rank ("process 3: ..." with two or more processes; IoError,
/// DimensionMismatch, InvalidArgument, NumericalError and MemoryError as themselves,
/// anything else as Error), so that no process is left waiting in a later collective
/// call for one that gave up. Collective: for a program's own checks (files, arguments)
/// before it calls the functions below.
TENFOLD_API void on_every_process(MPI_Comm comm, const std::function<void()>& f);

/// Named values that every process of a communicator must hold alike, e.g.
/// {{"shape", "(4, 5)"}, {"rank", "3"}}.
using Fields = std::vector<std::pair<std::string, std::string>>;

/// Throws InvalidArgument on every process unless `fields` are the same (names, values,
/// count) on every process of comm, naming `what`, the first field that differs, its value
/// on the lowest process that disagrees with process 0 and on process 0: "process 1: the
/// arguments of cp_als differ between processes: rank is 3 here, 2 on process 0 (every
/// process must be given the same)". Collective; never throws before its collective calls.
TENFOLD_API void check_same(MPI_Comm comm, const std::string& what, const Fields& fields);

/// The automatic grid for `processes` processes and a tensor of these sizes: the prime
/// factors of `processes`, largest first, each given to the axis with the largest
/// local size I_n / P_n that can still take it (P_n times the factor at most I_n),
/// ties to the lower axis. Throws InvalidArgument when no axis can take a factor (every
/// process must hold a non-empty block).
TENFOLD_API std::vector<int> choose_grid(int processes, const std::vector<index_t>& dims);

/// Start and length of part p of `size` indices split into `parts` ranges.
struct TENFOLD_API Range {
  index_t begin = 0;
  index_t size = 0;
};
TENFOLD_API Range block_range(index_t size, int parts, int p);

/// A Cartesian grid of processes with one sub-communicator per axis: fibre(n) joins
/// the P_n processes that differ only in coordinate n, slice(n) the P / P_n processes
/// that share coordinate n.
class TENFOLD_API ProcessGrid {
 public:
  /// shape: P_0 x ... x P_{N-1} with product the size of `comm` (empty: choose_grid of
  /// `dims`). Collective. Throws InvalidArgument on every process when `dims` or `shape`
  /// differ between processes (check_same), or when the shape does not fit the
  /// communicator or the tensor (P_n > I_n would leave a process without a block).
  ProcessGrid(MPI_Comm comm, const std::vector<index_t>& dims, std::vector<int> shape = {});
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  int order() const { return static_cast<int>(shape_.size()); }
  int size() const { return size_; }
  int rank() const { return rank_; }
  const std::vector<int>& shape() const { return shape_; }
  const std::vector<int>& coords() const { return coords_; }
  MPI_Comm comm() const { return cart_; }
  MPI_Comm fibre(int n) const { return fibres_[static_cast<std::size_t>(n)]; }
  MPI_Comm slice(int n) const { return slices_[static_cast<std::size_t>(n)]; }
  /// This process's range of a mode of `size` indices along axis n.
  Range range(int n, index_t size) const {
    return block_range(size, shape_[static_cast<std::size_t>(n)],
                       coords_[static_cast<std::size_t>(n)]);
  }

 private:
  std::vector<int> shape_, coords_;
  int size_ = 1, rank_ = 0;
  MPI_Comm cart_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> fibres_, slices_;
};

/// A block-distributed dense tensor in NumPy axis order.
template <class T>
struct TENFOLD_API DistTensor {
  std::shared_ptr<const ProcessGrid> grid;
  std::vector<index_t> dims;     ///< global sizes (NumPy shape)
  std::vector<index_t> offsets;  ///< where this process's block starts, per axis
  Tensor<T> local;               ///< this process's block, axis 0 fastest
  /// Communication so far (reading, and the decompositions run on this tensor).
  std::shared_ptr<CommStats> stats = std::make_shared<CommStats>();

  int order() const { return static_cast<int>(dims.size()); }
  /// The block of a tensor of sizes `global` on this process's grid position.
  static DistTensor make(std::shared_ptr<const ProcessGrid> grid, std::vector<index_t> global);
};

/// The header of a .npy file, parsed by every process of comm: an error on any process
/// (it cannot open the file, a bad or truncated file) is thrown on every process, and so
/// is a header that differs between processes (another file: dtype, memory order, shape
/// or header length; check_same). Files that differ only in their values (node-local
/// copies) are not told apart.
TENFOLD_API io::NpyHeader read_npy_header(MPI_Comm comm, const std::filesystem::path& path);

/// Reads a .npy file (float32 or float64, C or Fortran order, converted to T) with
/// MPI-IO: each process reads only its own block. grid_shape empty: choose_grid.
/// Throws (on every process) IoError when a process cannot open or read the file,
/// InvalidArgument for a grid that does not fit, or for a header, T or grid_shape that
/// differs between processes (read_npy_header, check_same).
template <class T>
TENFOLD_API DistTensor<T> read_npy(MPI_Comm comm, const std::filesystem::path& path,
                                   std::vector<int> grid_shape = {});

/// Writes the tensor as one Fortran-order .npy file (opened and closed collectively, each
/// process writing its own block through an MPI-IO file view); the file appears whole (renamed into
/// place after every block is written) or not at all. Throws IoError on every process when any
/// write fails.
template <class T>
TENFOLD_API void write_npy(const std::filesystem::path& path, const DistTensor<T>& x);

/// All entries of x on every process (for small tensors: Tucker cores, tests).
template <class T>
TENFOLD_API Tensor<T> gather(const DistTensor<T>& x);

/// CP-ALS of the distributed tensor: the library's ALS loop over an operand whose
/// MTTKRP is the local one (dimension tree) on the block followed by a sum within the
/// slice of each mode and an all-gather within its fibre; the factors (I_n x R) are
/// replicated, so every process solves the same R x R systems. The start does not
/// depend on the grid (random factors drawn for the global sizes; nvecs from the
/// distributed mode Grams), so the result equals cp_als of the whole tensor (with
/// layout col_major on its Fortran-order copy) up to rounding. options.layout and
/// options.backend must keep their defaults (cpu); the factors (the initial ones too) are
/// per NumPy axis. options.callback is called on every process that has one; the run
/// stops on every process when it returns false on any, and its exception is thrown on
/// every process.
template <class T>
TENFOLD_API CpResult<T> cp_als(const DistTensor<T>& x, const CpOptions& options,
                               CpStart<T> initial_factors = {});

/// Tucker decomposition of the distributed tensor (all three methods, ranks or eps as in
/// tucker()): mode Grams from a redistribution within the mode's fibre (each process then
/// holds whole mode-n rows of some columns), a local syrk and a sum over the grid, the
/// eigenvalue truncation replicated, each tensor-times-matrix product local
/// then reduce-scattered within the mode's fibre (ranks below the grid size leave some
/// blocks empty). The eps guarantee ||X - X^|| <= eps ||X|| holds as in the serial
/// call. The core is gathered on every process (it is small); equal to tucker() of the
/// whole tensor (layout col_major) up to rounding. layout and backend keep their
/// defaults.
template <class T>
TENFOLD_API TuckerResult<T> tucker(const DistTensor<T>& x, const TuckerOptions& options);

/// out (I_n x I_n, on every process) = X_(n) X_(n)^T of the distributed tensor.
template <class T>
TENFOLD_API Matrix<T> mode_gram(const DistTensor<T>& x, int n);

/// A sparse tensor distributed over a process grid, medium-grained (as SPLATT): along axis
/// n the indices are cut into P_n contiguous ranges holding about equal numbers of
/// nonzeros (unlike a DistTensor's equal ranges), and each process holds the entries of its
/// block, the product of the ranges of its grid coordinates, with indices local to it.
template <class T>
struct TENFOLD_API DistSparseTensor {
  std::shared_ptr<const ProcessGrid> grid;
  std::vector<index_t> dims;                 ///< global sizes
  std::vector<std::vector<index_t>> bounds;  ///< per axis the P_n + 1 boundaries of the ranges
  std::vector<index_t> offsets;              ///< where this process's block starts, per axis
  SparseTensor<T> local;                     ///< this block: local indices, its ranges' sizes
  index_t nnz = 0;                           ///< stored entries over all processes
  /// Communication so far (distributing, and the decompositions run on this tensor).
  std::shared_ptr<CommStats> stats = std::make_shared<CommStats>();

  int order() const { return static_cast<int>(dims.size()); }
};

/// Distributes entries that the processes of comm hold, any share each (coords mode-major,
/// N x nnz, 0-based global indices; sizes `dims` on every process): the nonzeros per index
/// of each axis are summed over the processes and cut into balanced ranges, then every
/// entry is sent to the process of its block (one all-to-all). Duplicates are summed and
/// zeros dropped as by SparseTensor. grid_shape empty: choose_grid. Throws (on every
/// process) InvalidArgument for an entry out of range or not finite (numbered across the
/// processes in rank order), or a grid that does not fit (as ProcessGrid).
template <class T>
TENFOLD_API DistSparseTensor<T> distribute(MPI_Comm comm, std::vector<index_t> dims,
                                           std::vector<index_t> coords, std::vector<T> values,
                                           std::vector<int> grid_shape = {});

/// Reads a sparse tensor file, each process only its share, then distributes it: a .tns
/// file by byte ranges (process p parses the lines that start in its 1/P of the bytes,
/// line numbers in errors counted across the processes), a .tfsparse file by ranges of
/// entries. shape: as for io::load_sparse_file. Errors, on every process with the message of
/// the lowest failing one: those of the serial readers (IoError naming the file and
/// line), a .tns.gz file (gzip cannot be read in parts), and those of distribute.
template <class T>
TENFOLD_API DistSparseTensor<T> read_sparse(MPI_Comm comm, const std::filesystem::path& path,
                                            std::vector<int> grid_shape = {},
                                            const std::vector<index_t>& shape = {});

/// The CSF layout sparse.csf resolves to, alike on every process: a named layout as it is;
/// automatic, the first of all, two and one whose trees fit on every process, each
/// process's choice by tenfold::csf_layout_for of its block (`taken` when the layout
/// is for cp_als(std::move(x), ...)). Collective.
template <class T>
TENFOLD_API CsfLayout csf_layout_for(const DistSparseTensor<T>& x, const SparseCpOptions& sparse,
                                     bool taken = false);

/// CP-ALS of the distributed sparse tensor: as cp_als of a DistTensor, the local MTTKRP on
/// the block's CSF trees (csf_layout_for). Mode Grams (nvecs) redistribute each fibre's
/// entries by column. Equals cp_als of the whole SparseTensor up to rounding.
template <class T>
TENFOLD_API CpResult<T> cp_als(const DistSparseTensor<T>& x, const CpOptions& options,
                               CpStart<T> initial_factors = {}, const SparseCpOptions& sparse = {});

/// The same, taking the block's entries: x.local is released once the CSF trees are built
/// (the trees hold every entry, so the block is not held twice during the iterations; a
/// process's peak memory falls by the block, 8 (N + 1) bytes per nonzero in double). x keeps its
/// grid, sizes, ranges, nnz and communication counts; x.local is left empty. Where the
/// call throws before the trees are built (arguments, memory), x is unchanged.
template <class T>
TENFOLD_API CpResult<T> cp_als(DistSparseTensor<T>&& x, const CpOptions& options,
                               CpStart<T> initial_factors = {}, const SparseCpOptions& sparse = {});

}  // namespace tenfold::mpi
