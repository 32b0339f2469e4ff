#include "common.hpp"

#include <fstream>

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

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  io::write_file_atomically(path, [&](std::ostream& os) { os << j.dump(2) << '\n'; });
}

int numpy_axis(const io::NpyHeader& header, int mode) {
  const int order = static_cast<int>(header.shape.size());
  return header.fortran_order ? mode : order - 1 - mode;
}

std::string dtype_name(io::DType t) { return t == io::DType::float32 ? "float32" : "float64"; }

io::DType choose_dtype(const std::string& requested, io::DType stored) {
  if (requested.empty()) return stored;
  if (requested == "float32") return io::DType::float32;
  if (requested == "float64") return io::DType::float64;
  throw InvalidArgument("unknown dtype '" + requested + "' (expected float32 or float64)");
}

}  // namespace tenfold::cli
