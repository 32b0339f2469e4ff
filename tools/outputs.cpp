// The program's outputs: every output checked before any work (creatable, not an input,
// no two the same file), JSON reports and factor files.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <string>

#include "common.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {

namespace {

// factor_<a>.npy for each NumPy axis a.
std::vector<std::string> factor_names(const io::NpyHeader& header) {
  std::vector<std::string> names;
  for (std::size_t ax = 0; ax < header.shape.size(); ++ax)
    names.push_back("factor_" + std::to_string(ax) + ".npy");
  return names;
}

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

template void save_factors<float>(const std::filesystem::path&, const io::NpyHeader&,
                                  const std::vector<Matrix<float>>&);
template void save_factors<double>(const std::filesystem::path&, const io::NpyHeader&,
                                   const std::vector<Matrix<double>>&);

}  // namespace tenfold::cli
