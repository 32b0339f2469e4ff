# The BLAS and LAPACK of the build (TENFOLD_BLAS), as one interface target, tenfold_blas:
# the folders of cblas.h and lapacke.h, the libraries, and compile definitions that tell
# the code which library it calls:
#   TENFOLD_BLAS_OPENBLAS  OpenBLAS's own entry points (openblas_get_corename, ...) exist;
#   TENFOLD_BLAS_BLIS      BLIS's own entry points (bli_thread_set_num_threads) exist;
#   TENFOLD_BLAS_CHOICE    the choice below, as a string (tenfold::blas_info);
#   <name>=scipy_<name>    for every BLAS, LAPACKE and OpenBLAS function the project calls,
#                          where the library's symbols carry a prefix (scipy-openblas).
#
# openblas        Debian's OpenBLAS, OpenMP build (libopenblas-openmp-dev, liblapacke-dev).
# scipy-openblas  The OpenBLAS that NumPy and SciPy ship (pip package scipy-openblas32,
#                 DYNAMIC_ARCH, pthreads, LAPACKE included, symbols prefixed scipy_): the
#                 wheel's BLAS (scripts/build_wheel.sh). Found through SCIPY_OPENBLAS_DIR
#                 (the package folder) or by importing scipy_openblas32 with
#                 Python_EXECUTABLE (else python3).
# blis            Debian's BLIS, OpenMP build (libblis-openmp-dev) for BLAS and CBLAS; LAPACK
#                 and LAPACKE are the system's (liblapack.so.3, whichever the Debian
#                 alternatives select).
set(TENFOLD_BLAS "openblas" CACHE STRING "BLAS/LAPACK to link: openblas, scipy-openblas or blis")
set_property(CACHE TENFOLD_BLAS PROPERTY STRINGS openblas scipy-openblas blis)

add_library(tenfold_blas INTERFACE)

if(TENFOLD_BLAS STREQUAL "openblas")
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS REQUIRED)
  find_package(LAPACK REQUIRED)
  # cblas.h of the OpenMP build where a distribution installs several (Debian:
  # <include>/<multiarch>/openblas-openmp, searched through the architecture folder
  # CMake knows), else OpenBLAS's own folder, else the plain include folder.
  find_path(TENFOLD_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-openmp openblas REQUIRED)
  find_path(TENFOLD_LAPACKE_INCLUDE_DIR lapacke.h REQUIRED)
  find_library(TENFOLD_LAPACKE_LIBRARY lapacke REQUIRED)
  target_include_directories(tenfold_blas INTERFACE
    ${TENFOLD_CBLAS_INCLUDE_DIR} ${TENFOLD_LAPACKE_INCLUDE_DIR})
  target_link_libraries(tenfold_blas INTERFACE ${TENFOLD_LAPACKE_LIBRARY} LAPACK::LAPACK BLAS::BLAS)
  target_compile_definitions(tenfold_blas INTERFACE TENFOLD_BLAS_OPENBLAS)
elseif(TENFOLD_BLAS STREQUAL "scipy-openblas")
  # Looked up at every configure, not cached: pip builds in a new environment each time.
  set(_tenfold_scipy_openblas_dir ${SCIPY_OPENBLAS_DIR})
  if(NOT _tenfold_scipy_openblas_dir)
    if(Python_EXECUTABLE)
      set(_tenfold_python ${Python_EXECUTABLE})
    else()
      find_program(_tenfold_python NAMES python3 python NO_CACHE REQUIRED)
    endif()
    execute_process(
      COMMAND "${_tenfold_python}" -c
              "import os, scipy_openblas32; print(os.path.dirname(scipy_openblas32.__file__))"
      OUTPUT_VARIABLE _tenfold_scipy_openblas_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _tenfold_status)
    if(NOT _tenfold_status EQUAL 0)
      message(FATAL_ERROR "TENFOLD_BLAS=scipy-openblas: ${_tenfold_python} cannot import "
        "scipy_openblas32 (pip install scipy-openblas32, or set SCIPY_OPENBLAS_DIR)")
    endif()
  endif()
  find_library(TENFOLD_SCIPY_OPENBLAS_LIB scipy_openblas
    PATHS ${_tenfold_scipy_openblas_dir}/lib NO_DEFAULT_PATH NO_CACHE REQUIRED)
  target_include_directories(tenfold_blas INTERFACE ${_tenfold_scipy_openblas_dir}/include)
  target_link_libraries(tenfold_blas INTERFACE ${TENFOLD_SCIPY_OPENBLAS_LIB})
  target_compile_definitions(tenfold_blas INTERFACE TENFOLD_BLAS_OPENBLAS)
  # Every function the project calls, under the library's prefixed name.
  foreach(name IN ITEMS
      cblas_dgemm cblas_sgemm cblas_dgemv cblas_sgemv cblas_dtrsm cblas_strsm
      cblas_dsyrk cblas_ssyrk
      cblas_zgemm cblas_cgemm cblas_zgemv cblas_cgemv cblas_ztrsm cblas_ctrsm
      cblas_zherk cblas_cherk
      LAPACKE_dpotrf_work LAPACKE_spotrf_work LAPACKE_dsyevd LAPACKE_ssyevd
      LAPACKE_zpotrf_work LAPACKE_cpotrf_work LAPACKE_zheevd LAPACKE_cheevd
      LAPACKE_dgeev LAPACKE_dgesv LAPACKE_dgesdd LAPACKE_dsyev
      LAPACKE_dgeqrf LAPACKE_dorgqr
      openblas_get_config openblas_get_corename openblas_get_parallel openblas_set_num_threads)
    target_compile_definitions(tenfold_blas INTERFACE ${name}=scipy_${name})
  endforeach()
elseif(TENFOLD_BLAS STREQUAL "blis")
  find_path(TENFOLD_BLIS_INCLUDE_DIR cblas.h PATH_SUFFIXES blis-openmp blis REQUIRED)
  find_library(TENFOLD_BLIS_LIBRARY blis PATH_SUFFIXES blis-openmp blis REQUIRED)
  find_path(TENFOLD_LAPACKE_INCLUDE_DIR lapacke.h REQUIRED)
  find_library(TENFOLD_LAPACKE_LIBRARY lapacke REQUIRED)
  find_library(TENFOLD_LAPACK_LIBRARY lapack REQUIRED)
  target_include_directories(tenfold_blas INTERFACE
    ${TENFOLD_BLIS_INCLUDE_DIR} ${TENFOLD_LAPACKE_INCLUDE_DIR})
  # BLIS first, so that LAPACK's own BLAS calls reach it too.
  target_link_libraries(tenfold_blas INTERFACE
    ${TENFOLD_BLIS_LIBRARY} ${TENFOLD_LAPACKE_LIBRARY} ${TENFOLD_LAPACK_LIBRARY})
  target_compile_definitions(tenfold_blas INTERFACE TENFOLD_BLAS_BLIS)
else()
  message(FATAL_ERROR "TENFOLD_BLAS=${TENFOLD_BLAS}: expected openblas, scipy-openblas or blis")
endif()
target_compile_definitions(tenfold_blas INTERFACE TENFOLD_BLAS_CHOICE="${TENFOLD_BLAS}")
