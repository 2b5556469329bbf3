# The layering check (cmake/check_layers.cmake) on a planted tree: a file of
# lib/low that includes a header of lib/high must fail with a line naming the
# file, the header and what lib/low may include; the same tree without that
# include, and includes of the folder itself, of an allowed folder and of lib/'s
# top level (when allowed), must pass.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch folder> -P check_layers_test.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/lib/low ${WORK_DIR}/lib/high ${WORK_DIR}/lib/base)
file(WRITE ${WORK_DIR}/lib/core.h "#pragma once\n")
file(WRITE ${WORK_DIR}/lib/base/b.h "#pragma once\n")
file(WRITE ${WORK_DIR}/lib/high/h.h "#pragma once\n")
file(WRITE ${WORK_DIR}/lib/low/ok.h "#pragma once\n#include \"lib/base/b.h\"\n#include \"lib/core.h\"\n")
file(WRITE ${WORK_DIR}/lib/low/ok.cpp "#include \"lib/low/ok.h\"\n")

function(run_check expect_ok)
  execute_process(COMMAND ${CMAKE_COMMAND} -DLIB_DIR=${WORK_DIR}/lib -DFOLDER=low
                          "-DALLOWED=base;." -P ${SOURCE_DIR}/cmake/check_layers.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND NOT rc EQUAL 0)
    message(FATAL_ERROR "a layered tree was refused:\n${out}${err}")
  endif()
  if(NOT expect_ok AND rc EQUAL 0)
    message(FATAL_ERROR "an upward include passed the check")
  endif()
  set(check_output "${out}${err}" PARENT_SCOPE)
endfunction()

run_check(TRUE)
file(WRITE ${WORK_DIR}/lib/low/bad.cpp "#include \"lib/low/ok.h\"\n  #include \"lib/high/h.h\"\n")
run_check(FALSE)
set(expected "error: lib/low/bad.cpp includes lib/high/h.h: lib/low may include only lib/{low, base, top level}")
string(FIND "${check_output}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the error does not say which file, header and folders:\n${check_output}")
endif()
file(REMOVE ${WORK_DIR}/lib/low/bad.cpp)
run_check(TRUE)
file(REMOVE_RECURSE ${WORK_DIR})
