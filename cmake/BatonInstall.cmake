# Installs the public headers and the baton:: targets so that an installed
# baton works with find_package(baton).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY include/baton DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
get_property(BATON_EXPORTED_TARGETS GLOBAL PROPERTY BATON_EXPORTED_TARGETS)
install(TARGETS ${BATON_EXPORTED_TARGETS}
  EXPORT batonTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT batonTargets NAMESPACE baton::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
configure_package_config_file(cmake/batonConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/batonConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/batonConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/batonConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/batonConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)

# The sample configuration and systemd unit (packaging/, docs/server.md).
install(FILES packaging/batond.yaml packaging/batond.service
  DESTINATION ${CMAKE_INSTALL_DATADIR}/baton)
