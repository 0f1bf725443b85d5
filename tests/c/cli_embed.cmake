# `wasmlm embed` (src/cli/cli_embed.c) on the synthetic BERT of the synth_embed fixture: llama.cpp's
# llama-embedding JSON shape with one vector per text (-p twice, and a file split at
# --embd-separator), the array format, rank scores from the reranker, and the errors: rank
# pooling without a head, a model without pooling_type and no --pooling, generation on an
# encoder, a bad flag value. Variables: CLI, SYNTH (the fixture's directory), SHARED, WORK.
file(MAKE_DIRECTORY "${WORK}")
set(failed 0)
function(run_cli out_var err_var rc_var)
  execute_process(COMMAND ${CLI} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()
# expect(MESSAGE CONDITION...): counts a failure with MESSAGE unless CONDITION holds.
macro(expect what)
  if(NOT (${ARGN}))
    message(SEND_ERROR "${what}")
    math(EXPR failed "${failed} + 1")
  endif()
endmacro()

set(bert "${SYNTH}/bert-tiny.gguf")
run_cli(out err rc embed ${bert} -p "Hello world" -p "The quick brown fox" --embd-output-format json)
expect("json: exit ${rc}: ${err}" rc EQUAL 0)
string(JSON object GET "${out}" object)
string(JSON n LENGTH "${out}" data)
string(JSON kind GET "${out}" data 1 object)
string(JSON index GET "${out}" data 1 index)
string(JSON dims LENGTH "${out}" data 0 embedding)
expect("json shape: ${object} ${n} ${kind} ${index} ${dims}" object STREQUAL "list" AND n EQUAL 2 AND kind STREQUAL "embedding" AND index EQUAL 1 AND dims EQUAL 64)
# the same texts from a file, split at a separator; the array format
file(WRITE "${WORK}/texts.txt" "Hello world|The quick brown fox")
run_cli(out2 err rc embed ${bert} -f "${WORK}/texts.txt" --embd-separator "|" --embd-output-format array)
expect("array: exit ${rc}: ${err}" rc EQUAL 0)
string(JSON n2 LENGTH "${out2}")
string(JSON a GET "${out}" data 1 embedding 5)
string(JSON b GET "${out2}" 1 5)
expect("array: ${n2} vectors, component ${a} vs ${b}" n2 EQUAL 2 AND a STREQUAL b)
# json+: the same data plus llama.cpp's cosineSimilarity matrix (texts 0 and 2 equal: their
# entry is 1.00, the matrix is symmetric, and rows 0 and 2 are the same)
run_cli(out3 err rc embed ${bert} -p "Hello world" -p "The quick brown fox" -p "Hello world" --embd-output-format json+)
expect("json+: exit ${rc}: ${err}" rc EQUAL 0)
string(JSON a GET "${out3}" data 1 embedding 5)
string(JSON b GET "${out}" data 1 embedding 5)
string(JSON rows LENGTH "${out3}" cosineSimilarity)
string(JSON c00 GET "${out3}" cosineSimilarity 0 0)
string(JSON c02 GET "${out3}" cosineSimilarity 0 2)
string(JSON c01 GET "${out3}" cosineSimilarity 0 1)
string(JSON c10 GET "${out3}" cosineSimilarity 1 0)
string(JSON c21 GET "${out3}" cosineSimilarity 2 1)
expect("json+: ${rows} rows, ${a} vs ${b}, cos ${c00} ${c02} ${c01} ${c10} ${c21}" rows EQUAL 3 AND a STREQUAL b
       AND c00 STREQUAL "1.0" AND c02 STREQUAL "1.0" AND c01 STREQUAL c10 AND c01 STREQUAL c21 AND NOT c01 STREQUAL "1.0")
run_cli(out4 err rc embed ${bert} -p "Hello world" --embd-output-format json+)
expect("json+ with one text has no matrix: ${out4}" rc EQUAL 0 AND NOT out4 MATCHES "cosineSimilarity")

# rank scores from the reranker; rank without a head is an error
run_cli(out err rc embed "${SYNTH}/bert-rerank-tiny.gguf" -p "what is a fox?\tthe quick brown fox" --embd-output-format json)
string(JSON dims LENGTH "${out}" data 0 embedding)
expect("rerank: exit ${rc}, ${dims} scores: ${err}" rc EQUAL 0 AND dims EQUAL 1)
run_cli(out err rc embed ${bert} --pooling rank -p "a\tb")
expect("rank on bert: exit ${rc}: ${err}" rc EQUAL 1 AND err MATCHES "needs a reranker")
# a generative model without pooling_type needs --pooling; with it, it embeds
run_cli(out err rc embed "${SHARED}/models/stories260K.gguf" -p "Once upon a time")
expect("no pooling: exit ${rc}: ${err}" rc EQUAL 1 AND err MATCHES "--pooling")
run_cli(out err rc embed "${SHARED}/models/stories260K.gguf" -p "Once upon a time" --pooling last)
expect("--pooling last: exit ${rc}: ${err}" rc EQUAL 0 AND out MATCHES "^embedding 0:")
# an encoder does not generate; bad flag values are refused before the model is read
run_cli(out err rc ${bert} -i "Hello" -n 4)
expect("generate on bert: exit ${rc}: ${err}" NOT rc EQUAL 0 AND err MATCHES "embedding model")
run_cli(out err rc embed ${bert} -p "x" --pooling max)
expect("--pooling max: exit ${rc}: ${err}" rc EQUAL 1 AND err MATCHES "--pooling expects")
run_cli(out err rc embed ${bert} -p "x" --embd-normalize two)
expect("--embd-normalize two: exit ${rc}: ${err}" rc EQUAL 1 AND err MATCHES "integer")

if(failed GREATER 0)
  message(FATAL_ERROR "${failed} checks failed")
endif()
message(STATUS "wasmlm embed: all checks passed")
