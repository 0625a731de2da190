# Shared build settings, applied per target (never as global flags).

# baton_options: warnings, -Werror and sanitizers for every baton target.
add_library(baton_options INTERFACE)
target_compile_options(baton_options INTERFACE -Wall -Wextra -Wpedantic
  -Wnon-virtual-dtor $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>
  $<$<CXX_COMPILER_ID:Clang>:-Wshadow-uncaptured-local>)
if(BATON_WERROR)
  target_compile_options(baton_options INTERFACE -Werror)
  # GCC 12 at -O3 reports -Wrestrict on std::string concatenation inside
  # libstdc++ (GCC bug 105329, a false positive); keep it a warning there.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND
     CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(baton_options INTERFACE -Wno-error=restrict)
  endif()
endif()
if(BATON_SANITIZE)
  target_compile_options(baton_options INTERFACE -fsanitize=${BATON_SANITIZE}
    -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(baton_options INTERFACE -fsanitize=${BATON_SANITIZE})
  if(BATON_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC warns that TSan does not model asio's atomic_thread_fence.
    target_compile_options(baton_options INTERFACE -Wno-tsan)
  endif()
endif()

# baton_add_library(NAME SOURCES ... [DEPS ...])
function(baton_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS}
    PRIVATE $<BUILD_INTERFACE:baton_options>)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY BATON_EXPORTED_TARGETS ${name})
endfunction()

# Every password the tests give a store or a server: fixed, distinctive
# strings (a test that needs a new secret spells it "baton-<store>-secret-..."
# or adds it here). A test whose output shows one fails, so an error
# message, a log line or a URL that leaks a secret is caught in whatever
# test it happens, not only in the tests written to look for it.
set(BATON_TEST_SECRETS
  "admin-test-pw|jobs-test-pw|b4t0n-secret|torture-pw|sekrit|baton-[a-z]+-secret|baton-etcd-(root-3Kv|norole-9Zp|wrong-5Tm)"
  CACHE INTERNAL "passwords the tests use; no test output may show one")
function(baton_guard_secrets)
  foreach(t ${ARGN})
    set_tests_properties(${t} PROPERTIES
      FAIL_REGULAR_EXPRESSION "${BATON_TEST_SECRETS}")
  endforeach()
endfunction()

# baton_add_test(NAME SOURCES ... [DEPS ...] [LABELS ...] [TIMEOUT s]
#                [NO_MAIN] [CONCURRENT_SUITES n])
# One executable, registered with ctest under NAME, run from the build dir.
# CONCURRENT_SUITES: each test suite in a process of its own, n at a time
# (tests/support/run_suites_concurrently.sh), for binaries whose suites
# mostly wait and share nothing.
function(baton_add_test name)
  cmake_parse_arguments(ARG "NO_MAIN" "TIMEOUT;CONCURRENT_SUITES"
    "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock
    baton_options)
  # Header-only test support (child_process.h, eventually.h, ...).
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  if(NOT ARG_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  if(ARG_CONCURRENT_SUITES)
    add_test(NAME ${name}
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/support/run_suites_concurrently.sh
        ${ARG_CONCURRENT_SUITES} $<TARGET_FILE:${name}>)
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}"
    TIMEOUT ${ARG_TIMEOUT})
  baton_guard_secrets(${name})
endfunction()
