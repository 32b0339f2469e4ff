target_sources(tenfold_objects PRIVATE
  attention/checkpoint.cpp
  attention/compress.cpp
  attention/layer.cpp
  attention/moments.cpp
  attention/redundancy.cpp
  attention/scores.cpp)
