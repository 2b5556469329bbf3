# Build facts recorded in every run's provenance (lib/util/build_info.h): the
# flags that change numerics are fixed at configure time; the git commit can
# change with every build, so a script rewrites its header on each build, and
# configure_file leaves the file (and what depends on it) untouched when the
# commit is the same.
#
# Included from the top-level CMakeLists after the compiler flags are set.
set(SRKIT_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
string(REPLACE ";" " " SRKIT_BUILD_ARCH_FLAGS "${SRKIT_ARCH_FLAGS}")
set(SRKIT_BUILD_CUDA_ARCHS "")
if(SRKIT_HAVE_CUDA AND NOT SRKIT_CUDA_EMU)
  string(REPLACE ";" " " SRKIT_BUILD_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/build_flags.h.in
               ${SRKIT_GENERATED_DIR}/srkit/build_flags.h @ONLY)

add_custom_target(srkit_git_info
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${SRKIT_GENERATED_DIR}/srkit/git_info.h
          -P ${CMAKE_SOURCE_DIR}/cmake/git_info.cmake
  BYPRODUCTS ${SRKIT_GENERATED_DIR}/srkit/git_info.h
  COMMENT "srkit: recording the git commit"
  VERBATIM)
