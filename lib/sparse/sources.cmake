target_sources(tenfold_sparse PRIVATE
  sparse/cp_apr.cpp
  sparse/csf.cpp
  sparse/csf_levels.cpp
  sparse/entry_order.cpp
  sparse/sparse_cp.cpp
  sparse/sparse_gcp.cpp
  sparse/sparse_io.cpp
  sparse/sparse_operand.cpp
  sparse/sparse_tensor.cpp
  sparse/tns_read.cpp)
# gzip for .tns.gz files, when zlib is installed (Debian: zlib1g-dev).
find_package(ZLIB)
if(ZLIB_FOUND)
  target_link_libraries(tenfold_sparse PRIVATE ZLIB::ZLIB)
  target_compile_definitions(tenfold_sparse PRIVATE TENFOLD_WITH_ZLIB)
endif()
