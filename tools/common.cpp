#include "common.hpp"

#include <cmath>

#include "tenfold/error.hpp"

namespace tenfold::cli {

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_flag("-q,--quiet", o.quiet, "Print no progress on stderr");
  cmd.add_option("--backend", o.backend, "Compute backend: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd.add_option("--dtype", o.dtype,
                 "Compute in float32 or float64 (default: the input file's dtype)")
      ->check(CLI::IsMember({"float32", "float64"}));
}

void prepare_output_dir(const std::filesystem::path& dir, const std::filesystem::path& input,
                        const std::vector<std::string>& outputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw IoError("output path '" + dir.string() + "' exists and is not a folder");
  }
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create output folder '" + dir.string() + "': " + ec.message());
  for (const std::string& name : outputs) {
    const fs::path out = dir / name;
    if (fs::exists(out, ec) && fs::equivalent(out, input, ec)) {
      throw IoError("output file '" + out.string() + "' is the input file; choose another --out");
    }
  }
}

void prepare_output_file(const std::filesystem::path& file, const std::filesystem::path& input) {
  prepare_output_dir(file.parent_path().empty() ? "." : file.parent_path(), input,
                     {file.filename().string()});
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  io::write_file_atomically(path, [&](std::ostream& os) { os << j.dump(2) << '\n'; });
}

int numpy_axis(const io::NpyHeader& header, int mode) {
  const int order = static_cast<int>(header.shape.size());
  return header.fortran_order ? mode : order - 1 - mode;
}

template <class T>
Tensor<T> load_input(const std::string& path, const io::NpyHeader& header, const NanPolicy& nan) {
  Tensor<T> x = io::load_npy<T>(path);
  for (index_t i = 0; i < x.numel(); ++i) {
    if (std::isfinite(x[i]) || (nan.keep && std::isnan(x[i]))) continue;
    // Column-major multi-index in tenfold's modes, printed in NumPy axis order.
    std::vector<index_t> idx(static_cast<std::size_t>(x.order()));
    index_t rest = i;
    for (int n = 0; n < x.order(); ++n) {
      idx[static_cast<std::size_t>(n)] = rest % x.dim(n);
      rest /= x.dim(n);
    }
    std::string where;
    for (int ax = 0; ax < x.order(); ++ax) {
      where +=
          (ax ? ", " : "") + std::to_string(idx[static_cast<std::size_t>(numpy_axis(header, ax))]);
    }
    const bool is_nan = std::isnan(x[i]);
    throw InvalidArgument(std::string("input has a non-finite entry (") + (is_nan ? "NaN" : "Inf") +
                          ") at NumPy index [" + where + "]" +
                          (is_nan && !nan.hint.empty() ? "; " + nan.hint : ""));
  }
  return x;
}

template <class T>
void save_factors(const std::filesystem::path& dir, const io::NpyHeader& header,
                  const std::vector<Matrix<T>>& factors) {
  const std::vector<std::string> names = factor_names(header);
  for (std::size_t ax = 0; ax < names.size(); ++ax) {
    const Matrix<T>& f =
        factors[static_cast<std::size_t>(numpy_axis(header, static_cast<int>(ax)))];
    io::save_npy<T>(dir / names[ax], TensorView<const T>(f.data(), {f.rows(), f.cols()}));
  }
}

std::vector<std::string> factor_names(const io::NpyHeader& header) {
  std::vector<std::string> names;
  for (std::size_t ax = 0; ax < header.shape.size(); ++ax)
    names.push_back("factor_" + std::to_string(ax) + ".npy");
  return names;
}

template Tensor<float> load_input<float>(const std::string&, const io::NpyHeader&,
                                         const NanPolicy&);
template Tensor<double> load_input<double>(const std::string&, const io::NpyHeader&,
                                           const NanPolicy&);
template void save_factors<float>(const std::filesystem::path&, const io::NpyHeader&,
                                  const std::vector<Matrix<float>>&);
template void save_factors<double>(const std::filesystem::path&, const io::NpyHeader&,
                                   const std::vector<Matrix<double>>&);

io::DType choose_dtype(const std::string& requested, io::DType stored) {
  if (requested.empty()) return stored;
  if (requested == "float32") return io::DType::float32;
  if (requested == "float64") return io::DType::float64;
  throw InvalidArgument("unknown dtype '" + requested + "' (expected float32 or float64)");
}

}  // namespace tenfold::cli
