target_sources(tenfold PRIVATE
  io/atomic_file.cpp
  io/byte_source.cpp
  io/float_codec.cpp
  io/npy.cpp
  io/safetensors.cpp)
target_link_libraries(tenfold PRIVATE nlohmann_json::nlohmann_json)
