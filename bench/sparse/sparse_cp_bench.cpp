// Sparse CP-ALS speed on synthetic power-law tensors or a file (docs/sparse.md, "Speed").
//
//   sparse_cp_bench [--nnz N] [--ranks 16,64] [--iters K] [--orders 3,4]
//                   [--shape I,J,K | --preset bench3|bench4|nell2|enron]
//                   [--csf auto|all|two|one] [--save DIR] [--write FILE] [--input FILE]
//                   [--threads T]
//
// Draws FROSTT-like tensors: each index floor(I_n u^3) (u uniform, so a few slices hold
// most entries, as in FROSTT's data), duplicates summed (fewer than N entries remain),
// values uniform in (0, 1]. The shapes: by default the presets bench3 (200000 x 100000 x
// 2000) and bench4 (100000 x 50000 x 2000 x 500), those of --orders; --shape or --preset
// one shape (nell2: 12092 x 9184 x 28818, FROSTT's NELL-2; enron: 6066 x 5699 x 244268 x
// 1176, FROSTT's Enron). --write FILE writes the one tensor drawn (.tns, .tns.gz or
// .tfsparse, by extension) and stops; --input FILE decomposes a file's tensor instead of
// drawing one. Prints one JSON line per tensor and rank: the CSF layout (--csf: one tree
// per mode, two, one, or auto, which picks by the available memory), the seconds to build
// the trees and their bytes per nonzero (per tree), the wall and CPU seconds per
// CP-ALS iteration (between the ends of sweep 1 and sweep K, from a random start), the
// MTTKRP share, the MTTKRP rate in nonzeros x rank x order per second, and the peak
// resident memory of the process once the tensor is made (the generator's coordinates and
// the tensor's sort, or the file's read, included) and so far. With --save, writes each
// tensor drawn as DIR/power_law_<order>way.tns for other programs to read. The trees are
// built once (timed), from the tensor taken as cp_als(std::move(x), ...) takes it (the
// program does), and every rank runs cp_als's loop on them. A run that does not fit says
// so in one line. --threads T: the library's thread count (tenfold::set_num_threads, as
// SPLATT's -t), where the default is the environment's or the processor count.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/compute.hpp"
#include "core/random.hpp"
#include "cp/cp_als.hpp"
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

// Comma-separated integers.
std::vector<index_t> integers(const char* p) {
  std::vector<index_t> out;
  while (*p != '\0') {
    char* end = nullptr;
    out.push_back(std::strtoll(p, &end, 10));
    if (end == p) throw std::invalid_argument(std::string("not a list of integers: ") + p);
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

const std::pair<const char*, std::vector<index_t>> presets[] = {
    {"bench3", {200000, 100000, 2000}},
    {"bench4", {100000, 50000, 2000, 500}},
    {"nell2", {12092, 9184, 28818}},
    {"enron", {6066, 5699, 244268, 1176}}};

std::vector<index_t> preset(const std::string& name) {
  for (const auto& [n, dims] : presets)
    if (name == n) return dims;
  throw std::invalid_argument("unknown preset '" + name +
                              "' (expected bench3, bench4, nell2 or enron)");
}

int run(int argc, char** argv) {
  index_t nnz = 1000000;
  std::vector<index_t> ranks = {16, 64}, orders = {3, 4};
  int iters = 5;
  std::string save, write, input;
  std::vector<std::vector<index_t>> shapes = {preset("bench3"), preset("bench4")};
  bool one_shape = false;
  tenfold::SparseCpOptions sparse;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--nnz") nnz = std::stoll(value);
    if (flag == "--threads") tenfold::set_num_threads(std::stoi(value));
    if (flag == "--iters") iters = std::stoi(value);
    if (flag == "--save") save = value;
    if (flag == "--write") write = value;
    if (flag == "--input") input = value;
    if (flag == "--csf") sparse.csf = tenfold::parse_csf_layout(value);
    if (flag == "--ranks") ranks = integers(value);
    if (flag == "--orders") orders = integers(value);
    if (flag == "--shape" || flag == "--preset") {
      shapes = {flag == "--shape" ? integers(value) : preset(value)};
      one_shape = true;
    }
  }
  if (!one_shape) {
    std::erase_if(shapes, [&](const std::vector<index_t>& dims) {
      return std::find(orders.begin(), orders.end(), static_cast<index_t>(dims.size())) ==
             orders.end();
    });
  }
  if (!write.empty() && shapes.size() != 1) {
    throw std::invalid_argument("--write takes one tensor: give --shape, --preset or one order");
  }
  if (!input.empty()) shapes = {{}};
  auto c = tenfold::detail::make_compute<double>(tenfold::Backend::cpu);
  for (const auto& shape : shapes) {
    tenfold::SparseTensor<double> x =
        input.empty() ? power_law(shape, nnz, 1) : tenfold::io::load_sparse_file<double>(input);
    const std::vector<index_t> dims = x.dims();
    const index_t x_nnz = x.nnz();
    const double tensor_rss = peak_rss_mb();
    if (!write.empty()) {
      tenfold::io::save_sparse_file(write, x);
      std::printf("{\"wrote\": \"%s\", \"order\": %zu, \"nnz\": %lld}\n", write.c_str(),
                  dims.size(), static_cast<long long>(x.nnz()));
      return 0;
    }
    if (!save.empty()) {
      tenfold::io::save_tns(save + "/power_law_" + std::to_string(dims.size()) + "way.tns", x);
    }
    const tenfold::CsfLayout layout = tenfold::csf_layout_for(x, sparse, true);  // taken below
    // The operand of cp_als(std::move(x), ...): its trees built one at a time from the
    // taken entries, which go as the last tree reads them.
    auto t0 = std::chrono::steady_clock::now();
    tenfold::detail::SparseOperand<double> op(*c, std::move(x), layout);
    const double build = seconds_since(t0);
    double tree_bytes = 0.0;  // all the trees
    for (const auto& tree : op.trees()) tree_bytes += tree->bytes();
    const std::size_t op_trees = op.trees().size();
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
      // cp_als's loop (its starts) on the trees, the operand as a fresh one (no row-major
      // copy of a factor taken as current).
      for (int m = 0; m < op.order(); ++m) op.factor_changed(m);
      const tenfold::CpResult<double> res =
          tenfold::detail::run_cp_starts<double>(op, *c, o, {}, std::chrono::steady_clock::now());
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
          dims.size(), static_cast<long long>(x_nnz), static_cast<long long>(r),
          tenfold::num_threads(), std::string(tenfold::to_string(layout)).c_str(), build,
          tree_bytes / static_cast<double>(x_nnz) / static_cast<double>(op_trees), per_iter,
          cpu_per_iter, mttkrp,
          static_cast<double>(x_nnz) * static_cast<double>(r) * static_cast<double>(dims.size()) /
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
