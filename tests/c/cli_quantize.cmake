# `wasmlm quantize`: stories260K.bin (+ tok512.bin) and ggml-org's stories260K.gguf to GGUF files
# that load (checked through `wasmlm tokenize`, which reads their vocabulary: the same ids as
# tok512.bin), the fallback message for rows that are not whole blocks, and requests that fail
# leaving no file (neither OUT nor OUT.tmp). Variables: CLI, SHARED, WORK (scratch directory).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(bin "${SHARED}/models/stories260K.bin")
set(tok "${SHARED}/models/tok512.bin")
include("${CMAKE_CURRENT_LIST_DIR}/cli_check.cmake")

function(quantize out_var rc_var)
  execute_process(COMMAND ${CLI} quantize ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${out_var} "${err}" PARENT_SCOPE)
  set(${rc_var} ${rc} PARENT_SCOPE)
endfunction()

# A CLI whose main() does not dispatch "quantize" would read a model file named "quantize".
execute_process(COMMAND ${CLI} quantize ERROR_VARIABLE err RESULT_VARIABLE rc)
string(FIND "${err}" "Usage: wasmlm quantize" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${CLI} has no quantize command: src/cli/cli.c's main() must call "
                      "wlm_cli_quantize(argc - 2, argv + 2) for argv[1] == \"quantize\" (${err})")
endif()

# llama2.c in: every type and mix, each a loadable file; Q8_0 reports its F16 fallback (hidden
# 172), Q5_K llama.cpp's Q5_1 fallback, Q4_K_M its Q6_K attn_v layers.
file(WRITE "${WORK}/text.txt" "Once upon a time, Lily saw a big dog.\nIt was happy!")
execute_process(COMMAND ${CLI} tokenize ${tok} INPUT_FILE "${WORK}/text.txt"
                OUTPUT_VARIABLE want RESULT_VARIABLE rc)
check("rc;EQUAL;0" "tokenize tok512.bin")
foreach(type IN ITEMS F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K MXFP4
                       Q3_K_M Q4_K_M Q5_K_M MXFP4_MOE)
  quantize(err rc ${bin} "${WORK}/s-${type}.gguf" ${type} -z ${tok})
  check("rc;EQUAL;0" "quantize to ${type}: ${err}")
  check("EXISTS;${WORK}/s-${type}.gguf" "${type}: output exists")
  check("NOT;EXISTS;${WORK}/s-${type}.gguf.tmp" "${type}: no .tmp left")
  if(type STREQUAL "Q8_0")
    string(FIND "${err}" "rows of 172" at)
    check("at;GREATER;-1" "Q8_0 reports the F16 fallback: ${err}")
  elseif(type STREQUAL "Q5_K")
    string(FIND "${err}" "31 matrices with rows of 64 (token_embd.weight, ...) written as Q5_1" at)
    check("at;GREATER;-1" "Q5_K reports llama.cpp's Q5_1 fallback: ${err}")
  elseif(type STREQUAL "Q4_K_M")
    string(FIND "${err}" "Q6_K needs rows in blocks of 256: 2 matrices with rows of 64 (blk.2.attn_v" at)
    check("at;GREATER;-1" "Q4_K_M gives attn_v of layers 2 and 4 Q6_K (then Q8_0): ${err}")
    string(FIND "${err}" ": Q4_K_M, 5 layers" at)
    check("at;GREATER;-1" "Q4_K_M named in the summary: ${err}")
  endif()
  execute_process(COMMAND ${CLI} tokenize "${WORK}/s-${type}.gguf" INPUT_FILE "${WORK}/text.txt"
                  OUTPUT_VARIABLE got ERROR_VARIABLE terr RESULT_VARIABLE rc)
  check("rc;EQUAL;0;AND;got;STREQUAL;want" "${type}: vocabulary ids ${got} vs ${want} ${terr}")
endforeach()

# GGUF in (its vocabulary is copied; -z is not needed).
quantize(err rc "${SHARED}/models/stories260K.gguf" "${WORK}/g-Q4_0.gguf" q4_0)
check("rc;EQUAL;0" "GGUF to Q4_0: ${err}")
quantize(err rc "${WORK}/s-F32.gguf" "${WORK}/g-Q8_0.gguf" Q8_0 --name again)
check("rc;EQUAL;0" "our GGUF to Q8_0: ${err}")
# a file of several types in (every matrix dequantized through its own type), a mix out
quantize(err rc "${WORK}/s-Q3_K_M.gguf" "${WORK}/g-Q5_K_M.gguf" Q5_K_M)
check("rc;EQUAL;0" "Q3_K_M GGUF to Q5_K_M: ${err}")
execute_process(COMMAND ${CLI} tokenize "${WORK}/g-Q5_K_M.gguf" INPUT_FILE "${WORK}/text.txt"
                OUTPUT_VARIABLE got RESULT_VARIABLE rc)
check("rc;EQUAL;0;AND;got;STREQUAL;want" "Q3_K_M -> Q5_K_M: vocabulary ids ${got}")

# Failures leave nothing behind.
foreach(args IN ITEMS "Q8_K;-z;${tok}" "Q4_K_S;-z;${tok}" "Q8_0" "Q8_0;-z;${SHARED}/models/tokenizer.bin")
  quantize(err rc ${bin} "${WORK}/bad.gguf" ${args})
  check("NOT;rc;EQUAL;0" "quantize ${args} should fail")
  check("NOT;EXISTS;${WORK}/bad.gguf;AND;NOT;EXISTS;${WORK}/bad.gguf.tmp" "${args}: no file")
endforeach()
quantize(err rc "${WORK}/missing.bin" "${WORK}/bad.gguf" Q8_0 -z ${tok})
check("NOT;rc;EQUAL;0" "a missing input should fail")
quantize(err rc ${bin} "${WORK}/no/such/dir/x.gguf" Q8_0 -z ${tok})
check("NOT;rc;EQUAL;0" "an unwritable output should fail")
quantize(err rc ${bin})
check("NOT;rc;EQUAL;0" "missing arguments should fail")

check_finish()
