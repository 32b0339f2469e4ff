target_sources(tenfold PRIVATE
  attention/compress.cpp
  attention/layer.cpp
  attention/redundancy.cpp
  attention/scores.cpp)
