# Installation: headers, library, the tenfold program, a CMake package
# (find_package(tenfold CONFIG) -> tenfold::tenfold, and tenfold::mpi in a build with
# MPI) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS tenfold EXPORT tenfoldTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET tenfold_mpi)
  install(TARGETS tenfold_mpi EXPORT tenfoldTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET tenfold_cli)
  install(TARGETS tenfold_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tenfold DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(TENFOLD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tenfold)
install(EXPORT tenfoldTargets NAMESPACE tenfold:: DESTINATION ${TENFOLD_CMAKE_DIR})
# The build tree is a package too: find_package(tenfold) with tenfold_DIR=<build>.
export(EXPORT tenfoldTargets NAMESPACE tenfold:: FILE ${PROJECT_BINARY_DIR}/tenfoldTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tenfoldConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tenfoldConfig.cmake INSTALL_DESTINATION ${TENFOLD_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tenfoldConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tenfoldConfig.cmake
              ${PROJECT_BINARY_DIR}/tenfoldConfigVersion.cmake
        DESTINATION ${TENFOLD_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own folder.
file(RELATIVE_PATH TENFOLD_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tenfold.pc.in ${PROJECT_BINARY_DIR}/tenfold.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tenfold.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
