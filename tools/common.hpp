// Shared pieces of the `tenfold` subcommands: output folders, reports, progress.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenfold/io.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::cli {

/// A subcommand: its parser node, and its work, run after a successful parse
/// (returns the exit status).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// Options every subcommand has.
struct CommonOptions {
  bool quiet = false;
  std::string backend = "cpu";
  std::string dtype;  ///< "", "float32" or "float64" ("" = as stored)
};

/// Adds --quiet, --backend and --dtype to a subcommand.
void add_common_options(CLI::App& cmd, CommonOptions& o);

/// Creates `dir` (and parents) if needed; throws IoError if it is not a folder
/// or if any of `outputs` (file names inside dir) is the same file as `input`.
void prepare_output_dir(const std::filesystem::path& dir, const std::filesystem::path& input,
                        const std::vector<std::string>& outputs);

/// Creates the folder of `file` if needed; throws IoError if `file` is `input`.
void prepare_output_file(const std::filesystem::path& file, const std::filesystem::path& input);

/// Writes pretty JSON atomically.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

/// NumPy axis of each tenfold mode of a loaded array: a C-order file has its
/// modes reversed (numpy axis a = mode N-1-a), a Fortran-order file does not.
int numpy_axis(const io::NpyHeader& header, int mode);

/// How load_input treats NaN entries: refused (with `hint` appended to the message
/// when given, e.g. the flag that accepts them), or kept (missing values).
struct NanPolicy {
  bool keep = false;
  std::string hint;
};

/// Loads a .npy input as T; throws InvalidArgument naming the first NaN or Inf
/// entry by its NumPy index (the library's own check names tenfold's mode order).
template <class T>
Tensor<T> load_input(const std::string& path, const io::NpyHeader& header,
                     const NanPolicy& nan = {});

/// Writes dir/factor_<a>.npy (I_a x R) for each NumPy axis a of the input.
template <class T>
void save_factors(const std::filesystem::path& dir, const io::NpyHeader& header,
                  const std::vector<Matrix<T>>& factors);

/// The file names save_factors writes, for prepare_output_dir.
std::vector<std::string> factor_names(const io::NpyHeader& header);

/// "float32" / "float64"
template <class T>
constexpr const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

/// Resolves --dtype against the stored dtype; throws InvalidArgument for other names.
io::DType choose_dtype(const std::string& requested, io::DType stored);

}  // namespace tenfold::cli
