// The output of both checkpoint conversions (checkpoint.cpp: collaborative form;
// rotary_checkpoint.cpp: band latents): a CheckpointWriter is made before any work, so
// that an output that is one of the files the conversion reads is refused first; it
// collects the tensors that replace input tensors, and writes, atomically, the input's
// tensors in order and bit for bit less the replaced ones, each group of new tensors
// where its input tensor stood, and the input's metadata with the conversion's keys.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tenfold/safetensors.hpp"

namespace tenfold::attention::detail {

/// The bytes of `v` as they lie in memory, for io::save_safetensors.
template <class T>
std::vector<std::byte> as_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// A file a conversion reads, which its output may not be.
struct ReadFile {
  std::filesystem::path path;  ///< empty: none (no calibration file)
  const char* what;            ///< for the message: "the input checkpoint", ...
};

/// The tenfold.calibration.* metadata of a data-aware conversion.
struct CalibrationRecord {
  std::filesystem::path file;
  std::int64_t tokens = 0;
  std::string source;
  double damping = 0.0;
  std::vector<double> data_errors;  ///< per layer, data space
};

/// One output checkpoint of a conversion, from the refusal of a bad output to the write.
class CheckpointWriter {
 public:
  /// Throws IoError "output '<output>' is <what>; choose another output" when `output`
  /// exists and is one of `reads` (compared by identity, links included).
  CheckpointWriter(std::filesystem::path output, std::initializer_list<ReadFile> reads);

  /// Leaves the input tensor `name` out of the output.
  void replace(const std::string& name);
  /// Writes a new tensor just before the input tensor `at` (where it stood, if
  /// replaced), after those inserted there before.
  void insert(const std::string& at, std::string name, std::string dtype,
              std::vector<index_t> shape, std::vector<std::byte> bytes);

  /// Floating-point elements of the input, and of the output (every new tensor counted).
  struct Params {
    index_t before = 0, after = 0;
  };
  /// Writes the output (io::save_safetensors, atomically): `input`'s tensors as above,
  /// its metadata with `metadata`'s keys set over it, and the errors:
  /// tenfold.relative_errors (per layer, weight space) and tenfold.objective ("weight";
  /// "data" with `calibration`, which adds tenfold.calibration.{relative_errors, file,
  /// tokens, source, damping}).
  Params write(const io::SafetensorsFile& input, std::map<std::string, std::string> metadata,
               const std::vector<double>& relative_errors,
               const CalibrationRecord* calibration) const;
  /// write(), then the report's parameter totals and its seconds since `start`.
  template <class Report>
  void write(Report& report, std::chrono::steady_clock::time_point start,
             const io::SafetensorsFile& input, std::map<std::string, std::string> metadata,
             const std::vector<double>& relative_errors,
             const CalibrationRecord* calibration) const {
    const Params p = write(input, std::move(metadata), relative_errors, calibration);
    report.total_params_before = p.before;
    report.total_params_after = p.after;
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  struct NewTensor {
    std::string name, dtype;
    std::vector<index_t> shape;
    std::vector<std::byte> bytes;
  };
  std::filesystem::path output_;
  std::set<std::string> replaced_;
  std::map<std::string, std::vector<NewTensor>> inserted_;  // by the input tensor they precede
};

}  // namespace tenfold::attention::detail
