// Which per-factor data an operand derives from the CP factors (U_m^T A_m, the rows of
// A_m a block touches, ...) is current: from its refresh until factor m changes, or the
// rank does.
#pragma once

#include <cstddef>
#include <vector>

#include "tenfold/tensor.hpp"

namespace tenfold::detail {

class FactorCache {
 public:
  /// Factor m changed: what was derived from it is stale.
  void factor_changed(int m) {
    if (index(m) < current_.size()) current_[index(m)] = false;
  }
  /// An MTTKRP at `rank`: everything is stale when the rank differs from the last one.
  void use_rank(index_t rank) {
    if (rank != rank_) current_.assign(current_.size(), false);
    rank_ = rank;
  }
  bool current(int m) const { return index(m) < current_.size() && current_[index(m)]; }
  void refreshed(int m) {
    if (index(m) >= current_.size()) current_.resize(index(m) + 1, false);
    current_[index(m)] = true;
  }

 private:
  static std::size_t index(int m) { return static_cast<std::size_t>(m); }
  std::vector<bool> current_;
  index_t rank_ = 0;
};

}  // namespace tenfold::detail
