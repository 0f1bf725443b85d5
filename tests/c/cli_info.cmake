# Runs `wasmlm info MODEL` and checks that it names the architecture and the shape
# (stories260K.gguf: llama, dim 64, 5 layers, 8 heads, 4 KV heads, 512 tokens, context 512), and
# that a missing file is an error. Variables: CLI, MODEL.
execute_process(COMMAND ${CLI} info ${MODEL} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wasmlm info exited ${rc}: ${err}")
endif()
foreach(want "architecture: llama\n" "embedding_length: 64\n" "block_count: 5\n" "head_count: 8\n"
        "head_count_kv: 4\n" "vocab_size: 512\n")
  string(FIND "${out}" "${want}" at)
  if(at LESS 0)
    message(FATAL_ERROR "wasmlm info lacks \"${want}\":\n${out}")
  endif()
endforeach()
execute_process(COMMAND ${CLI} info ${MODEL}.missing OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "cannot read")
  message(FATAL_ERROR "wasmlm info on a missing file: exit ${rc}, ${err}")
endif()
message(STATUS "wasmlm info: ok")
