# The README's promise for run.c's flags: "it prints the same bytes as run.c for the same
# arguments", checked on seeded, sampled runs. Each line of CASES (tests/reference/runc/cases.tsv)
# names a golden file, made by llama2.c's run.c on stories260K.bin + tok512.bin, and the run.c
# arguments that made it (tab-separated). The CLI must print the same bytes with those arguments
# on the .bin, on stories260K.gguf (the same weights and vocabulary; no -z), with --threads 2 and,
# for the first case, with "-m generate" added. Then the KV cache default: run.c's flags alone
# keep run.c's F32 cache (-ctk f32 -ctv f32 changes nothing), llama.cpp's flags llama.cpp's F16.
# Variables: CLI, SHARED, CASES.
include("${CMAKE_CURRENT_LIST_DIR}/cli_check.cmake")
get_filename_component(dir "${CASES}" DIRECTORY)
set(bin ${SHARED}/models/stories260K.bin -z ${SHARED}/models/tok512.bin)
set(gguf ${SHARED}/models/stories260K.gguf)

# Runs the CLI with ARGN; sets <var> (stdout), <var>_err, <var>_rc.
function(wasmlm var)
  execute_process(COMMAND ${CLI} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${var} "${out}" PARENT_SCOPE)
  set(${var}_err "${err}" PARENT_SCOPE)
  set(${var}_rc "${rc}" PARENT_SCOPE)
endfunction()

file(STRINGS "${CASES}" lines)
set(ncases 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^#" OR line STREQUAL "")
    continue()
  endif()
  string(REPLACE "\t" ";" fields "${line}")
  list(POP_FRONT fields name)
  file(READ "${dir}/${name}" want)
  wasmlm(r ${bin} ${fields})
  check("r_rc;EQUAL;0;AND;r;STREQUAL;want" "${name}: '${fields}' prints run.c's bytes\n--- got:\n${r}${r_err}\n--- run.c:\n${want}")
  wasmlm(g ${gguf} ${fields})
  check("g_rc;EQUAL;0;AND;g;STREQUAL;want" "${name}: the same run on stories260K.gguf\n--- got:\n${g}${g_err}")
  wasmlm(t ${bin} ${fields} --threads 2)
  check("t_rc;EQUAL;0;AND;t;STREQUAL;want" "${name}: the same run with --threads 2\n--- got:\n${t}${t_err}")
  if(ncases EQUAL 0)
    set(first_args ${fields})
    set(first_want "${want}")
    wasmlm(m ${bin} ${fields} -m generate)
    check("m_rc;EQUAL;0;AND;m;STREQUAL;want" "${name}: the same run with -m generate")
  endif()
  math(EXPR ncases "${ncases} + 1")
endforeach()
check("ncases;GREATER;0" "${CASES} lists no case")

# The KV cache type: F32 by default with run.c's flags (as -ctk f32 -ctv f32), F16 by default
# once a llama.cpp sampling flag selects llama.cpp's order (as -ctk f16 -ctv f16); the first
# case's text tells F16 from F32 (its F16 run parts from run.c's text after about 60 tokens).
wasmlm(f32 ${bin} ${first_args} -ctk f32 -ctv f32)
wasmlm(f16 ${bin} ${first_args} -ctk f16 -ctv f16)
check("f32;STREQUAL;first_want" "-ctk f32 -ctv f32 == run.c's flags alone")
check("NOT;f16;STREQUAL;first_want" "the first case tells an F16 cache from F32 (pick another case if not)")
string(REPLACE "-t;" "--temp;" llama_args "${first_args}")
wasmlm(l ${bin} ${llama_args} --top-k 0)
wasmlm(l16 ${bin} ${llama_args} --top-k 0 -ctk f16 -ctv f16)
wasmlm(l32 ${bin} ${llama_args} --top-k 0 -ctk f32 -ctv f32)
check("l_rc;EQUAL;0;AND;l;STREQUAL;l16" "llama.cpp's flags: the F16 cache by default (${l_err})")
check("NOT;l;STREQUAL;l32" "llama.cpp's flags: F16 and F32 caches differ on this run")
check_finish()
