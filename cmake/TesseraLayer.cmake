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

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

function(tessera_layer name)
  cmake_parse_arguments(L "" "" "DEPS;PRIVATE_DEPS;TEST_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  if(srcs)
    add_library(tessera_${name} STATIC ${srcs})
    target_include_directories(tessera_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
      PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_link_libraries(tessera_${name} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
    tessera_warnings(tessera_${name})
  else()  # header-only so far
    add_library(tessera_${name} INTERFACE)
    target_include_directories(tessera_${name} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(tessera_${name} INTERFACE ${L_DEPS})
  endif()
  add_library(tessera::${name} ALIAS tessera_${name})
  if(TESSERA_BUILD_TESTS)
    file(GLOB_RECURSE tsrcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${name}/*.cpp)
    if(tsrcs)
      add_executable(tessera_${name}_tests ${tsrcs})
      target_link_libraries(tessera_${name}_tests PRIVATE tessera_${name} ${L_TEST_DEPS}
        GTest::gtest GTest::gtest_main)
      target_compile_definitions(tessera_${name}_tests PRIVATE
        TESSERA_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data"
        TESSERA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      tessera_warnings(tessera_${name}_tests)
      gtest_discover_tests(tessera_${name}_tests DISCOVERY_TIMEOUT 60
        PROPERTIES LABELS ${name})
    endif()
  endif()
endfunction()
