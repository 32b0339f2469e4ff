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

/// CP-ALS of the dense tensor x compressed to `ranks` first; options (layout col_major),
/// start and ranks in NumPy axis order, which is x's mode order, or with `reversed` the
/// reverse of it (a C-order array read in place); options and start validated; the
/// result in axis order.
template <class T>
CpResult<T> run_compressed_cp(TensorView<const T> x, bool reversed, Compute<T>& c,
                              const CpOptions& options, std::span<const Matrix<T>> initial_factors,
                              const std::vector<index_t>& ranks,
                              std::chrono::steady_clock::time_point start);

}  // namespace tenfold::detail
