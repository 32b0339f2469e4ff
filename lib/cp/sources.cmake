target_sources(tenfold PRIVATE
  cp/cp_als.cpp
  cp/dense_operand.cpp
  cp/kruskal_operand.cpp)
