target_sources(tenfold_io PRIVATE
  io/atomic_file.cpp
  io/byte_source.cpp
  io/float_codec.cpp
  io/npy.cpp
  io/safetensors.cpp)
target_link_libraries(tenfold_io PUBLIC nlohmann_json::nlohmann_json)
