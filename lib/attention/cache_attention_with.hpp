// cache_attention (include/tenfold/cache_attention.hpp) with the kernel of a chosen
// instruction set: the tests run each set's kernel where the processor has it.
#pragma once

#include "core/simd.hpp"
#include "tenfold/cache_attention.hpp"

namespace tenfold::attention {

/// cache_attention with the kernel written for `isa`; throws InvalidArgument where the
/// processor does not run it (above detail::processor_isa()).
template <class T, class S = T>
void cache_attention_with(detail::Isa isa, const HeadsView<const T>& queries,
                          const HeadsView<const S>& keys, const HeadsView<const S>& values,
                          const HeadsView<const T>& bias, bool causal, T scale,
                          const HeadsView<T>& out);

}  // namespace tenfold::attention
