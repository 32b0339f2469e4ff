// The calibration statistics file of data-aware compression (CalibrationFile): opens it
// and checks its token count, checks that its moments belong to the checkpoint's layers
// and that every layer has one, and reads a layer's input moments validated (dtype,
// shape, finite, symmetric and positive semi-definite to the round-off of the stored
// dtype), naming the tensor and the layer in every refusal.
#include <limits>
#include <set>
#include <string>

#include "attention/checkpoint_parts.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention {
namespace {

bool is_moment_name(const std::string& name, std::string& prefix) {
  for (const char* suffix : {"key_input_moment", "input_moment"}) {
    const std::string s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      prefix = name.substr(0, name.size() - s.size());
      return true;
    }
  }
  return false;
}

}  // namespace

CalibrationFile::CalibrationFile(const std::filesystem::path& path) : file_(path) {
  const std::string where = "calibration file '" + path.string() + "'";
  const auto& meta = file_.metadata();
  const auto tokens = meta.find("tenfold.calibration.tokens");
  if (tokens == meta.end()) {
    throw IoError(where + " has no tenfold.calibration.tokens metadata (the token count)");
  }
  std::size_t used = 0;
  try {
    tokens_ = std::stoll(tokens->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != tokens->second.size() || tokens_ < 1) {
    throw IoError(where + ": tenfold.calibration.tokens is '" + tokens->second +
                  "', expected a positive integer");
  }
  if (const auto src = meta.find("tenfold.calibration.source"); src != meta.end()) {
    source_ = src->second;
  }
}

void CalibrationFile::check_prefixes(const std::vector<std::string>& prefixes) const {
  const std::set<std::string> known(prefixes.begin(), prefixes.end());
  for (const io::SafetensorsEntry& e : file_.tensors()) {
    std::string prefix;
    if (!is_moment_name(e.name, prefix) || !known.count(prefix)) {
      throw IoError("calibration tensor '" + e.name +
                    "' belongs to no attention layer of the checkpoint (expected <P>input_moment "
                    "or <P>key_input_moment for a layer prefix P such as '" +
                    prefixes.front() + "')");
    }
  }
  for (const std::string& p : prefixes) {
    if (!file_.find(p + "input_moment")) {
      throw IoError("the calibration file has no '" + p + "input_moment' for that layer");
    }
  }
}

std::vector<InputMoments> CalibrationFile::layer_moments(
    const std::vector<std::pair<std::string, int>>& layers, index_t input_dim,
    const std::function<void(const std::string&, const std::vector<index_t>&)>& check) const {
  std::vector<std::string> prefixes;
  for (const auto& layer : layers) prefixes.push_back(layer.first);
  check_prefixes(prefixes);
  if (check) {
    for (const std::string& prefix : prefixes)
      check(prefix, file_.at(prefix + "input_moment").shape);
  }
  std::vector<InputMoments> out;
  for (const auto& [prefix, index] : layers) out.push_back(moments(prefix, index, input_dim));
  return out;
}

InputMoments CalibrationFile::moments(const std::string& prefix, int layer,
                                      index_t input_dim) const {
  const auto read = [&](const std::string& name) {
    const io::SafetensorsEntry& e = file_.at(name);
    const std::string what =
        "calibration tensor '" + name + "' (layer " + std::to_string(layer) + ")";
    if (e.dtype != "F32" && e.dtype != "F64") {
      throw IoError(what + " has dtype " + e.dtype + ", expected F32 or F64");
    }
    if (e.shape != std::vector<index_t>{input_dim, input_dim}) {
      throw DimensionMismatch(what + " has shape " + detail::shape_text(e.shape) + ", expected (" +
                              std::to_string(input_dim) + ", " + std::to_string(input_dim) + ")");
    }
    Matrix<double> m = file_.read_matrix<double>(name);
    validate_moment(m, input_dim, what,
                    e.dtype == "F32" ? std::numeric_limits<float>::epsilon()
                                     : std::numeric_limits<double>::epsilon());
    return m;
  };
  InputMoments mo;
  mo.query = read(prefix + "input_moment");
  if (file_.find(prefix + "key_input_moment")) mo.key = read(prefix + "key_input_moment");
  return mo;
}

}  // namespace tenfold::attention
