# cmake/memory64.cmake — the memory64 (wasm64) twins of the SIMD128 and relaxed-SIMD modules,
# single- and multi-threaded: dist/wasmlm64.wasm, wasmlm64-mt.wasm, wasmlm64-relaxed.wasm,
# wasmlm64-relaxed-mt.wasm (js/runtime/memory64.js picks one at load() when a model does not fit wasm32's
# 4 GB). Included by CMakeLists.txt in the Emscripten build. WASMLM_EM64 is the toolchain that
# tools/wasm64/toolchain.sh prepares (tools/build.sh passes it): every file is compiled by its
# patched emcc with LLVM 19 (-sMEMORY64=1), the modules are linked by LLVM 19's wasm-ld against
# its wasm64 libraries and optimised by the npm binaryen's wasm-opt; then
# tools/wasm64/abi.mjs appends the custom section `wasmlm.abi` (each export's parameter and
# result types), from which js/runtime/memory64.js converts pointers and sizes (i64, BigInt in JS).
# Without WASMLM_EM64 nothing is defined and build/wasm/memory64-status.txt says why.
# WASMLM_MEMORY64_MODULES (default all four) limits which are built, e.g. "64;64-mt" in CI.

set(WASMLM_MEMORY64_MODULES "64;64-mt;64-relaxed;64-relaxed-mt" CACHE STRING
  "the memory64 modules to build (64, 64-mt, 64-relaxed, 64-relaxed-mt)")
set(WASMLM_EM64 "" CACHE PATH "tools/wasm64/toolchain.sh's directory: the memory64 modules' toolchain")
find_program(WASMLM_NODE64 node)
if(NOT WASMLM_EM64 OR NOT EXISTS "${WASMLM_EM64}/ready")
  file(WRITE "${CMAKE_BINARY_DIR}/memory64-status.txt"
    "the memory64 modules are not built: no toolchain (tools/wasm64/toolchain.sh; WASMLM_EM64 '${WASMLM_EM64}')\n")
  return()
endif()
file(WRITE "${CMAKE_BINARY_DIR}/memory64-status.txt" "ok\n")
message(STATUS "wasmlm: memory64 modules (${WASMLM_MEMORY64_MODULES}) with ${WASMLM_EM64}")

set(m64dir "${CMAKE_BINARY_DIR}/memory64")
set(m64rules "${CMAKE_CURRENT_LIST_FILE}")   # this file: its objects depend on it
foreach(flavour IN ITEMS st mt st-relaxed mt-relaxed)
  file(MAKE_DIRECTORY "${m64dir}/${flavour}")
endforeach()
set(m64cc "${WASMLM_EM64}/bin/emcc")
set(m64warn -Wall -Wextra)
if(WASMLM_WERROR)
  list(APPEND m64warn -Werror)
endif()

# One object per (source, flavour): "st" single-threaded, "mt" atomics + bulk memory; "-relaxed"
# adds relaxed SIMD (the kernels and the exports only, as the wasm32 relaxed modules do).
function(wasmlm_m64_object src flavour out_var)
  get_filename_component(base ${src} NAME_WE)
  get_filename_component(dirname ${src} DIRECTORY)
  string(REPLACE "/" "_" dirname "${dirname}")
  set(obj "${m64dir}/${flavour}/${dirname}_${base}.o")
  set(${out_var} "${obj}" PARENT_SCOPE)
  get_property(made GLOBAL PROPERTY WASMLM_M64_OBJECTS)
  if(obj IN_LIST made)   # shared by two modules: one rule
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY WASMLM_M64_OBJECTS "${obj}")
  set(flags -sMEMORY64=1 -msimd128)
  if(flavour MATCHES "mt")
    list(APPEND flags -matomics -mbulk-memory)
  endif()
  if(flavour MATCHES "relaxed")
    list(APPEND flags -mrelaxed-simd)
  endif()
  get_source_file_property(opts ${src} COMPILE_OPTIONS)
  set(opt -O3)
  if(opts MATCHES "-Os")
    set(opt -Os)
  endif()
  wasmlm_object_deps("${obj}" dflags ddeps "${m64rules}") # cmake/depfile.cmake
  add_custom_command(OUTPUT "${obj}"
    COMMAND ${m64cc} -std=c11 ${opt} -DNDEBUG ${m64warn} ${flags} ${dflags} -I${CMAKE_SOURCE_DIR}/src
      -c ${CMAKE_SOURCE_DIR}/${src} -o "${obj}"
    DEPENDS ${src} ${ddeps}
    COMMENT "wasm64: compiling ${src} (${flavour})" VERBATIM)
endfunction()

set(m64kernels src/kernels/quant_simd.c src/kernels/kernels_simd.c src/wasm_exports.c)
set(m64exports "")
foreach(e IN LISTS WASMLM_EXPORTS)   # "_name" (CMakeLists.txt prepends the underscore)
  string(REGEX REPLACE "^_" "" e "${e}")
  list(APPEND m64exports "--export-if-defined=${e}")
endforeach()
set(m64lib "${WASMLM_EM64}/lib")

foreach(variant IN LISTS WASMLM_MEMORY64_MODULES)
  if(variant STREQUAL "64")
    set(base st)
    set(kflavour st)
  elseif(variant STREQUAL "64-mt")
    set(base mt)
    set(kflavour mt)
  elseif(variant STREQUAL "64-relaxed")
    set(base st)
    set(kflavour st-relaxed)
  elseif(variant STREQUAL "64-relaxed-mt")
    set(base mt)
    set(kflavour mt-relaxed)
  else()
    message(FATAL_ERROR "WASMLM_MEMORY64_MODULES: unknown module '${variant}' (64, 64-mt, 64-relaxed, 64-relaxed-mt)")
  endif()
  set(objs "")
  foreach(src IN LISTS WASMLM_SOURCES)   # the library, less the kernels linked below
    if(NOT src IN_LIST m64kernels)
      wasmlm_m64_object(${src} ${base} obj)
      list(APPEND objs "${obj}")
    endif()
  endforeach()
  set(ksrcs ${m64kernels})
  if(variant MATCHES "relaxed")   # the split dot form's kernels beside the fused ones
    list(APPEND ksrcs src/kernels/quant_relaxed_split.c)
  endif()
  foreach(src IN LISTS ksrcs)
    wasmlm_m64_object(${src} ${kflavour} obj)
    list(APPEND objs "${obj}")
  endforeach()
  set(memflags "")
  if(base STREQUAL "mt")   # the engine's shared memory, imported (js/runtime/threads.js)
    set(memflags --import-memory --shared-memory)
  endif()
  set(out "${CMAKE_SOURCE_DIR}/dist/wasmlm${variant}.wasm")
  set(linked "${m64dir}/wasmlm${variant}.linked.wasm")
  # emcc's own wasm-ld line for -sSTANDALONE_WASM -sMEMORY64 (less the JS-glue libraries):
  # 16 MiB to start, growable to V8's 16 GiB, a 5 MiB stack, _initialize as the entry.
  add_custom_command(OUTPUT "${out}"
    COMMAND ${WASMLM_EM64}/bin/wasm-ld -mwasm64 -o "${linked}" ${objs}
      -L${m64lib} ${m64lib}/crt1_reactor.o -lstandalonewasm-memgrow -lnoexit -lc -ldlmalloc
      -lcompiler_rt --import-undefined --strip-debug --gc-sections ${m64exports}
      --export=stackSave --export=stackRestore --export=_initialize
      -z stack-size=5242880 --initial-memory=16777216 --max-memory=17179869184
      --entry=_initialize --global-base=1024 ${memflags}
    COMMAND ${WASMLM_EM64}/bin/wasm-opt -O3 --strip-target-features --strip-producers
      --one-caller-inline-max-function-size=400 "${linked}" -o "${out}"
    COMMAND ${WASMLM_NODE64} ${CMAKE_SOURCE_DIR}/tools/wasm64/abi.mjs "${out}"
    DEPENDS ${objs} tools/exports.txt tools/wasm64/abi.mjs
    COMMENT "wasm64: linking ${out}" VERBATIM)
  string(REPLACE "-" "_" tname "wasmlm_module${variant}")
  add_custom_target(${tname} ALL DEPENDS "${out}")
endforeach()
