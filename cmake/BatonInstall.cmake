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

# The Debian package: `cpack -G DEB` in a build directory (README, "Debian
# package"). Everything above under /usr, plus what a system install needs:
# the systemd unit in /usr/lib/systemd/system running /usr/bin/batond, and
# the sample configuration as /etc/baton/batond.yaml (a conffile: dpkg keeps
# local edits). Those two are a component of their own that `cmake
# --install` leaves out (EXCLUDE_FROM_ALL), so that installing into a prefix
# never writes to /etc. Runtime dependencies come from dpkg-shlibdeps on the
# programs (libpq, hiredis, libzookeeper-mt, libmariadb, gRPC, ...).
set(BATON_PACKAGE_UNIT ${CMAKE_CURRENT_BINARY_DIR}/packaging/batond.service)
file(READ ${PROJECT_SOURCE_DIR}/packaging/batond.service baton_unit)
string(REPLACE "/usr/local/bin/batond" "/usr/bin/batond" baton_unit
  "${baton_unit}")
string(REGEX REPLACE "# Installed by[^\n]*\n#[^\n]*\n"
  "# Installed by baton's Debian package; `systemctl enable --now batond`.\n"
  baton_unit "${baton_unit}")
file(WRITE ${BATON_PACKAGE_UNIT} "${baton_unit}")
install(FILES ${BATON_PACKAGE_UNIT} DESTINATION lib/systemd/system
  COMPONENT system EXCLUDE_FROM_ALL)
install(FILES packaging/batond.yaml DESTINATION /etc/baton
  COMPONENT system EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME baton)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "baton maintainers <baton@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "distributed locks, leases, fair lock queues and leader election")
set(CPACK_PACKAGE_DESCRIPTION
  "The baton command-line tool, the lock server batond with its systemd unit, and the C++ client library (static) with its headers and CMake package.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the programs; static libraries keep their symbols
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # fast; xz took most of the step
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
  ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# One package with both components.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified system)
include(CPack)
