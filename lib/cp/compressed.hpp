// Compression first (Bro and Andersson 1998; CANDELINC, Carroll, Pruzansky and
// Kruskal 1980): CP-ALS of the ST-HOSVD core, the factors lifted back, then ALS
// sweeps on the full tensor. See docs/algorithms.md, "Compression first".
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "core/compute.hpp"
#include "tenfold/cp.hpp"

namespace tenfold::detail {

/// The core's sizes when `options.compress` asks for compression of a dense tensor of
/// shape `dims` and it pays (see CpCompress); empty when CP-ALS runs on the tensor
/// itself. Throws InvalidArgument for compress = on with nonnegative.
std::vector<index_t> planned_compression(const CpOptions& options,
                                         const std::vector<index_t>& dims);

/// CP-ALS of the dense tensor x (column-major, in sweep order) compressed to `ranks`
/// first; options and start validated, layout col_major.
template <class T>
CpResult<T> run_compressed_cp(TensorView<const T> x, Compute<T>& c, const CpOptions& options,
                              std::span<const Matrix<T>> initial_factors,
                              const std::vector<index_t>& ranks,
                              std::chrono::steady_clock::time_point start);

}  // namespace tenfold::detail
