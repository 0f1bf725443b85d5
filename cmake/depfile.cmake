# cmake/depfile.cmake — header dependencies for the objects that add_custom_command compiles
# (CMakeLists.txt's LLVM 19 kernels, exports and test objects; cmake/memory64.cmake's memory64
# objects). CMake scans the headers of the sources of its own targets, never those of a custom
# command: there each rule listed some headers by hand, and an object whose source included
# another one (src/wasm_exports.c: model/model.h) was not recompiled when that header changed,
# and the module then read a struct by its old layout. Now the compiler writes each object's
# make depfile (every header the compile read) and CMake reads it.
#
# wasmlm_object_deps(OBJ FLAGS_VAR DEPENDS_VAR [FILE...]) sets, in the caller's scope:
#   FLAGS_VAR    the compile flags that write OBJ's depfile OBJ.d (-MMD: the project's headers)
#   DEPENDS_VAR  what to list after the source in the rule's DEPENDS: DEPFILE OBJ.d (CMake reads
#                a custom command's depfile with Makefile generators from 3.20 on; before that,
#                every header of src/ and tests/c/ instead: correct, coarser), this file and the
#                FILEs (e.g. the one holding the rule, so that a changed command recompiles).
# A build directory made before this file existed gets the depfiles because this file is newer
# than its objects: each is compiled once more.

file(GLOB_RECURSE WASMLM_ALL_HEADERS CONFIGURE_DEPENDS
  "${CMAKE_SOURCE_DIR}/src/*.h" "${CMAKE_SOURCE_DIR}/src/*.inc" "${CMAKE_SOURCE_DIR}/tests/c/*.h")
list(APPEND WASMLM_ALL_HEADERS "${CMAKE_SOURCE_DIR}/src/kernels/quant_simd.c") # #included

set(WASMLM_DEPFILE_CMAKE "${CMAKE_CURRENT_LIST_FILE}")

function(wasmlm_object_deps obj flags_var depends_var)
  if(CMAKE_VERSION VERSION_LESS 3.20)
    set(${flags_var} "" PARENT_SCOPE)
    set(${depends_var} "${WASMLM_DEPFILE_CMAKE}" ${ARGN} ${WASMLM_ALL_HEADERS} PARENT_SCOPE)
  else()
    set(${flags_var} -MMD -MT "${obj}" -MF "${obj}.d" PARENT_SCOPE)
    set(${depends_var} "${WASMLM_DEPFILE_CMAKE}" ${ARGN} DEPFILE "${obj}.d" PARENT_SCOPE)
  endif()
endfunction()
