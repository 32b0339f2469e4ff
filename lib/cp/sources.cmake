target_sources(tenfold PRIVATE
  cp/cp_als.cpp
  cp/dense_operand.cpp
  cp/factor_match.cpp
  cp/kruskal_operand.cpp
  cp/random_cp.cpp)
