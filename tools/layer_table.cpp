#include "layer_table.hpp"

#include <cstdio>
#include <utility>

namespace tenfold::cli {

LayerTable::LayerTable(bool data, std::vector<LayerColumn> lead, std::vector<LayerColumn> trail,
                       std::vector<LayerColumn> errors)
    : data_(data), lead_(std::move(lead)), trail_(std::move(trail)), errors_(std::move(errors)) {
  std::printf("%-6s", "layer");
  for (const LayerColumn& c : lead_) std::printf(" %*s", c.width, c.header);
  std::printf(" %14s", "QK rel. error");
  if (data_) std::printf(" %16s", "data rel. error");
  for (const LayerColumn& c : errors_) std::printf(" %*s", c.width, c.header);
  for (const LayerColumn& c : trail_) std::printf(" %*s", c.width, c.header);
  std::printf(" %9s %14s %14s\n", "seconds", "params before", "params after");
}

void LayerTable::add(const LayerRow& row) {
  nlohmann::json j = row.more;
  j["index"] = row.index;
  j["prefix"] = row.prefix;
  j["relative_error"] = row.relative_error;
  j["seconds"] = row.seconds;
  j["params_before"] = row.params_before;
  j["params_after"] = row.params_after;
  std::printf("%-6d", row.index);
  for (std::size_t i = 0; i < lead_.size(); ++i) {
    std::printf(" %*lld", lead_[i].width, row.lead[i]);
    j[lead_[i].json] = row.lead[i];
  }
  std::printf(" %14.6g", row.relative_error);
  if (row.data_error) {
    std::printf(" %16.6g", *row.data_error);
    j["data_relative_error"] = *row.data_error;
  }
  for (std::size_t i = 0; i < errors_.size(); ++i) {
    std::printf(" %*.6g", errors_[i].width, row.errors[i]);
    j[errors_[i].json] = row.errors[i];
  }
  for (std::size_t i = 0; i < trail_.size(); ++i) {
    std::printf(" %*lld", trail_[i].width, row.trail[i]);
    j[trail_[i].json] = row.trail[i];
  }
  std::printf(" %9.2f %14lld %14lld\n", row.seconds, static_cast<long long>(row.params_before),
              static_cast<long long>(row.params_after));
  before_ += row.params_before;
  after_ += row.params_after;
  layers_.push_back(std::move(j));
}

void print_calibration(const std::optional<CalibrationUse>& c) {
  if (!c) return;
  std::printf("data-aware: %lld calibration tokens (%s), damping %g\n",
              static_cast<long long>(c->tokens), c->source.c_str(), c->damping);
}

nlohmann::json layer_report(const std::string& input, const std::string& output, bool float64,
                            const std::optional<CalibrationUse>& calibration,
                            const LayerTable& table, index_t total_before, index_t total_after,
                            double seconds) {
  nlohmann::json used = nullptr;
  if (calibration) {
    used = {{"file", calibration->file},
            {"tokens", calibration->tokens},
            {"source", calibration->source},
            {"damping", calibration->damping}};
  }
  return {{"command", "attention compress"},
          {"input", input},
          {"output", output},
          {"dtype", float64 ? "float64" : "float32"},
          {"objective", calibration ? "data" : "weight"},
          {"calibration", used},
          {"layers", table.layers()},
          {"qk_params_before", table.params_before()},
          {"qk_params_after", table.params_after()},
          {"total_params_before", total_before},
          {"total_params_after", total_after},
          {"seconds", seconds}};
}

}  // namespace tenfold::cli
