target_sources(tenfold_objects PRIVATE
  io/atomic_file.cpp
  io/byte_source.cpp
  io/float_codec.cpp
  io/npy.cpp
  io/safetensors.cpp)
target_link_libraries(tenfold_objects PUBLIC nlohmann_json::nlohmann_json)
