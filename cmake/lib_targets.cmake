# lib/ as one static library per folder (docs/architecture.md, "Layers"): each
# links only the folders below it, and a build step of each runs
# cmake/check_layers.cmake over the folder's files, so an include of a folder
# above (or beside) it fails the build. srkit_lib is all of them, for apps,
# tests and benchmarks.
#
# srkit_lib_folder(<folder> [LIB <lib folders it uses>...] [LINK <other targets>...])
# defines srkit_<folder> from lib/<folder>/*.cpp (".": lib/*.cpp, target
# srkit_core). Folders must be defined after the folders they use.
function(srkit_lib_folder folder)
  cmake_parse_arguments(ARG "" "" "LIB;LINK;EXCLUDE" ${ARGN})
  if(folder STREQUAL ".")
    set(target srkit_core)
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/lib/*.cpp)
    file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/lib/*.h)
  else()
    set(target srkit_${folder})
    file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/lib/${folder}/*.cpp)
    file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/lib/${folder}/*.h)
  endif()
  foreach(pattern ${ARG_EXCLUDE})
    list(FILTER sources EXCLUDE REGEX "${pattern}")
  endforeach()
  # What the folder may include: itself and every folder it uses, transitively.
  set(allowed "")
  set(lib_targets "")
  foreach(dep ${ARG_LIB})
    get_property(dep_allowed GLOBAL PROPERTY SRKIT_LAYERS_${dep})
    list(APPEND allowed ${dep} ${dep_allowed})
    if(dep STREQUAL ".")
      list(APPEND lib_targets srkit_core)
    else()
      list(APPEND lib_targets srkit_${dep})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY SRKIT_LAYERS_${folder} ${allowed})

  add_library(${target} STATIC ${sources})
  srkit_cuda_sources(${target})
  target_link_libraries(${target} PUBLIC srkit_common ${lib_targets} ${ARG_LINK})

  string(REPLACE "." "core" stamp_name "${folder}")
  set(stamp ${CMAKE_BINARY_DIR}/layers/${stamp_name}.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DLIB_DIR=${CMAKE_SOURCE_DIR}/lib -DFOLDER=${folder}
            "-DALLOWED=${allowed}" -DSTAMP=${stamp} -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    DEPENDS ${sources} ${headers} ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "srkit: checking the includes of lib/${folder}"
    VERBATIM)
  add_custom_target(${target}_layers DEPENDS ${stamp})
  add_dependencies(${target} ${target}_layers)
endfunction()
