// The one writer of output checkpoints (checkpoint_writer.hpp): refuses an output that
// is one of the conversion's inputs, then writes the input's tensors bit for bit with
// the replaced ones left out and the new ones where they stood, counting parameters
// before and after, and the input's metadata with the conversion's keys and errors.
#include "attention/checkpoint_writer.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "attention/checkpoint_parts.hpp"
#include "tenfold/error.hpp"

namespace tenfold::attention::detail {
namespace {

void record_errors(std::map<std::string, std::string>& metadata,
                   const std::vector<double>& relative_errors,
                   const CalibrationRecord* calibration) {
  nlohmann::json errors = nlohmann::json::array();
  for (const double e : relative_errors) errors.push_back(e);
  metadata["tenfold.relative_errors"] = errors.dump();
  metadata["tenfold.objective"] = calibration ? "data" : "weight";
  if (!calibration) return;
  nlohmann::json data_errors = nlohmann::json::array();
  for (const double e : calibration->data_errors) data_errors.push_back(e);
  metadata["tenfold.calibration.relative_errors"] = data_errors.dump();
  metadata["tenfold.calibration.file"] = calibration->file.filename().string();
  metadata["tenfold.calibration.tokens"] = std::to_string(calibration->tokens);
  metadata["tenfold.calibration.source"] = calibration->source;
  metadata["tenfold.calibration.damping"] = nlohmann::json(calibration->damping).dump();
}

}  // namespace

CheckpointWriter::CheckpointWriter(std::filesystem::path output,
                                   std::initializer_list<ReadFile> reads)
    : output_(std::move(output)) {
  // Every file read is an input, compared by identity (links included).
  std::error_code ec;
  for (const ReadFile& r : reads) {
    if (!r.path.empty() && std::filesystem::exists(output_, ec) &&
        std::filesystem::equivalent(r.path, output_, ec)) {
      throw IoError("output '" + output_.string() + "' is " + r.what + "; choose another output");
    }
  }
}

void CheckpointWriter::replace(const std::string& name) { replaced_.insert(name); }

void CheckpointWriter::insert(const std::string& at, std::string name, std::string dtype,
                              std::vector<index_t> shape, std::vector<std::byte> bytes) {
  inserted_[at].push_back({std::move(name), std::move(dtype), std::move(shape), std::move(bytes)});
}

CheckpointWriter::Params CheckpointWriter::write(const io::SafetensorsFile& input,
                                                 std::map<std::string, std::string> metadata,
                                                 const std::vector<double>& relative_errors,
                                                 const CalibrationRecord* calibration) const {
  record_errors(metadata, relative_errors, calibration);
  const auto numel = [](const std::vector<index_t>& shape) { return checked_numel(shape); };
  Params params;
  // Output: the input's tensors in order, the new ones where their input tensor stood,
  // everything else copied bit for bit.
  std::vector<std::vector<std::byte>> kept;
  kept.reserve(input.tensors().size());
  std::vector<io::SafetensorsTensor> out;
  for (const io::SafetensorsEntry& e : input.tensors()) {
    if (is_float_dtype(e.dtype)) params.before += numel(e.shape);
    if (auto it = inserted_.find(e.name); it != inserted_.end()) {
      for (const NewTensor& t : it->second) {
        out.push_back({t.name, t.dtype, t.shape, t.bytes});
        params.after += numel(t.shape);
      }
    }
    if (replaced_.count(e.name)) continue;
    kept.push_back(input.read_bytes(e.name));
    out.push_back({e.name, e.dtype, e.shape, kept.back()});
    if (is_float_dtype(e.dtype)) params.after += numel(e.shape);
  }
  std::map<std::string, std::string> meta = input.metadata();
  for (const auto& [key, value] : metadata) meta[key] = value;
  io::save_safetensors(output_, out, meta);
  return params;
}

}  // namespace tenfold::attention::detail
