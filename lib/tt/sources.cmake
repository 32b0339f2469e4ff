target_sources(tenfold_tt PRIVATE
  tt/tensor_train.cpp
  tt/tt_svd.cpp)
