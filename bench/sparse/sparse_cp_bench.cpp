// Sparse CP-ALS speed on synthetic power-law tensors (docs/sparse.md, "Speed").
//
//   sparse_cp_bench [--nnz N] [--ranks 16,64] [--iters K] [--orders 3,4] [--csf auto|all|one]
//                   [--save DIR]
//
// For a 3-way (I = 200000, 100000, 2000) and a 4-way (100000, 50000, 2000, 500) tensor:
// each index drawn as floor(I_n u^3) (u uniform, so a few slices hold most entries, as
// in FROSTT's data), duplicates summed, values uniform in (0, 1]. Prints one JSON line
// per tensor and rank: the CSF layout (--csf: one tree per mode, one tree, or auto, which
// picks by the available memory), the seconds to build the trees and their bytes per
// nonzero (per tree), the wall and CPU seconds per
// CP-ALS iteration (between the ends of sweep 1 and sweep K, from a random start), the
// MTTKRP share, the MTTKRP rate in nonzeros x rank x order per second, and the peak
// resident memory of the process once the tensor is made (the generator's coordinates and
// the tensor's sort included) and so far. With --save, writes each tensor as
// DIR/power_law_<order>way.tns for other programs to read. A run that does not fit says so
// in one line.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "core/random.hpp"
#include "sparse/entry_order.hpp"
#include "sparse/sparse_operand.hpp"
#include "tenfold/cp.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/threads.hpp"

namespace {

using tenfold::index_t;

tenfold::SparseTensor<double> power_law(const std::vector<index_t>& dims, index_t nnz,
                                        std::uint64_t seed) {
  const auto order = dims.size();
  tenfold::detail::require_host_bytes(
      tenfold::sparse_tensor_bytes(static_cast<int>(order), nnz, sizeof(double)),
      "the bench's tensor (coordinates and values)");
  tenfold::detail::Rng rng(seed);
  std::vector<index_t> coords(order * static_cast<std::size_t>(nnz));
  std::vector<double> values(static_cast<std::size_t>(nnz));
  for (index_t k = 0; k < nnz; ++k) {
    for (std::size_t n = 0; n < order; ++n) {
      const double u = rng.uniform();
      coords[n * static_cast<std::size_t>(nnz) + static_cast<std::size_t>(k)] =
          static_cast<index_t>(static_cast<double>(dims[n]) * u * u * u);
    }
    values[static_cast<std::size_t>(k)] = 1.0 - rng.uniform();
  }
  return {dims, std::move(coords), std::move(values)};
}

// CPU seconds of this process (all threads), to compare runs on a shared machine.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Peak resident memory of this process so far, in MB (10^6 bytes).
double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0 / 1e6;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int run(int argc, char** argv) {
  index_t nnz = 1000000;
  std::vector<index_t> ranks = {16, 64}, orders = {3, 4};
  int iters = 5;
  std::string save;
  tenfold::SparseCpOptions sparse;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nnz") == 0) nnz = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--save") == 0) save = argv[i + 1];
    if (std::strcmp(argv[i], "--csf") == 0) sparse.csf = tenfold::parse_csf_layout(argv[i + 1]);
    for (auto [flag, list] : {std::pair{"--ranks", &ranks}, std::pair{"--orders", &orders}}) {
      if (std::strcmp(argv[i], flag) != 0) continue;
      list->clear();
      for (const char* p = argv[i + 1]; *p != '\0';) {
        char* end = nullptr;
        list->push_back(std::strtoll(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
      }
    }
  }
  const std::vector<std::vector<index_t>> shapes = {{200000, 100000, 2000},
                                                    {100000, 50000, 2000, 500}};
  auto c = tenfold::detail::make_compute<double>(tenfold::Backend::cpu);
  for (const auto& dims : shapes) {
    if (std::find(orders.begin(), orders.end(), static_cast<index_t>(dims.size())) == orders.end())
      continue;
    const tenfold::SparseTensor<double> x = power_law(dims, nnz, 1);
    const double tensor_rss = peak_rss_mb();
    if (!save.empty()) {
      tenfold::io::save_tns(save + "/power_law_" + std::to_string(dims.size()) + "way.tns", x);
    }
    const tenfold::CsfLayout layout = tenfold::csf_layout_for(x, sparse);
    auto t0 = std::chrono::steady_clock::now();
    double tree_bytes = 0.0;  // all the trees
    std::size_t op_trees = 0;
    {
      tenfold::detail::SparseOperand<double> op(*c, x, layout);
      for (const auto& tree : op.trees()) tree_bytes += tree->bytes();
      op_trees = op.trees().size();
    }
    const double build = seconds_since(t0);
    for (index_t r : ranks) {
      tenfold::CpOptions o;
      o.rank = r;
      o.init = tenfold::CpInit::random;
      o.max_iters = iters;
      o.tol = 0.0;
      // Wall and CPU seconds between the ends of the first and the last iteration.
      double wall_first = 0.0, wall_last = 0.0, cpu_first = 0.0, cpu_last = 0.0;
      o.callback = [&](const tenfold::CpProgress& p) {
        (p.iteration == 1 ? wall_first : wall_last) = p.seconds;
        (p.iteration == 1 ? cpu_first : cpu_last) = cpu_seconds();
        return true;
      };
      const tenfold::CpResult<double> res = tenfold::cp_als(x, o, {}, {layout});
      const double per_iter = (wall_last - wall_first) / (res.iterations - 1);
      const double cpu_per_iter = (cpu_last - cpu_first) / (res.iterations - 1);
      const double mttkrp = res.timings.mttkrp / res.iterations;
      std::printf(
          "{\"order\": %zu, \"nnz\": %lld, \"rank\": %lld, \"threads\": %d, \"csf\": \"%s\", "
          "\"csf_build_s\": %.3f, \"csf_bytes_per_nnz_per_tree\": %.2f, \"s_per_iter\": %.4f, "
          "\"cpu_s_per_iter\": "
          "%.4f, \"mttkrp_s_per_iter\": %.4f, "
          "\"mttkrp_nnz_rank_per_s\": %.3e, \"fit\": %.6f, \"tensor_peak_rss_mb\": %.0f, "
          "\"peak_rss_mb\": %.0f}\n",
          dims.size(), static_cast<long long>(x.nnz()), static_cast<long long>(r),
          tenfold::num_threads(), std::string(tenfold::to_string(layout)).c_str(), build,
          tree_bytes / static_cast<double>(x.nnz()) / static_cast<double>(op_trees), per_iter,
          cpu_per_iter, mttkrp,
          static_cast<double>(x.nnz()) * static_cast<double>(r) * static_cast<double>(dims.size()) /
              mttkrp,
          res.fit, tensor_rss, peak_rss_mb());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparse_cp_bench: %s\n", e.what());
    return 1;
  }
}
