#include "common.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <regex>
#include <type_traits>

#include "distributed.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend,
                 "Compute backend: cpu, cuda, or reference (plain loops in double, slow; for "
                 "checking results)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference"}))
      ->capture_default_str();
}

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_flag("-q,--quiet", o.quiet, "Print no progress on stderr");
  add_backend_option(cmd, o.backend);
  cmd.add_option("--dtype", o.dtype,
                 "Compute in float32 or float64 (default: the input file's dtype)")
      ->check(CLI::IsMember({"float32", "float64"}));
}

namespace {

// factor_<a>.npy for each NumPy axis a.
std::vector<std::string> factor_names(const io::NpyHeader& header) {
  std::vector<std::string> names;
  for (std::size_t ax = 0; ax < header.shape.size(); ++ax)
    names.push_back("factor_" + std::to_string(ax) + ".npy");
  return names;
}

// "--rank" of "-r,--rank": the last of the option's names.
std::string long_name(const std::string& names) { return names.substr(names.rfind(',') + 1); }

}  // namespace

template <class I>
I parse_integer(const std::string& flag, const std::string& text) {
  I value{};
  const char* end = text.data() + text.size();
  const auto [ptr, err] = std::from_chars(text.data(), end, value);
  const bool negative = text.size() > 1 && text[0] == '-';
  // A negative number for an unsigned option is out of range too, not malformed.
  const bool unsigned_negative = std::is_unsigned_v<I> && negative &&
                                 text.find_first_not_of("0123456789", 1) == std::string::npos;
  if (err == std::errc::result_out_of_range || unsigned_negative) {
    throw CLI::ValidationError(flag, "'" + text + "' is out of range (at " +
                                         (negative ? "least " : "most ") +
                                         std::to_string(negative ? std::numeric_limits<I>::min()
                                                                 : std::numeric_limits<I>::max()) +
                                         ")");
  }
  if (err != std::errc() || ptr != end) {
    throw CLI::ValidationError(flag, "'" + text + "' is not an integer");
  }
  return value;
}

template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, I& target,
                                const std::string& description, I least) {
  const std::string flag = long_name(name);
  return cmd
      .add_option_function<std::string>(
          name,
          [&target, flag, least](const std::string& s) {
            target = parse_integer<I>(flag, s);
            if (target < least) {
              throw CLI::ValidationError(
                  flag, "must be at least " + std::to_string(least) + ", got " + s);
            }
          },
          description)
      ->default_str(std::to_string(target));
}

template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, std::vector<I>& target,
                                const std::string& description, I least) {
  const std::string flag = long_name(name);
  return cmd.add_option_function<std::vector<std::string>>(
      name,
      [&target, flag, least](const std::vector<std::string>& lists) {
        // Split here, not by CLI11's delimiter, which drops empty items ("2,,2").
        target.clear();
        for (const std::string& list : lists) {
          for (std::size_t begin = 0;;) {
            const std::size_t end = list.find(',', begin);
            const std::string item = list.substr(begin, end - begin);
            if (item.empty()) {
              throw CLI::ValidationError(flag, "item " + std::to_string(target.size() + 1) +
                                                   " of '" + list + "' is empty");
            }
            target.push_back(parse_integer<I>(flag, item));
            if (target.back() < least) {
              throw CLI::ValidationError(flag, "item " + std::to_string(target.size()) + " of '" +
                                                   list + "' must be at least " +
                                                   std::to_string(least) + ", got " + item);
            }
            if (end == std::string::npos) break;
            begin = end + 1;
          }
        }
      },
      description);
}

template int parse_integer<int>(const std::string&, const std::string&);
template index_t parse_integer<index_t>(const std::string&, const std::string&);
template std::uint64_t parse_integer<std::uint64_t>(const std::string&, const std::string&);
template CLI::Option* add_integer_option<int>(CLI::App&, const std::string&, int&,
                                              const std::string&, int);
template CLI::Option* add_integer_option<index_t>(CLI::App&, const std::string&, index_t&,
                                                  const std::string&, index_t);
template CLI::Option* add_integer_option<std::uint64_t>(CLI::App&, const std::string&,
                                                        std::uint64_t&, const std::string&,
                                                        std::uint64_t);
template CLI::Option* add_integer_option<index_t>(CLI::App&, const std::string&,
                                                  std::vector<index_t>&, const std::string&,
                                                  index_t);

namespace {

namespace fs = std::filesystem;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

// The path with every symlink resolved, also a final one whose target is missing.
fs::path resolve(const fs::path& p) {
  std::error_code ec;
  fs::path at = fs::absolute(p, ec);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, ec)); ++hops) {
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) break;
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  const fs::path canonical = fs::weakly_canonical(at, ec);
  return ec ? at.lexically_normal() : canonical;
}

// Whether `inner` lies inside the folder `outer` (both resolved).
bool inside(const fs::path& inner, const fs::path& outer) {
  const fs::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

// Names a tenfold result folder holds (and the hidden temporaries of an interrupted write).
bool result_file_name(const std::string& name) {
  static const std::regex pattern(
      R"((factor_[0-9]+\.npy|weights\.npy|core\.npy|report\.json|\..*\.tmp\..*))");
  return std::regex_match(name, pattern);
}

// Throws unless a file or folder can be created at `resolved`: its nearest existing
// ancestor must be a folder this process may write in.
void check_creatable(const Output& o, const fs::path& resolved) {
  std::error_code ec;
  fs::path folder = resolved.parent_path();
  while (!fs::exists(folder, ec) && folder.has_relative_path()) folder = folder.parent_path();
  if (!fs::is_directory(folder, ec)) {
    throw IoError("cannot create " + o.flag + " " + quote(o.path) + ": " + quote(folder) +
                  " is not a folder");
  }
  // Permissions do not tell (root passes every check, /proc refuses even root): a hidden
  // folder is made there and removed again.
  const fs::path probe = folder / (".tenfold-probe." + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0700) != 0) {
    throw IoError("cannot create " + o.flag + " " + quote(o.path) + ": cannot write in " +
                  quote(folder) + " (" + std::strerror(errno) + ")");
  }
  ::rmdir(probe.c_str());
}

void check_output(const Output& o, const fs::path& resolved) {
  std::error_code ec;
  const fs::file_status st = fs::status(resolved, ec);
  check_creatable(o, resolved);
  if (!fs::exists(st)) return;
  if (!o.folder) {
    if (fs::is_directory(st)) {
      throw IoError(o.flag + " " + quote(o.path) + " is a folder; give a file name");
    }
    return;
  }
  if (!fs::is_directory(st)) {
    throw IoError(o.flag + " " + quote(o.path) + " exists and is not a folder");
  }
  // The folder is replaced as a whole: it may only hold an earlier result.
  for (const fs::directory_entry& e : fs::directory_iterator(resolved, ec)) {
    const std::string name = e.path().filename().string();
    if (!result_file_name(name) || e.is_directory(ec)) {
      throw IoError(o.flag + " " + quote(o.path) + " holds " + quote(name) +
                    ", which is not part of a tenfold result; the folder is replaced as a "
                    "whole, so give a new or empty folder");
    }
  }
  if (ec) throw IoError("cannot read the folder " + quote(o.path) + ": " + ec.message());
  if (::access(resolved.c_str(), W_OK | X_OK) != 0) {
    throw IoError("cannot replace " + o.flag + " " + quote(o.path) +
                  ": no permission to write in it (" + std::strerror(errno) + ")");
  }
}

}  // namespace

void check_outputs(const std::vector<Output>& outputs, const std::vector<fs::path>& inputs) {
  std::error_code ec;
  std::vector<fs::path> resolved;
  for (const Output& o : outputs) {
    resolved.push_back(resolve(o.path));
    check_output(o, resolved.back());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    for (const fs::path& in : inputs) {
      const fs::path r = resolve(in);
      if (r == resolved[i] || fs::equivalent(in, o.path, ec)) {
        throw IoError(o.flag + " " + quote(o.path) + " is the input file " + quote(in) +
                      "; choose another " + o.flag);
      }
      if (o.folder && inside(r, resolved[i])) {
        throw IoError(quote(in) + " is the input file and lies inside " + o.flag + " " +
                      quote(o.path) + ", which is replaced as a whole; choose another " + o.flag);
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      const Output& p = outputs[j];
      if (resolved[i] == resolved[j] || fs::equivalent(o.path, p.path, ec)) {
        throw IoError(p.flag + " and " + o.flag + " name the same file " + quote(o.path) +
                      "; give them different paths");
      }
      if ((p.folder && inside(resolved[i], resolved[j])) ||
          (o.folder && inside(resolved[j], resolved[i]))) {
        throw IoError(p.flag + " " + quote(p.path) + " and " + o.flag + " " + quote(o.path) +
                      " overlap: one lies inside the other; give separate paths");
      }
    }
  }
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  io::write_file_atomically(path, [&](std::ostream& os) { os << j.dump(2) << '\n'; });
}

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

void add_shape_option(CLI::App& cmd, std::vector<index_t>& shape) {
  add_integer_option(cmd, "--shape", shape,
                     "Shape of a sparse input, comma-separated (default: declared by the file, "
                     "else the largest index of each column)",
                     index_t{1});
}

void require_no_shape(const std::vector<index_t>& shape) {
  if (!shape.empty()) {
    throw CLI::ValidationError(
        "--shape applies to sparse inputs (.tns, .tns.gz, .tfsparse); a .npy file holds its "
        "own shape");
  }
}

template <class T>
SparseTensor<T> load_sparse_input(const std::string& path, const std::vector<index_t>& shape,
                                  io::NpyHeader& header) {
  SparseTensor<T> x = io::load_sparse_file<T>(path, shape);
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
