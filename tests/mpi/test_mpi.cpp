// The distributed component under mpirun (every process runs every test): grids,
// collective .npy reading and writing, distributed Grams and CP-ALS against the serial
// library on the whole tensor, and errors raised on every process.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "mpi_test_util.hpp"
#include "relative_difference.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/error.hpp"
#include "tenfold/io.hpp"
#include "tenfold/ktensor.hpp"
#include "tenfold/mpi.hpp"
#include "tenfold/threads.hpp"
#include "tenfold/tucker.hpp"

namespace tenfold::test {
namespace {

namespace fs = std::filesystem;

// A rank-3 model plus 1% noise, column-major in NumPy axis order.
Tensor<double> planted(const std::vector<index_t>& dims, std::uint64_t seed) {
  std::vector<Matrix<double>> f;
  std::uint64_t k = 0;
  for (index_t d : dims) {
    Matrix<double> m(d, 3);
    for (double& v : m.values()) v = noise(k++, seed);
    f.push_back(std::move(m));
  }
  Tensor<double> x = KTensor<double>({3.0, 2.0, 1.5}, f).full();
  for (index_t i = 0; i < x.numel(); ++i)
    x[i] += 0.01 * noise(static_cast<std::uint64_t>(i), seed + 7);
  return x;
}

// Saves x (NumPy axis order) as `name` in Fortran or C order, from rank 0.
fs::path save(const Tensor<double>& x, const std::string& name, bool fortran) {
  const fs::path path = shared_dir() / name;
  if (world_rank() == 0) {
    if (fortran) {
      io::save_npy<double>(path, x.view(), io::NpyOrder::fortran);
    } else {
      const Tensor<double> c = transpose(x.view());
      io::save_npy<double>(path, c.view(), io::NpyOrder::c_reversed);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

const std::vector<std::vector<index_t>> kShapes = {
    {7, 5, 6}, {2, 9, 7}, {5, 4, 3, 6}, {3, 4, 2, 3, 5}};

TEST(Grid, ChoiceAndRanges) {
  EXPECT_EQ(mpi::choose_grid(6, {100, 10, 10}), (std::vector<int>{6, 1, 1}));
  EXPECT_EQ(mpi::choose_grid(4, {10, 10, 10}), (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(mpi::choose_grid(6, {2, 9, 7}), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(mpi::choose_grid(1, {3, 3}), (std::vector<int>{1, 1}));
  EXPECT_THROW(mpi::choose_grid(7, {3, 4, 5}), InvalidArgument);
  // 10 indices over 4: 3, 3, 2, 2
  EXPECT_EQ(mpi::block_range(10, 4, 0).size, 3);
  EXPECT_EQ(mpi::block_range(10, 4, 2).begin, 6);
  EXPECT_EQ(mpi::block_range(10, 4, 3).size, 2);
}

TEST(DistTensor, ReadsItsBlockInBothOrders) {
  for (const auto& dims : kShapes) {
    const Tensor<double> x = planted(dims, 1);
    for (bool fortran : {true, false}) {
      const fs::path path = save(x, fortran ? "f.npy" : "c.npy", fortran);
      const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, path);
      EXPECT_EQ(d.dims, dims);
      // Every process holds only its block...
      index_t prod = 1;
      for (int g : d.grid->shape()) prod *= g;
      EXPECT_EQ(prod, world_size());
      // ...and together they hold the whole tensor, exactly.
      const Tensor<double> all = mpi::gather(d);
      EXPECT_EQ(all.values(), x.values()) << "fortran " << fortran;
    }
  }
}

TEST(DistTensor, ReadsFloat32AsDouble) {
  Tensor<float> x({4, 5, 3});
  for (index_t i = 0; i < x.numel(); ++i)
    x[i] = static_cast<float>(noise(static_cast<std::uint64_t>(i), 3));
  const fs::path path = shared_dir() / "f32.npy";
  if (world_rank() == 0) io::save_npy<float>(path, x.view());
  MPI_Barrier(MPI_COMM_WORLD);
  const Tensor<double> all = mpi::gather(mpi::read_npy<double>(MPI_COMM_WORLD, path));
  for (index_t i = 0; i < x.numel(); ++i) EXPECT_EQ(all[i], static_cast<double>(x[i]));
}

TEST(DistTensor, WritesCollectively) {
  const Tensor<double> x = planted({6, 5, 4, 3}, 2);
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "w_in.npy", false));
  const fs::path out = shared_dir() / "w_out.npy";
  mpi::write_npy(out, d);
  if (world_rank() == 0) {
    io::NpyHeader h;
    const Tensor<double> y = io::load_npy<double>(out, &h);
    EXPECT_TRUE(h.fortran_order);
    EXPECT_EQ(y.dims(), x.dims());
    EXPECT_EQ(y.values(), x.values());
    // No temporary left beside it.
    for (const auto& e : fs::directory_iterator(out.parent_path()))
      EXPECT_EQ(e.path().filename().string().find(".w_out.npy.tmp"), std::string::npos);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(DistTensor, ModeGramsEqualTheSerialDefinition) {
  for (const auto& dims : kShapes) {
    const Tensor<double> x = planted(dims, 4);
    const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "g.npy", true));
    for (int n = 0; n < static_cast<int>(dims.size()); ++n) {
      const Matrix<double> g = mpi::mode_gram(d, n);
      // G(i, j) = sum over the other indices of X(.., i, ..) X(.., j, ..)
      const index_t in = dims[static_cast<std::size_t>(n)];
      index_t left = 1;
      for (int m = 0; m < n; ++m) left *= dims[static_cast<std::size_t>(m)];
      const index_t right = x.numel() / left / in;
      std::vector<double> want(static_cast<std::size_t>(in * in), 0.0), got(g.values());
      for (index_t r = 0; r < right; ++r)
        for (index_t j = 0; j < in; ++j)
          for (index_t i = 0; i < in; ++i)
            for (index_t l = 0; l < left; ++l)
              want[static_cast<std::size_t>(i + j * in)] +=
                  x[l + i * left + r * left * in] * x[l + j * left + r * left * in];
      EXPECT_LT(relative_difference(got, want), 1e-13) << "mode " << n;
    }
  }
}

TEST(DistCp, EqualsTheSerialLibrary) {
  for (const auto& dims : kShapes) {
    const Tensor<double> x = planted(dims, 5);
    const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "cp.npy", false));
    for (CpInit init : {CpInit::random, CpInit::nvecs}) {
      CpOptions o = sweeps(3, 30, init);
      o.seed = 11;
      const CpResult<double> want = cp_als(x, o);
      const CpResult<double> got = mpi::cp_als(d, o);
      SCOPED_TRACE("init " + std::string(to_string(init)) + ", order " +
                   std::to_string(dims.size()));
      expect_same_model(got, want);
    }
  }
}

TEST(DistCp, RankAboveTheLocalBlockSizes) {
  // Rank 5 with blocks of two or three rows per axis (factors stay replicated).
  const std::vector<index_t> dims{6, 5, 6};
  const Tensor<double> x = planted(dims, 6);
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "cp5.npy", true));
  const CpOptions o = sweeps(5, 10);
  expect_same_model(mpi::cp_als(d, o), cp_als(x, o));
}

TEST(DistCp, NonnegativeAndSeveralStarts) {
  const std::vector<index_t> dims{5, 6, 4, 3};
  Tensor<double> x = planted(dims, 8);
  for (double& v : x.values()) v = std::abs(v);
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "nn.npy", true));
  CpOptions o = sweeps(2, 15);
  o.nonnegative = true;
  o.n_starts = 2;
  const CpResult<double> got = mpi::cp_als(d, o), want = cp_als(x, o);
  EXPECT_EQ(got.best_start, want.best_start);
  expect_same_model(got, want);
}

// Eigenvectors are as accurate as their eigenvalues are separated (Davis-Kahan): a
// factor's columns are compared to 1e-12 times lambda_1 / (smallest gap of a kept
// eigenvalue to its neighbours), at least 1e-12.
double factor_tolerance(const std::vector<double>& lambda, index_t r) {
  double gap = lambda[0];
  for (index_t j = 0; j < r; ++j) {
    const auto i = static_cast<std::size_t>(j);
    if (j > 0) gap = std::min(gap, lambda[i - 1] - lambda[i]);
    if (i + 1 < lambda.size()) gap = std::min(gap, lambda[i] - lambda[i + 1]);
  }
  return 1e-12 * std::max(1.0, lambda[0] / gap);
}

void expect_same_tucker(const TuckerResult<double>& got, const TuckerResult<double>& want) {
  ASSERT_EQ(got.model.ranks(), want.model.ranks());
  EXPECT_EQ(got.mode_order, want.mode_order);
  double core_tolerance = 0.0;  // the core moves with the factors
  for (std::size_t n = 0; n < want.model.factors.size(); ++n) {
    const Matrix<double>& f = want.model.factors[n];
    const double tol = factor_tolerance(want.eigenvalues[n], f.cols());
    core_tolerance = std::max(core_tolerance, tol);
    EXPECT_LT(relative_difference(got.eigenvalues[n], want.eigenvalues[n]), 1e-12);
    EXPECT_LT(relative_difference(got.model.factors[n].values(), f.values()), tol)
        << "factor " << n;
  }
  EXPECT_LT(relative_difference(got.model.core.values(), want.model.core.values()), core_tolerance);
  // The error is sqrt(max(0, 1 - ||G||^2 / ||X||^2)): its square is accurate to a few
  // eps in absolute terms, the error itself only to about sqrt(eps) near 0 (an exact
  // model: 0 on one side, 1e-8 on the other).
  EXPECT_NEAR(got.relative_error * got.relative_error, want.relative_error * want.relative_error,
              1e-14);
  EXPECT_EQ(got.iterations, want.iterations);
  EXPECT_EQ(got.error_history.size(), want.error_history.size());
}

TEST(DistTucker, EqualsTheSerialLibrary) {
  for (const auto& dims : kShapes) {
    const Tensor<double> x = planted(dims, 13);
    const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "t.npy", false));
    // Ranks of 1 and 2 leave some processes with empty blocks of the core.
    std::vector<index_t> ranks;
    for (index_t i : dims) ranks.push_back(std::min<index_t>(i, 2));
    ranks[0] = 1;
    for (TuckerMethod method : {TuckerMethod::sthosvd, TuckerMethod::hosvd, TuckerMethod::hooi}) {
      TuckerOptions o;
      o.method = method;
      o.ranks = ranks;
      o.max_iters = 3;
      o.tol = 0.0;
      SCOPED_TRACE(std::string(to_string(method)) + ", order " + std::to_string(dims.size()));
      expect_same_tucker(mpi::tucker(d, o), tucker(x, o));
    }
  }
}

TEST(DistTucker, KeepsTheErrorGuarantee) {
  const Tensor<double> x = planted({9, 8, 7, 6}, 14);
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "eps.npy", true));
  for (double eps : {0.5, 0.05, 1e-3}) {
    TuckerOptions o;
    o.eps = eps;
    const TuckerResult<double> got = mpi::tucker(d, o);
    expect_same_tucker(got, tucker(x, o));
    // ||X - X^|| <= eps ||X||, measured on the full model
    const Tensor<double> full = got.model.full();
    double diff = 0.0, norm = 0.0;
    for (index_t i = 0; i < x.numel(); ++i) {
      diff += (x[i] - full[i]) * (x[i] - full[i]);
      norm += x[i] * x[i];
    }
    EXPECT_LE(std::sqrt(diff), eps * std::sqrt(norm)) << "eps " << eps;
  }
}

// Threads of this process (/proc/self/task): the library's pools keep their workers
// between calls.
int process_threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// libtenfold_mpi carries its own pool; the count set through libtenfold.so is its count.
TEST(Threads, SetNumThreadsReachesTheDistributedLibrary) {
  const std::vector<index_t> dims{120, 80, 60};
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(planted(dims, 15), "thr.npy", true));
  const CpOptions o = sweeps(3, 2);
  std::vector<int> threads;
  for (int k : {2, 5}) {
    set_num_threads(k);
    (void)mpi::cp_als(d, o);
    threads.push_back(process_threads());
  }
  set_num_threads(0);
  // The pool is made again for the new count: k - 1 workers beside the caller.
  EXPECT_EQ(threads[1] - threads[0], 3) << threads[0] << " " << threads[1];
}

// An error found on some processes reaches every process (a hang would time out).
TEST(Errors, AFileOneProcessCannotOpen) {
  const fs::path good = save(planted({4, 3, 5}, 9), "e.npy", true);
  const fs::path path = world_rank() == world_size() - 1 ? good.parent_path() / "absent.npy" : good;
  try {
    (void)mpi::read_npy<double>(MPI_COMM_WORLD, path);
    FAIL() << "no error";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("absent.npy"), std::string::npos) << what;
    if (world_size() > 1)
      EXPECT_NE(what.find("process " + std::to_string(world_size() - 1)), std::string::npos)
          << what;
  }
}

TEST(Errors, GridsThatDoNotFit) {
  const fs::path path = save(planted({4, 3, 5}, 9), "e.npy", true);
  // Wrong product, wrong order, more processes on an axis than indices.
  EXPECT_THROW((void)mpi::read_npy<double>(MPI_COMM_WORLD, path, {world_size() + 1, 1, 1}),
               InvalidArgument);
  EXPECT_THROW((void)mpi::read_npy<double>(MPI_COMM_WORLD, path, {world_size(), 1}),
               InvalidArgument);
  if (world_size() > 3) {
    try {
      (void)mpi::read_npy<double>(MPI_COMM_WORLD, path, {1, world_size(), 1});
      FAIL() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("NumPy axis 1 has 3 indices"), std::string::npos)
          << e.what();
    }
  }
  if (world_size() > 1) EXPECT_THROW((void)mpi::choose_grid(world_size(), {1, 1}), InvalidArgument);
}

TEST(Errors, OptionsRefusedEverywhere) {
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(planted({4, 3, 5}, 9), "e.npy", true));
  CpOptions o;
  o.rank = 13;  // above max_cp_rank = 12
  EXPECT_THROW((void)mpi::cp_als(d, o), InvalidArgument);
  o.rank = 2;
  o.time_limit = 1.0;
  EXPECT_THROW((void)mpi::cp_als(d, o), InvalidArgument);
  o.time_limit = 0.0;
  o.solver = CpSolver::sampled;
  try {
    (void)mpi::cp_als(d, o);
    ADD_FAILURE() << "solver = sampled ran on a distributed tensor";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("solver = sampled needs a dense tensor without a mask, "
                                         "got a distributed tensor"),
              std::string::npos)
        << e.what();
  }
}

TEST(Errors, ANonFiniteEntryInOneBlock) {
  Tensor<double> x = planted({5, 4, 6}, 10);
  x[x.numel() - 1] = std::nan("");
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "nan.npy", true));
  CpOptions o;
  o.rank = 2;
  EXPECT_THROW((void)mpi::cp_als(d, o), InvalidArgument);
}

// Calls f, which must throw InvalidArgument on every process, with `message` in it.
template <class F>
void expect_refused_everywhere(F f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error, expected " << message;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

// Arguments that differ on the last process are an error on every process (a hang, an
// MPI abort or a mixed result before), at whichever call they reach the library.
TEST(Errors, AnotherFileOnOneProcess) {
  if (world_size() < 2) GTEST_SKIP() << "needs two processes";
  const bool last = world_rank() == world_size() - 1;
  const std::string who = "process " + std::to_string(world_size() - 1) + ": ";
  const Tensor<double> x = planted({4, 3, 5}, 9);
  const fs::path good = save(x, "same.npy", true);
  // Another dtype (the float32 copy), another shape, another memory order.
  Tensor<float> xf({4, 3, 5});
  for (index_t i = 0; i < x.numel(); ++i) xf[i] = static_cast<float>(x[i]);
  const fs::path f32 = shared_dir() / "same_f32.npy";
  if (world_rank() == 0) io::save_npy<float>(f32, xf.view(), io::NpyOrder::fortran);
  const fs::path other_shape = save(planted({4, 3, 6}, 9), "same_shape.npy", true);
  const fs::path c_order = save(x, "same_c.npy", false);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {f32, "dtype is float32 here, float64 on process 0"},
      {other_shape, "shape is (4, 3, 6) here, (4, 3, 5) on process 0"},
      {c_order, "memory order is C here, Fortran on process 0"}};
  for (const auto& one : cases) {
    const fs::path& path = one.first;  // (a named variable: lambdas capture it)
    expect_refused_everywhere(
        [&] { (void)mpi::read_npy<double>(MPI_COMM_WORLD, last ? path : good); },
        who + "the headers of '");
    expect_refused_everywhere(
        [&] { (void)mpi::read_npy<double>(MPI_COMM_WORLD, last ? path : good); }, one.second);
  }
  // The same file read as another element type, or on another grid.
  expect_refused_everywhere(
      [&] {
        if (last) {
          (void)mpi::read_npy<float>(MPI_COMM_WORLD, good);
        } else {
          (void)mpi::read_npy<double>(MPI_COMM_WORLD, good);
        }
      },
      who +
          "the arguments of read_npy differ between processes: element type is float32 "
          "here, float64 on process 0");
  std::vector<int> grid(3, 1);
  grid[last ? 0 : 2] = world_size();
  if (world_size() <= 4) {
    expect_refused_everywhere(
        [&] { (void)mpi::read_npy<double>(MPI_COMM_WORLD, good, grid); },
        who + "the arguments of ProcessGrid differ between processes: grid is");
  }
}

TEST(Errors, OtherOptionsOnOneProcess) {
  if (world_size() < 2) GTEST_SKIP() << "needs two processes";
  const bool last = world_rank() == world_size() - 1;
  const std::string who = "process " + std::to_string(world_size() - 1) + ": ";
  const Tensor<double> x = planted({5, 4, 6}, 12);
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, save(x, "opts.npy", true));
  CpOptions o = sweeps(2, 5);
  o.rank = last ? 3 : 2;
  expect_refused_everywhere([&] { (void)mpi::cp_als(d, o); },
                            who +
                                "the arguments of cp_als differ between processes: rank is 3 "
                                "here, 2 on process 0");
  o.rank = 2;
  o.tol = last ? 1e-7 : 1e-6;
  expect_refused_everywhere([&] { (void)mpi::cp_als(d, o); }, "tol is 1e-07 here, 1e-06");
  o.tol = 1e-6;
  // The sampled solver on one process only: the difference, not that process's refusal.
  o.solver = last ? CpSolver::sampled : CpSolver::exact;
  expect_refused_everywhere([&] { (void)mpi::cp_als(d, o); },
                            "solver is sampled here, exact on process 0");
  o.solver = CpSolver::exact;
  // Initial factors that differ in one entry, or that one process lacks.
  std::vector<Matrix<double>> start;
  for (index_t n : d.dims) {
    Matrix<double> m(n, 2);
    for (index_t i = 0; i < m.size(); ++i) m.data()[i] = noise(static_cast<std::uint64_t>(i), n);
    start.push_back(std::move(m));
  }
  if (last) start[1](2, 1) += 1e-15;
  expect_refused_everywhere([&] { (void)mpi::cp_als(d, o, start); }, "initial factor 1 is 4x2");
  expect_refused_everywhere(
      [&] { (void)mpi::cp_als(d, o, last ? CpStart<double>{} : CpStart<double>(start)); },
      "initial factors is 0 here, 3 on process 0");
  TuckerOptions t;
  t.ranks = {2, 2, last ? 3 : 2};
  expect_refused_everywhere([&] { (void)mpi::tucker(d, t); },
                            who +
                                "the arguments of tucker differ between processes: ranks is "
                                "[2, 2, 3] here, [2, 2, 2] on process 0");
  t.ranks.clear();
  t.eps = last ? 0.2 : 0.1;
  expect_refused_everywhere([&] { (void)mpi::tucker(d, t); }, "eps is 0.2 here, 0.1 on process 0");
  expect_refused_everywhere([&] { (void)mpi::mode_gram(d, last ? 1 : 0); },
                            "axis is 1 here, 0 on process 0");
  // A tensor of other sizes on the same grid.
  const auto other = mpi::DistTensor<double>::make(
      d.grid, last ? std::vector<index_t>{5, 4, 7} : std::vector<index_t>{5, 4, 6});
  for (const auto& call : std::vector<std::function<void()>>{[&] { (void)mpi::cp_als(other, o); },
                                                             [&] { (void)mpi::gather(other); }})
    expect_refused_everywhere(call, "tensor shape is (5, 4, 7) here, (5, 4, 6) on process 0");
}

// The CP callback where only some processes have one: a false, or an exception, on one
// process stops (or fails) the run on every process at the same iteration.
TEST(Errors, ACallbackOnOneProcess) {
  const auto d =
      mpi::read_npy<double>(MPI_COMM_WORLD, save(planted({5, 4, 6}, 13), "cb.npy", true));
  CpOptions o = sweeps(2, 50);
  o.tol = 0.0;
  if (world_rank() == 0) o.callback = [](const CpProgress& p) { return p.iteration < 3; };
  const CpResult<double> res = mpi::cp_als(d, o);
  EXPECT_EQ(res.stop, CpStop::callback);
  EXPECT_EQ(res.iterations, 3);
  o.callback = nullptr;
  if (world_rank() == world_size() - 1) {
    o.callback = [](const CpProgress& p) -> bool {
      if (p.iteration == 2) throw InvalidArgument("stop here");
      return true;
    };
  }
  expect_refused_everywhere([&] { (void)mpi::cp_als(d, o); }, "stop here");
}

// Virtual memory of this process now, in bytes (VmSize).
std::uint64_t virtual_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::uint64_t kb = 0;
      status >> kb;
      return kb * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// Run by its own ctest (6 processes): each process may grow by a quarter of the tensor.
TEST(Memory, DISABLED_NoProcessHoldsTheTensor) {
  const std::vector<index_t> dims{300, 200, 200};  // 96 MB of float64
  const fs::path path = shared_dir() / "big.npy";
  if (world_rank() == 0) {
    Tensor<double> x(dims);
    for (index_t i = 0; i < x.numel(); ++i) x[i] = noise(static_cast<std::uint64_t>(i), 12);
    io::save_npy<double>(path, x.view());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const CpOptions o = sweeps(2, 2);
  // A first run without the limit brings the library's threads and MPI's buffers to
  // life (their stacks and arenas count as virtual memory); all it allocated for the
  // tensor is returned before the limit is set.
  (void)mpi::cp_als(mpi::read_npy<double>(MPI_COMM_WORLD, path), o);
  const std::uint64_t tensor_bytes = 300ull * 200 * 200 * 8;
  const rlimit limit{virtual_bytes() + tensor_bytes / 4, RLIM_INFINITY};
  ASSERT_EQ(setrlimit(RLIMIT_AS, &limit), 0);
  // The limit bites: the whole tensor cannot be allocated...
  EXPECT_THROW(std::vector<double>(static_cast<std::size_t>(tensor_bytes / 8), 1.0),
               std::bad_alloc);
  // ...yet it is read and decomposed.
  const auto d = mpi::read_npy<double>(MPI_COMM_WORLD, path);
  const CpResult<double> res = mpi::cp_als(d, o);
  // MPI itself needs room again to finish.
  const rlimit none{RLIM_INFINITY, RLIM_INFINITY};
  ASSERT_EQ(setrlimit(RLIMIT_AS, &none), 0);
  EXPECT_EQ(res.iterations, 2);
  EXPECT_TRUE(std::isfinite(res.fit));
}

}  // namespace
}  // namespace tenfold::test

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Every process runs every test; the run fails when any process fails.
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
