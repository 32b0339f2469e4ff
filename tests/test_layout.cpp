// The same array in C and in Fortran order gives the same numbers, bit for bit, when
// the C-order array is copied into axis order (automatic below kRowMajorCopyMaxBytes):
// through the library's NumPy-order entry (Layout::row_major) and through the program.
// Also the C-order memory itself and its huge-page advice. Arrays read in place are in
// test_layout_in_place.cpp, given starts and views in test_given_starts_and_views.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "core/layout.hpp"
#include "layout_test_util.hpp"
#include "same_bits.hpp"
#include "temp_dir.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/io.hpp"
#include "tenfold/tucker.hpp"

namespace fs = std::filesystem;
using namespace tenfold;
using tenfold::test::c_order;
using tenfold::test::cp_both_ways;
using tenfold::test::fortran_array;
using tenfold::test::kShapes;
using tenfold::test::random_matrix;
using tenfold::test::same_bits;
using tenfold::test::tucker_both_ways;

namespace {

// CP results of the Fortran copy (col_major) and of the C copy (row_major) agree bit
// for bit: weights, fit history, and the factor of every NumPy axis.
template <class T>
void expect_same_cp(const CpResult<T>& f, const CpResult<T>& c, const std::string& what) {
  EXPECT_EQ(f.iterations, c.iterations) << what;
  EXPECT_EQ(f.stop, c.stop) << what;
  EXPECT_EQ(f.eigen_fallbacks, c.eigen_fallbacks) << what;
  EXPECT_TRUE(same_bits(f.fit_history, c.fit_history)) << what;
  EXPECT_TRUE(same_bits(f.model.weights, c.model.weights)) << what;
  const int order = f.model.order();
  ASSERT_EQ(c.model.order(), order) << what;
  for (int a = 0; a < order; ++a) {
    const auto& fa = f.model.factors[static_cast<std::size_t>(a)];
    const auto& ca = c.model.factors[static_cast<std::size_t>(order - 1 - a)];
    EXPECT_EQ(fa.rows(), ca.rows()) << what << ", axis " << a;
    EXPECT_TRUE(same_bits(fa.values(), ca.values())) << what << ", axis " << a;
  }
}

}  // namespace

TEST(Layout, ReverseModesIsTheCOrderMemory) {
  // y(k, j, i) = x(i, j, k), and reversing twice gives x back, for orders 1 to 4 and
  // sizes that cut the transposition tiles.
  for (const std::vector<index_t>& shape :
       std::vector<std::vector<index_t>>{{7}, {33, 40}, {3, 1, 70}, {35, 2, 3, 33}}) {
    const Tensor<double> x = fortran_array<double>(shape, 5);
    const Tensor<double> y = c_order(x);
    EXPECT_EQ(y.dims(), detail::reversed(shape));
    std::vector<index_t> idx(shape.size(), 0);
    for (index_t i = 0; i < x.numel(); ++i) {
      index_t off = 0, stride = 1;
      for (std::size_t n = shape.size(); n-- > 0;) {
        off += idx[n] * stride;
        stride *= shape[n];
      }
      ASSERT_EQ(y[off], x[i]);
      for (std::size_t n = 0; n < shape.size() && ++idx[n] == shape[n]; ++n) idx[n] = 0;
    }
    EXPECT_TRUE(same_bits(c_order(y).values(), x.values()));
  }
}

TEST(Layout, ReversedTensorIsReverseModesInHostMemory) {
  // The algorithms' copy (uninitialised host memory, 2 MiB aligned from 2 MiB up) holds
  // the bits of reverse_modes; the small one is on a cache line.
  for (const std::vector<index_t>& shape :
       std::vector<std::vector<index_t>>{{33, 40}, {130, 70, 40}, {0, 3}}) {
    const Tensor<double> x = fortran_array<double>(shape, 6);
    const detail::ReversedTensor<double> y(x.view());
    EXPECT_EQ(y.view().dims(), detail::reversed(shape));
    const Tensor<double> expected = c_order(x);
    EXPECT_TRUE(same_bits(std::vector<double>(y.view().data(), y.view().data() + x.numel()),
                          expected.values()));
    const auto bytes = static_cast<std::size_t>(x.numel()) * sizeof(double);
    const auto address = reinterpret_cast<std::uintptr_t>(y.view().data());
    EXPECT_EQ(address % (bytes >= (std::size_t{1} << 21) ? std::size_t{1} << 21 : 64), 0u);
  }
  EXPECT_EQ(detail::ReversedTensor<float>().view().numel(), 0);
}

namespace {

// Whether the mapping holding `p` carries the huge-page advice ("hg" among the VmFlags
// of /proc/self/smaps); nullopt where the file or the flag line cannot be read.
std::optional<bool> huge_page_advice(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.find(" hg") != std::string::npos;
    }
  }
  return std::nullopt;
}

}  // namespace

TEST(Layout, LargeHostBuffersAndTensorsAreAdvisedForHugePages) {
  // Tensor-sized memory asks for transparent huge pages (core/memory.hpp).
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "no transparent huge pages on this system";
  }
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  const detail::HostArray<double> array(kBytes / sizeof(double));
  const Tensor<double> tensor({1024, 1024});
  for (const void* p : {static_cast<const void*>(array.data()),
                        static_cast<const void*>(tensor.data() + tensor.numel() / 2)}) {
    const std::optional<bool> flag = huge_page_advice(p);
    if (!flag) GTEST_SKIP() << "/proc/self/smaps has no VmFlags here";
    EXPECT_TRUE(*flag);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(array.data()) % (std::size_t{1} << 21), 0u);
}

TEST(Layout, CpIsBitIdenticalForCAndFortranOrder) {
  // Copied into axis order (as automatic does for these small arrays).
  cp_both_ways(RowMajorInput::automatic, false, expect_same_cp<double>);
}

TEST(Layout, CpFloatAndGivenStartAreBitIdentical) {
  std::mt19937_64 gen(3);
  const Tensor<float> f = fortran_array<float>({12, 9, 7}, 3);
  const Tensor<float> c = c_order(f);
  CpOptions o;
  o.rank = 4;
  o.init = CpInit::given;
  o.max_iters = 30;
  o.tol = 0.0;
  std::vector<Matrix<float>> start;
  for (index_t d : f.dims()) start.push_back(random_matrix<float>(d, 4, gen));
  const CpResult<float> rf = cp_als(f, o, start);
  // The C copy's modes are the NumPy axes reversed, and so are its initial factors.
  start = detail::reversed(start);
  o.layout = Layout::row_major;
  expect_same_cp(rf, cp_als(c, o, start), "float, given start");
}

TEST(Layout, CpOfModelsFollowsTheAxisOrder) {
  // A Kruskal-form and a Tucker-form input listed in reversed mode order: the random
  // start and the sweeps follow the NumPy axes as for a dense input.
  std::mt19937_64 gen(11);
  const std::vector<index_t> shape = {8, 6, 5};
  KTensor<double> k;
  for (index_t d : shape) k.factors.push_back(random_matrix<double>(d, 6, gen));
  k.weights.assign(6, 1.0);
  const KTensor<double> k_rev(k.weights, detail::reversed(k.factors));
  TTensor<double> t(fortran_array<double>({4, 3, 2}, 2), {});
  for (std::size_t n = 0; n < shape.size(); ++n)
    t.factors.push_back(random_matrix<double>(shape[n], t.core.dim(static_cast<int>(n)), gen));
  const TTensor<double> t_rev(c_order(t.core), detail::reversed(t.factors));
  CpOptions o;
  o.rank = 3;
  o.max_iters = 25;
  o.tol = 0.0;
  CpOptions row = o;
  row.layout = Layout::row_major;
  expect_same_cp(cp_als(k, o), cp_als(k_rev, row), "Kruskal-form input");
  expect_same_cp(cp_als(t, o), cp_als(t_rev, row), "Tucker-form input");
}

TEST(Layout, TuckerIsBitIdenticalForCAndFortranOrder) {
  // Copied into axis order (as automatic does for these small arrays).
  tucker_both_ways(
      RowMajorInput::automatic, [](const TuckerResult<double>& rf, const TuckerResult<double>& rc,
                                   int order, const std::string& what) {
        EXPECT_TRUE(same_bits(rf.model.core.values(), c_order(rc.model.core).values())) << what;
        for (int a = 0; a < order; ++a) {
          const auto fa = static_cast<std::size_t>(a), ca = static_cast<std::size_t>(order - 1 - a);
          EXPECT_TRUE(same_bits(rf.model.factors[fa].values(), rc.model.factors[ca].values()))
              << what << ", axis " << a;
          EXPECT_TRUE(same_bits(rf.eigenvalues[fa], rc.eigenvalues[ca])) << what << ", axis " << a;
        }
        EXPECT_TRUE(same_bits(rf.error_history, rc.error_history)) << what;
        EXPECT_EQ(std::memcmp(&rf.relative_error, &rc.relative_error, sizeof(double)), 0) << what;
      });
}

// --- the program ---------------------------------------------------------------

namespace {

// Writes the array as dir/f.npy (Fortran order) and dir/c.npy (C order).
template <class T>
void write_both(const TempDir& dir, const Tensor<T>& fortran) {
  io::save_npy<T>(dir / "f.npy", fortran.view(), io::NpyOrder::fortran);
  io::save_npy<T>(dir / "c.npy", c_order(fortran).view(), io::NpyOrder::c_reversed);
}

// A .npy output as NumPy sees it, in NumPy axis order whatever order it was written in.
std::vector<double> numpy_values(const fs::path& p) {
  io::NpyHeader h;
  const Tensor<double> t = io::load_npy<double>(p, &h);
  return h.fortran_order ? t.values() : c_order(t).values();
}

// The report without what legitimately differs (input path, timings).
nlohmann::json numbers(const fs::path& report) {
  nlohmann::json j = nlohmann::json::parse(slurp(report));
  for (const char* key : {"input", "seconds", "timings"}) j.erase(key);
  return j;
}

}  // namespace

TEST(LayoutCli, CpAndTuckerAreBitIdenticalForCAndFortranFiles) {
  TempDir dir;
  for (const auto& shape : kShapes) {
    const int order = static_cast<int>(shape.size());
    for (std::uint64_t seed : {0u, 5u}) {
      write_both(dir, fortran_array<double>(shape, seed));
      std::vector<std::string> runs;
      for (const char* init : {"random", "nvecs"})
        runs.push_back(std::string("cp --rank 4 --init ") + init + " --seed " +
                       std::to_string(seed) + " --max-iters 40 --tol 1e-12");
      for (const char* method : {"hosvd", "sthosvd", "hooi"}) {
        runs.push_back(std::string("tucker --method ") + method + " --tol 0.4 --max-iters 6");
        std::string ranks;
        for (index_t d : shape) ranks += (ranks.empty() ? "" : ",") + std::to_string((d + 1) / 2);
        runs.push_back(std::string("tucker --method ") + method + " --ranks " + ranks);
      }
      for (const std::string& args : runs) {
        for (const char* file : {"f", "c"}) {
          const CliRun r =
              tenfold_cli(dir, args + " -q " + (dir / (std::string(file) + ".npy")).string() +
                                   " --out " + (dir / file).string());
          ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
        }
        const std::string what = args + " on a " + std::to_string(order) + "-way array";
        EXPECT_EQ(numbers(dir / "f/report.json"), numbers(dir / "c/report.json")) << what;
        std::vector<std::string> files;
        for (int a = 0; a < order; ++a) files.push_back("factor_" + std::to_string(a) + ".npy");
        files.push_back(args.rfind("cp", 0) == 0 ? "weights.npy" : "core.npy");
        for (const std::string& name : files) {
          EXPECT_TRUE(same_bits(numpy_values(dir / "f" / name), numpy_values(dir / "c" / name)))
              << what << ": " << name;
        }
        fs::remove_all(dir / "f");
        fs::remove_all(dir / "c");
      }
    }
  }
}

TEST(LayoutCli, AllZeroInitFactorsAreRefused) {
  TempDir dir;
  write_both(dir, fortran_array<double>({5, 4, 3}, 1));
  fs::create_directories(dir / "zero");
  for (int a = 0; a < 3; ++a) {
    const Tensor<double> z({std::vector<index_t>{5, 4, 3}[static_cast<std::size_t>(a)], 2});
    io::save_npy<double>(dir / "zero" / ("factor_" + std::to_string(a) + ".npy"), z.view());
  }
  // C order: NumPy axis 0 (updated first) is tenfold's mode 2; the refused factor is
  // the first one read, mode 1, i.e. NumPy axis 1.
  const CliRun c =
      tenfold_cli(dir, "cp --rank 2 -q " + (dir / "c.npy").string() + " --init-factors " +
                           (dir / "zero").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("initial factor of NumPy axis 1 (mode 1): column 0 is zero"),
            std::string::npos)
      << c.err;
  EXPECT_FALSE(fs::exists(dir / "out" / "weights.npy"));
  const CliRun f =
      tenfold_cli(dir, "cp --rank 2 -q " + (dir / "f.npy").string() + " --init-factors " +
                           (dir / "zero").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(f.code, 1);
  EXPECT_NE(f.err.find("initial factor 1: column 0 is zero"), std::string::npos) << f.err;
}
