target_sources(tenfold_attention PRIVATE
  attention/cache_attention.cpp
  attention/calibration_file.cpp
  attention/checkpoint.cpp
  attention/checkpoint_layers.cpp
  attention/checkpoint_writer.cpp
  attention/compress.cpp
  attention/kv_cache_split.cpp
  attention/layer.cpp
  attention/model_config.cpp
  attention/moments.cpp
  attention/redundancy.cpp
  attention/rotary.cpp
  attention/rotary_bands.cpp
  attention/rotary_frequencies.cpp
  attention/rotary_checkpoint.cpp
  attention/scores.cpp
  attention/values.cpp)
