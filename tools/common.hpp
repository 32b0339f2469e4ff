// Shared pieces of the `tenfold` subcommands: option parsing (options.cpp), output
// checks and writing (outputs.cpp), input loading (inputs.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenfold/io.hpp"
#include "tenfold/sparse.hpp"
#include "tenfold/tensor.hpp"

namespace tenfold::cli {

/// A subcommand: its parser node, its work, run after a successful parse (returns the
/// exit status), and the flags of the library options it sets under another name (the
/// library's field name -> the flag), by which an InvalidOption from the library is
/// reported; a field named like its flag (max_iters: --max-iters) needs no entry.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  std::map<std::string, std::string> flags;
};

/// The flag by which `cmd` sets the library option `field`: its entry in cmd.flags, else
/// the command's flag of the same name with '-' for '_', else "" (none).
std::string flag_of(const Command& cmd, const std::string& field);

/// Options every subcommand has.
struct CommonOptions {
  bool quiet = false;
  std::string backend = "cpu";
  std::string dtype;  ///< "", "float32" or "float64" ("" = as stored)
};

/// Adds the required -o/--out (an output folder written whole) to a subcommand.
void add_out_option(CLI::App& cmd, std::string& out);

/// Adds --backend (cpu, cuda or reference) to a subcommand.
void add_backend_option(CLI::App& cmd, std::string& backend);

/// Adds --quiet, --backend and --dtype to a subcommand.
void add_common_options(CLI::App& cmd, CommonOptions& o);

/// Parses a whole decimal integer of type I; throws CLI::ValidationError naming
/// `flag` when the text is not one or lies outside the range of I (CLI11 itself
/// would silently saturate).
template <class I>
I parse_integer(const std::string& flag, const std::string& text);

/// An integer option (one value, or a comma-separated list for std::vector<I>)
/// parsed by parse_integer. `least` is for options whose library field reads 0 as
/// "not given" (--heads), so that the library cannot tell a typed 0 from none.
template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, I& target,
                                const std::string& description,
                                I least = std::numeric_limits<I>::min());
template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, std::vector<I>& target,
                                const std::string& description,
                                I least = std::numeric_limits<I>::min());

/// One output of a command: a file, or a result folder that is written whole (see
/// write_result_folder) and may only replace an earlier result.
struct Output {
  std::string flag;  ///< the option that named it, for messages ("--out")
  std::filesystem::path path;
  bool folder = false;
};

/// Checks, before any work and without writing anything, that every output can be
/// created: its nearest existing folder is writable, a file output is not a folder,
/// a result folder is absent or holds only files of an earlier result; that no two
/// outputs are the same file (also through symlinks and hard links) and no output is
/// an input or holds one. Throws IoError naming the flag and the path.
void check_outputs(const std::vector<Output>& outputs,
                   const std::vector<std::filesystem::path>& inputs);

/// Writes pretty JSON atomically.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

/// NumPy axis of each tenfold mode of a loaded array: a C-order file has its
/// modes reversed (numpy axis a = mode N-1-a), a Fortran-order file does not.
int numpy_axis(const io::NpyHeader& header, int mode);

/// Reads the header of a .npy input; throws InvalidArgument naming a size-0 axis
/// by its NumPy number (the library's own check names tenfold's mode order).
io::NpyHeader read_input_header(const std::string& path);

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

/// "[i, j, ...]": the NumPy index of the entry at column-major `linear` (in tenfold's
/// modes, `dims`) of an input read with `header`.
std::string numpy_index_text(const io::NpyHeader& header, const std::vector<index_t>& dims,
                             index_t linear);

/// The mask of --missing nan: 1 where x is not NaN; `n_observed` counts them.
template <class T>
std::vector<std::uint8_t> observed_entries(const Tensor<T>& x, index_t& n_observed);

/// Adds --shape I_0,I_1,...: the shape of a sparse input (a .tns file written elsewhere
/// does not declare it, and its trailing empty slices would be lost).
void add_shape_option(CLI::App& cmd, std::vector<index_t>& shape);

/// Throws CLI::ValidationError when --shape was given for a dense (.npy) input.
void require_no_shape(const std::vector<index_t>& shape);

/// Loads a sparse input file (.tns, .tns.gz, .tfsparse) of the shape given (empty: the
/// file's own) and sets `header` to name its axes as a Fortran-order array's: axis n is
/// coordinate column n.
template <class T>
SparseTensor<T> load_sparse_input(const std::string& path, const std::vector<index_t>& shape,
                                  io::NpyHeader& header);

/// Throws InvalidArgument unless `command` runs as one process on --backend cpu.
void require_single_cpu_process(const std::string& command, const std::string& backend);

/// Writes dir/factor_<a>.npy (I_a x R) for each NumPy axis a of the input.
template <class T>
void save_factors(const std::filesystem::path& dir, const io::NpyHeader& header,
                  const std::vector<Matrix<T>>& factors);

/// A NumPy shape as Python prints it: "(10, 8, 6)".
std::string shape_text(const std::vector<index_t>& shape);

/// "float32" / "float64"
template <class T>
constexpr const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

/// The fields every decomposition's report.json starts with: the command, the input file,
/// its NumPy shape, the dtype and the rank.
template <class T>
nlohmann::json report_head(const char* command, const std::string& input,
                           const std::vector<index_t>& shape, index_t rank) {
  return {{"command", command},
          {"input", input},
          {"shape", shape},
          {"dtype", dtype_name<T>()},
          {"rank", rank}};
}

/// Resolves --dtype against the stored dtype; throws InvalidArgument for other names.
io::DType choose_dtype(const std::string& requested, io::DType stored);

/// run.template operator()<T>(npy) with T float or double: for a sparse file npy is
/// null and T float64 unless --dtype float32; for a .npy, its header and the dtype that
/// choose_dtype picks.
template <class Run>
int run_on_input(const std::string& input, const std::string& dtype, const Run& run) {
  if (io::is_sparse_file(input)) {
    return dtype == "float32" ? run.template operator()<float>(nullptr)
                              : run.template operator()<double>(nullptr);
  }
  const io::NpyHeader header = read_input_header(input);
  return choose_dtype(dtype, header.dtype) == io::DType::float32
             ? run.template operator()<float>(&header)
             : run.template operator()<double>(&header);
}

}  // namespace tenfold::cli
