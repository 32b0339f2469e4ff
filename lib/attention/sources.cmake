target_sources(tenfold_attention PRIVATE
  attention/checkpoint.cpp
  attention/compress.cpp
  attention/layer.cpp
  attention/moments.cpp
  attention/redundancy.cpp
  attention/rotary.cpp
  attention/scores.cpp)
