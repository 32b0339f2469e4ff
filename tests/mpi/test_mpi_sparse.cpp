// Distributed sparse tensors under mpirun: reading .tns and .tfsparse files by shares,
// the nonzero-balanced blocks, CP-ALS against the serial library, and errors raised on
// every process.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "mpi_test_util.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/mpi.hpp"
#include "tenfold/sparse.hpp"

namespace tenfold::test {
namespace {

namespace fs = std::filesystem;

// About `nnz` entries with power-law indices (index i drawn with weight about 1/(i+1)),
// none in the odd slices of mode 0 (empty slices), duplicates summed by SparseTensor.
SparseTensor<double> power_law(const std::vector<index_t>& dims, index_t nnz, std::uint64_t seed) {
  const std::size_t order = dims.size();
  std::vector<index_t> coords(order * static_cast<std::size_t>(nnz));
  std::vector<double> values(static_cast<std::size_t>(nnz));
  std::uint64_t draw = 0;
  for (std::size_t k = 0; k < values.size(); ++k) {
    for (std::size_t n = 0; n < order; ++n) {
      // exp(u log I) - 1 for u uniform in [0, 1): density about 1/(i + 1)
      const double u = 0.5 * (noise(draw++, seed) + 1.0);
      auto i = static_cast<index_t>(std::exp(u * std::log(static_cast<double>(dims[n])))) - 1;
      if (n == 0) i -= i % 2;
      coords[n * values.size() + k] = std::min(i, dims[n] - 1);
    }
    values[k] = noise(draw++, seed + 1);
  }
  return SparseTensor<double>(dims, std::move(coords), std::move(values));
}

// x saved by rank 0 as `name` (.tns or .tfsparse).
fs::path save_sparse(const SparseTensor<double>& x, const std::string& name) {
  const fs::path path = shared_dir() / name;
  if (world_rank() == 0) io::save_sparse_file(path, x);
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

// Sum over every process's entries (global indices) of value times a hash of the
// coordinates, and the entry count: the same as the serial tensor's when the blocks
// hold exactly its entries.
std::pair<double, long long> signature(const mpi::DistSparseTensor<double>& d) {
  double s = 0.0;
  const auto nnz = static_cast<std::size_t>(d.local.nnz());
  for (std::size_t k = 0; k < nnz; ++k) {
    std::uint64_t h = 1;
    for (int n = 0; n < d.order(); ++n)
      h = h * 1000003 + static_cast<std::uint64_t>(d.local.indices(n)[k] + d.offsets[n]);
    s += d.local.values()[k] * noise(h, 3);
  }
  long long count = d.local.nnz();
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return {s, count};
}

std::pair<double, long long> signature(const SparseTensor<double>& x) {
  double s = 0.0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(x.nnz()); ++k) {
    std::uint64_t h = 1;
    for (int n = 0; n < x.order(); ++n)
      h = h * 1000003 + static_cast<std::uint64_t>(x.indices(n)[k]);
    s += x.values()[k] * noise(h, 3);
  }
  return {s, x.nnz()};
}

const std::vector<std::vector<index_t>> kSparseShapes = {{40, 30, 20}, {12, 10, 9, 8}};

TEST(DistSparse, ReadsEveryEntryOnceFromBothFormats) {
  for (const auto& dims : kSparseShapes) {
    const SparseTensor<double> x = power_law(dims, 3000, 1);
    for (const std::string name : {"s.tns", "s.tfsparse"}) {
      const auto d = mpi::read_sparse<double>(MPI_COMM_WORLD, save_sparse(x, name));
      EXPECT_EQ(d.dims, x.dims()) << name;
      EXPECT_EQ(d.nnz, x.nnz()) << name;
      const auto [s, count] = signature(d);
      EXPECT_EQ(count, x.nnz()) << name;
      EXPECT_NEAR(s, signature(x).first, 1e-12 * x.nnz()) << name;
      // Balanced: no block far above its share (power-law slices of one index can
      // exceed it; these are small).
      EXPECT_LE(d.local.nnz(), 3 * x.nnz() / world_size() + 200) << name;
    }
  }
}

TEST(DistSparse, CpEqualsTheSerialLibrary) {
  for (const auto& dims : kSparseShapes) {
    const SparseTensor<double> x = power_law(dims, 2000, 2);
    const auto d = mpi::read_sparse<double>(MPI_COMM_WORLD, save_sparse(x, "cp.tns"));
    for (CpInit init : {CpInit::random, CpInit::nvecs}) {
      CpOptions o = sweeps(3, 15, init);
      o.seed = 4;
      SCOPED_TRACE("init " + std::string(to_string(init)) + ", order " +
                   std::to_string(dims.size()));
      expect_same_model(mpi::cp_als(d, o), cp_als(x, o));
    }
    // One CSF tree per block, and a given start.
    CpOptions o = sweeps(3, 15, CpInit::given);
    const CpResult<double> start = cp_als(x, sweeps(3, 1));
    expect_same_model(mpi::cp_als(d, o, start.model.factors, {CsfLayout::one}),
                      cp_als(x, o, start.model.factors));
  }
}

// cp_als taking the tensor: the same model as the serial library, the block's entries
// released (the mode Grams of nvecs then read them back from the trees); an error before
// the trees leaves the tensor as it was.
TEST(DistSparse, CpTakingTheTensorReleasesItsBlock) {
  for (const auto& dims : kSparseShapes) {
    const SparseTensor<double> x = power_law(dims, 2000, 5);
    const auto d = mpi::read_sparse<double>(MPI_COMM_WORLD, save_sparse(x, "take.tns"));
    for (CsfLayout layout : {CsfLayout::all, CsfLayout::two, CsfLayout::one}) {
      EXPECT_EQ(mpi::csf_layout_for(d, {layout}, true), layout);
      for (CpInit init : {CpInit::random, CpInit::nvecs}) {
        CpOptions o = sweeps(3, 15, init);
        o.seed = 6;
        SCOPED_TRACE("init " + std::string(to_string(init)) + ", layout " +
                     std::string(to_string(layout)) + ", order " + std::to_string(dims.size()));
        mpi::DistSparseTensor<double> taken = d;
        CpOptions bad = o;
        bad.rank = 0;
        EXPECT_THROW(mpi::cp_als(std::move(taken), bad, {}, {layout}), InvalidArgument);
        EXPECT_EQ(taken.local.nnz(), d.local.nnz());
        expect_same_model(mpi::cp_als(std::move(taken), o, {}, {layout}),
                          cp_als(x, o, {}, {layout}));
        EXPECT_EQ(taken.local.nnz(), 0);
        EXPECT_EQ(taken.dims, x.dims());
        EXPECT_EQ(taken.nnz, x.nnz());
      }
    }
  }
}

TEST(DistSparse, ProcessesWithoutNonzerosAndDuplicatesAcrossProcesses) {
  // Every nonzero in slice 0 of mode 0, spread over P processes along mode 0: all but
  // one process own none. Each process passes the same entries: their sums meet.
  const std::vector<index_t> dims = {static_cast<index_t>(world_size()) + 3, 6, 5};
  SparseTensor<double> x = power_law(dims, 60, 3);
  std::vector<index_t> coords = x.coords();
  const auto nnz = static_cast<std::size_t>(x.nnz());
  for (std::size_t k = 0; k < nnz; ++k) coords[k] = 0;
  const SparseTensor<double> slice(dims, coords, x.values());
  std::vector<double> scaled = slice.values();
  for (double& v : scaled) v *= world_size();
  const SparseTensor<double> sum(dims, slice.coords(), scaled);
  const auto d = mpi::distribute<double>(MPI_COMM_WORLD, dims, slice.coords(), slice.values(),
                                         {world_size(), 1, 1});
  EXPECT_EQ(d.nnz, sum.nnz());
  const CpOptions o = sweeps(2, 10);
  expect_same_model(mpi::cp_als(d, o), cp_als(sum, o));
}

TEST(DistSparse, FileErrorsOnEveryProcess) {
  const fs::path dir = shared_dir();
  const auto write = [&](const std::string& name, const std::string& text) {
    if (world_rank() == 0) std::ofstream(dir / name) << text;
    MPI_Barrier(MPI_COMM_WORLD);
    return dir / name;
  };
  // Lines of 8 bytes, so that the bad line falls in the last process's share.
  std::string text = "# shape: 9 9 9\n";
  for (int k = 0; k < 40; ++k) text += "1 2 3 4\n";
  const std::string over = text + "1 2 10 4\n";
  expect_throw_with<IoError>(
      [&] { mpi::read_sparse<double>(MPI_COMM_WORLD, write("o.tns", over)); },
      "line 42: column 3: index 10 exceeds the size 9 of mode 2");
  const std::string wide = text + "1 2 99999999999999999999 4\n";
  expect_throw_with<IoError>(
      [&] { mpi::read_sparse<double>(MPI_COMM_WORLD, write("w.tns", wide)); },
      "line 42: column 3: index '99999999999999999999' is out of range");
  // A binary file shorter than its header says.
  if (world_rank() == 0) {
    io::save_sparse(dir / "t.tfsparse", power_law({5, 5, 5}, 20, 4));
    fs::resize_file(dir / "t.tfsparse", fs::file_size(dir / "t.tfsparse") - 8);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_throw_with<IoError>([&] { mpi::read_sparse<double>(MPI_COMM_WORLD, dir / "t.tfsparse"); },
                             "but its header describes");
  // The last process cannot read its file.
  const fs::path path =
      world_rank() == world_size() - 1 ? dir / "missing.tns" : write("ok.tns", text);
  if (world_rank() == world_size() - 1) MPI_Barrier(MPI_COMM_WORLD);
  expect_throw_with<IoError>([&] { mpi::read_sparse<double>(MPI_COMM_WORLD, path); },
                             "cannot open");
  // A grid whose product is not the process count.
  expect_throw_with<InvalidArgument>(
      [&] {
        mpi::read_sparse<double>(MPI_COMM_WORLD, write("g.tns", text), {world_size() + 1, 1, 1});
      },
      "processes, the communicator");
}

}  // namespace
}  // namespace tenfold::test
