# One static library per layer (DESIGN.md). Sources are globbed so that adding a
# file never means editing a list; tests live in tests/<layer>/ and form one
# executable per layer, discovered by ctest.
function(tessera_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wno-missing-field-initializers)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# libFuzzer builds: coverage instrumentation everywhere, ASan + UBSan as the
# oracle of a finding (the fuzz targets add -fsanitize=fuzzer at link).
if(TESSERA_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer: the pool, the session's lowering thread beside a prompt
# and the manifest check run on their own threads. Not with ASan (one runtime
# per process); the vector clones are off under it (kernels/src/vec_ops.h).
if(TESSERA_TSAN)
  if(TESSERA_SANITIZE OR TESSERA_FUZZ)
    message(FATAL_ERROR "TESSERA_TSAN cannot be combined with TESSERA_SANITIZE or TESSERA_FUZZ")
  endif()
  add_compile_options(-fsanitize=thread)
  add_link_options(-fsanitize=thread)
endif()

# Each test executable compiles its files in batches of 8 (one translation unit
# each): the headers they share (gtest, nlohmann/json, the standard library)
# are parsed and their templates compiled once per batch, which halves the
# test build (model tests: 106 s of CPU as 8 files, 48 s as one batch), most
# of what CI spends on 2 cores. Test files therefore keep their helpers
# unique per executable (shared ones live in tests/<layer>/*_util.h).
option(TESSERA_UNITY_TESTS "Compile each test executable in unity batches" ON)

# The same for a layer's own sources when its CMakeLists opts in (UNITY): each
# library file parses the standard library, fmt and json again for itself, so
# batches cut what a clean build costs on 2 cores, twice in CI (release and
# sanitizer builds). A layer opts in once its file-local helpers are unique
# within the layer (a collision is a compile error, so it cannot go unseen).
# Editing one file then recompiles its batch: turn this off for quick
# iteration on one layer.
option(TESSERA_UNITY_LIBS "Compile the opted-in layers' libraries in unity batches" ON)

# The sanitizer run skips the `slow` label; it need not build those executables.
option(TESSERA_SLOW_TESTS "Build the *_slow_test.cpp executables (label slow)" ON)

function(tessera_layer name)
  cmake_parse_arguments(L "UNITY" "" "DEPS;PRIVATE_DEPS;TEST_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(srcs)
    add_library(tessera_${name} STATIC ${srcs})
    target_include_directories(tessera_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
      PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(tessera_${name} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
    tessera_warnings(tessera_${name})
    if(L_UNITY AND TESSERA_UNITY_LIBS)
      set_target_properties(tessera_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  else()  # header-only so far
    add_library(tessera_${name} INTERFACE)
    target_include_directories(tessera_${name} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(tessera_${name} INTERFACE ${L_DEPS})
  endif()
  add_library(tessera::${name} ALIAS tessera_${name})
  if(TESSERA_BUILD_TESTS)
    file(GLOB_RECURSE tsrcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${name}/*.cpp)
    # Files named *_slow_test.cpp hold tests that take more than ~10 s under
    # ASan: their own executable, labelled `slow`, which the sanitizer run skips.
    set(slow_srcs ${tsrcs})
    list(FILTER slow_srcs INCLUDE REGEX "_slow_test\\.cpp$")
    list(FILTER tsrcs EXCLUDE REGEX "_slow_test\\.cpp$")
    if(tsrcs)
      tessera_test_executable(tessera_${name}_tests ${name} "${tsrcs}" "${L_TEST_DEPS}" ${name})
    endif()
    if(slow_srcs AND TESSERA_SLOW_TESTS)
      # One label only: gtest_discover_tests writes PROPERTIES unquoted, so a
      # list would split into bogus properties.
      tessera_test_executable(tessera_${name}_slow_tests ${name} "${slow_srcs}" "${L_TEST_DEPS}"
        slow)
    endif()
  endif()
endfunction()

function(tessera_test_executable target layer srcs deps labels)
  add_executable(${target} ${srcs})
  if(TESSERA_UNITY_TESTS)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  target_link_libraries(${target} PRIVATE tessera_${layer} ${deps} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE
    TESSERA_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data"
    TESSERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  tessera_warnings(${target})
  # Slow tests start first under ctest -j (see cli/CMakeLists.txt on COST).
  set(cost 0)
  if(labels STREQUAL "slow")
    set(cost 100)
  endif()
  set(env_props "")
  if(TESSERA_TEST_ENVIRONMENT)
    set(env_props ENVIRONMENT ${TESSERA_TEST_ENVIRONMENT})
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${labels} COST ${cost} ${env_props})
endfunction()
