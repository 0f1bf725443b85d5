# Runs the CLI on stories260K at temperature 0 and compares standard output with a run.c
# golden file byte for byte. Variables: CLI, SHARED, STEPS, PROMPT (optional), EXPECTED,
# GGUF (optional: run stories260K.gguf, which carries its vocabulary, instead of the .bin),
# THREADS (optional: --threads THREADS; the output must not change).
set(prompt_args "")
if(DEFINED PROMPT)
  set(prompt_args -i "${PROMPT}")
endif()
set(model_args ${SHARED}/models/stories260K.bin -z ${SHARED}/models/tok512.bin)
if(DEFINED GGUF)
  set(model_args ${SHARED}/models/stories260K.gguf)
endif()
set(thread_args "")
if(DEFINED THREADS)
  set(thread_args --threads ${THREADS})
endif()
execute_process(
  COMMAND ${CLI} ${model_args} -t 0 -n ${STEPS}
          ${prompt_args} ${thread_args}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "CLI failed (${rc}): ${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cli_actual.txt "${out}")
  message(FATAL_ERROR "CLI output differs from ${EXPECTED}\n--- got:\n${out}\n--- expected:\n${expected}")
endif()
message(STATUS "1 passed, 0 failed")
