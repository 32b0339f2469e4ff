target_sources(tenfold_cp PRIVATE
  cp/compressed.cpp
  cp/cp_als.cpp
  cp/cp_missing.cpp
  cp/factor_match.cpp
  cp/full_model.cpp
  cp/gcp.cpp
  cp/gcp_loss.cpp
  cp/hals.cpp
  cp/kruskal_operand.cpp
  cp/lbfgs.cpp
  cp/line_search.cpp
  cp/masked_operand.cpp
  cp/masked_weighted.cpp
  cp/multi_start.cpp
  cp/random_cp.cpp
  cp/sampled.cpp
  cp/sparsity_operand.cpp)
