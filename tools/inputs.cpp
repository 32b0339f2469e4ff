// The program's inputs: .npy headers and arrays checked in NumPy's terms, sparse files,
// NumPy axes of a loaded tensor, the dtype to compute in.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common.hpp"
#include "distributed.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {

int numpy_axis(const io::NpyHeader& header, int mode) {
  const int order = static_cast<int>(header.shape.size());
  return header.fortran_order ? mode : order - 1 - mode;
}

std::string shape_text(const std::vector<index_t>& shape) {
  std::string s;
  for (index_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + (shape.size() == 1 ? ",)" : ")");
}

io::NpyHeader read_input_header(const std::string& path) {
  io::NpyHeader header = io::read_npy_header(path);
  for (std::size_t ax = 0; ax < header.shape.size(); ++ax) {
    if (header.shape[ax] == 0) {
      throw InvalidArgument("input of shape " + shape_text(header.shape) + " is empty (axis " +
                            std::to_string(ax) + " has size 0)");
    }
  }
  return header;
}

std::string numpy_index_text(const io::NpyHeader& header, const std::vector<index_t>& dims,
                             index_t linear) {
  // Column-major multi-index in tenfold's modes, printed in NumPy axis order.
  std::vector<index_t> idx;
  for (index_t d : dims) {
    idx.push_back(linear % d);
    linear /= d;
  }
  std::string where = "[";
  for (std::size_t ax = 0; ax < idx.size(); ++ax) {
    where +=
        (ax ? ", " : "") +
        std::to_string(idx[static_cast<std::size_t>(numpy_axis(header, static_cast<int>(ax)))]);
  }
  return where + "]";
}

template <class T>
std::vector<std::uint8_t> observed_entries(const Tensor<T>& x, index_t& n_observed) {
  std::vector<std::uint8_t> observed(static_cast<std::size_t>(x.numel()));
  n_observed = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    observed[static_cast<std::size_t>(i)] = std::isnan(x[i]) ? 0 : 1;
    n_observed += observed[static_cast<std::size_t>(i)];
  }
  return observed;
}

namespace {

// A read's progress on stderr once it has taken a few seconds: a line every few seconds.
io::ReadProgress read_progress(const std::string& path) {
  constexpr double kQuiet = 3.0;  // seconds before the first line, and between lines
  using Clock = std::chrono::steady_clock;
  return
      [path, start = Clock::now(), shown = 0.0](std::uint64_t done, std::uint64_t total) mutable {
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (seconds - shown < kQuiet || total == 0) return;
        shown = seconds;
        std::fprintf(stderr, "reading %s: %.0f %% after %.0f s\n", path.c_str(),
                     100.0 * static_cast<double>(done) / static_cast<double>(total), seconds);
      };
}

}  // namespace

template <class T>
SparseTensor<T> load_sparse_input(const std::string& path, const std::vector<index_t>& shape,
                                  io::NpyHeader& header) {
  SparseTensor<T> x = io::load_sparse_file<T>(path, shape, read_progress(path));
  header = io::NpyHeader();
  header.fortran_order = true;
  header.shape = x.dims();
  return x;
}

void require_single_cpu_process(const std::string& command, const std::string& backend) {
  if (distributed()) throw InvalidArgument(command + " does not run under mpirun");
  if (backend != "cpu") {
    throw InvalidArgument(command + " runs on --backend cpu only, got --backend " + backend);
  }
}

template <class T>
Tensor<T> load_input(const std::string& path, const io::NpyHeader& header, const NanPolicy& nan) {
  Tensor<T> x = io::load_npy<T>(path);
  for (index_t i = 0; i < x.numel(); ++i) {
    if (std::isfinite(x[i]) || (nan.keep && std::isnan(x[i]))) continue;
    const bool is_nan = std::isnan(x[i]);
    throw InvalidArgument(std::string("input has a non-finite entry (") + (is_nan ? "NaN" : "Inf") +
                          ") at NumPy index " + numpy_index_text(header, x.dims(), i) +
                          (is_nan && !nan.hint.empty() ? "; " + nan.hint : ""));
  }
  return x;
}

template Tensor<float> load_input<float>(const std::string&, const io::NpyHeader&,
                                         const NanPolicy&);
template Tensor<double> load_input<double>(const std::string&, const io::NpyHeader&,
                                           const NanPolicy&);
template std::vector<std::uint8_t> observed_entries<float>(const Tensor<float>&, index_t&);
template std::vector<std::uint8_t> observed_entries<double>(const Tensor<double>&, index_t&);
template SparseTensor<float> load_sparse_input<float>(const std::string&,
                                                      const std::vector<index_t>&, io::NpyHeader&);
template SparseTensor<double> load_sparse_input<double>(const std::string&,
                                                        const std::vector<index_t>&,
                                                        io::NpyHeader&);

io::DType choose_dtype(const std::string& requested, io::DType stored) {
  if (requested.empty()) return stored;
  if (requested == "float32") return io::DType::float32;
  if (requested == "float64") return io::DType::float64;
  throw InvalidArgument("unknown dtype '" + requested + "' (expected float32 or float64)");
}

}  // namespace tenfold::cli
