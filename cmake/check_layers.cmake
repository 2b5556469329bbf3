# The include rule of lib/ (docs/architecture.md, "Layers"): a file of
# lib/FOLDER may include lib/ headers only of its own folder and of the folders
# its CMake target links (ALLOWED). Run as a build step of each lib/ target
# (cmake/lib_targets.cmake), so an upward include fails the build of the folder
# that has it, naming the file, the header and what the folder may include.
#
#   cmake -DLIB_DIR=<repo>/lib -DFOLDER=<name or "."> -DALLOWED=<a;b;...> [-DSTAMP=<file>]
#         -P check_layers.cmake
# FOLDER "." is lib/'s top-level files (lib/precision.*, lib/profiling.*), whose
# headers other folders name as ".".
if(FOLDER STREQUAL ".")
  file(GLOB files ${LIB_DIR}/*.h ${LIB_DIR}/*.cpp ${LIB_DIR}/*.cu)
else()
  file(GLOB files ${LIB_DIR}/${FOLDER}/*.h ${LIB_DIR}/${FOLDER}/*.cpp ${LIB_DIR}/${FOLDER}/*.cu)
endif()
set(allowed ${FOLDER} ${ALLOWED})
set(errors "")
foreach(file ${files})
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"lib/")
  foreach(line ${includes})
    string(REGEX MATCH "\"lib/[^\"]+\"" header "${line}")
    string(REGEX REPLACE "^\"lib/|\"$" "" header "${header}")
    if(header MATCHES "/")
      string(REGEX REPLACE "/.*" "" target_folder "${header}")
    else()
      set(target_folder ".")
    endif()
    list(FIND allowed "${target_folder}" found)
    if(found EQUAL -1)
      file(RELATIVE_PATH rel ${LIB_DIR}/.. ${file})
      string(REPLACE ";" ", " shown "${allowed}")
      string(REPLACE "." "top level" shown "${shown}")
      set(where "lib/${FOLDER}")
      if(FOLDER STREQUAL ".")
        set(where "lib/'s top level")
      endif()
      list(APPEND errors "${rel} includes lib/${header}: ${where} may include only lib/{${shown}} (docs/architecture.md, \"Layers\")")
    endif()
  endforeach()
endforeach()
if(errors)
  # One line per include (message() would wrap them), then the failure.
  foreach(error ${errors})
    execute_process(COMMAND ${CMAKE_COMMAND} -E echo "error: ${error}")
  endforeach()
  list(LENGTH errors count)
  message(FATAL_ERROR "lib/${FOLDER}: ${count} include(s) of a folder it does not link")
endif()
if(STAMP)
  get_filename_component(stamp_dir ${STAMP} DIRECTORY)
  file(MAKE_DIRECTORY ${stamp_dir})
  file(TOUCH ${STAMP})
endif()
