// The per-layer table and report of `tenfold attention compress`, for both forms
// (collaborative layers and shared rotary keys): one printer, one JSON writer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::cli {

/// A form's own integer column: its header, printed width and report.json name.
struct LayerColumn {
  const char* header;
  int width;
  const char* json;
};

/// One layer's row: what both forms report, the form's own columns (`lead` before the
/// errors, `errors` after the query/key ones, `trail` after those, in the order the table
/// was made with), and report-only fields (`more`).
struct LayerRow {
  int index = 0;
  std::string prefix;
  double relative_error = 0.0;
  std::optional<double> data_error;
  double seconds = 0.0;
  index_t params_before = 0, params_after = 0;
  std::vector<long long> lead, trail;
  std::vector<double> errors;
  nlohmann::json more = nlohmann::json::object();
};

/// The fields every layer report has (LayerReport, RotaryLayerReport).
template <class Report>
LayerRow common_row(const Report& l) {
  LayerRow row;
  row.index = l.index;
  row.prefix = l.prefix;
  row.relative_error = l.relative_error;
  row.data_error = l.data_error;
  row.seconds = l.seconds;
  row.params_before = l.params_before;
  row.params_after = l.params_after;
  return row;
}

/// Prints the header at construction and a row per add(); keeps the report's rows and
/// the query/key parameter totals.
class LayerTable {
 public:
  LayerTable(bool data, std::vector<LayerColumn> lead, std::vector<LayerColumn> trail,
             std::vector<LayerColumn> errors = {});
  void add(const LayerRow& row);
  const nlohmann::json& layers() const { return layers_; }
  index_t params_before() const { return before_; }
  index_t params_after() const { return after_; }

 private:
  bool data_;
  std::vector<LayerColumn> lead_, trail_, errors_;
  nlohmann::json layers_ = nlohmann::json::array();
  index_t before_ = 0, after_ = 0;
};

/// The calibration the run used, as both forms print and report it.
struct CalibrationUse {
  std::string file, source;
  index_t tokens = 0;
  double damping = 0.0;
};

/// What a checkpoint report `rep` says of the calibration file `file`; none without one.
template <class Report>
std::optional<CalibrationUse> calibration_use(const std::string& file, const Report& rep,
                                              double damping) {
  if (file.empty()) return std::nullopt;
  return CalibrationUse{file, rep.calibration_source, rep.calibration_tokens, damping};
}

/// "data-aware: N calibration tokens (source), damping x" when calibrated.
void print_calibration(const std::optional<CalibrationUse>& c);

/// The report fields both forms write (command, files, dtype, objective, calibration,
/// layers, parameter totals, seconds); each form adds its own.
nlohmann::json layer_report(const std::string& input, const std::string& output, bool float64,
                            const std::optional<CalibrationUse>& calibration,
                            const LayerTable& table, index_t total_before, index_t total_after,
                            double seconds);

}  // namespace tenfold::cli
