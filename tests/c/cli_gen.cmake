# Generation options of the CLI (src/cli/cli_gen.c) on stories260K: --json output (every line
# parses; token lines agree with the finals and with run.c's greedy text), batches, beam search,
# stop strings, context shifting, the sampler order and parameter errors.
# Variables: CLI, SHARED, CASE (json | batch | beam | stop | context | order | errors |
# grammar: --grammar, --grammar-file, -j, -jf | speculative: -md, --draft-max, --lookup-ngram),
# WORK (scratch directory).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(model ${SHARED}/models/stories260K.bin -z ${SHARED}/models/tok512.bin)
set(golden "${SHARED}/reference/stories260K_run.c_greedy_OnceUponATime_404.txt")
set(prompt "Once upon a time")
include("${CMAKE_CURRENT_LIST_DIR}/cli_check.cmake")

# Runs the CLI on stories260K with ARGN; sets <var> (stdout), <var>_err, <var>_rc.
function(wasmlm var)
  execute_process(COMMAND ${CLI} ${model} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${var} "${out}" PARENT_SCOPE)
  set(${var}_err "${err}" PARENT_SCOPE)
  set(${var}_rc "${rc}" PARENT_SCOPE)
endfunction()

# Parses --json output: every line must be a JSON object. Sets, with prefix p:
#   p_bad (lines that do not parse or lack a field), p_ntok (token lines), p_nfin (finals),
#   p_pieces_<seq> (the token pieces joined), p_ntok_<seq>, p_first_<seq> (first token id),
#   p_ntop_bad (token lines whose "top" does not hold n_probs entries),
#   p_<k>_text / _logprob / _score / _n_tokens / _stop_reason / _seq for the k-th final line.
function(parse_json text p n_probs)
  set(bad 0)
  set(ntok 0)
  set(nfin 0)
  set(ntop_bad 0)
  set(seqs "")
  while(NOT text STREQUAL "")
    string(FIND "${text}" "\n" nl)
    if(nl EQUAL -1)
      math(EXPR bad "${bad} + 1") # every line ends with a newline
      set(line "${text}")
      set(text "")
    else()
      string(SUBSTRING "${text}" 0 ${nl} line)
      math(EXPR rest "${nl} + 1")
      string(SUBSTRING "${text}" ${rest} -1 text)
    endif()
    string(JSON type ERROR_VARIABLE e TYPE "${line}")
    if(e OR NOT type STREQUAL "OBJECT")
      math(EXPR bad "${bad} + 1")
      continue()
    endif()
    string(JSON seq ERROR_VARIABLE e1 GET "${line}" seq)
    string(JSON final ERROR_VARIABLE e2 GET "${line}" final)
    if(e1)
      math(EXPR bad "${bad} + 1")
    elseif(NOT e2)
      foreach(f text logprob n_tokens stop_reason)
        string(JSON v ERROR_VARIABLE e GET "${line}" ${f})
        if(e)
          math(EXPR bad "${bad} + 1")
        endif()
        set(${p}_${nfin}_${f} "${v}" PARENT_SCOPE)
      endforeach()
      string(JSON v ERROR_VARIABLE e GET "${line}" score)
      set(${p}_${nfin}_score "${v}" PARENT_SCOPE)
      set(${p}_${nfin}_seq "${seq}" PARENT_SCOPE)
      math(EXPR nfin "${nfin} + 1")
    else()
      foreach(f id piece logprob prob prob_sampled)
        string(JSON v ERROR_VARIABLE e GET "${line}" ${f})
        if(e)
          math(EXPR bad "${bad} + 1")
        endif()
        set(tok_${f} "${v}")
      endforeach()
      if(NOT DEFINED ntok_${seq})
        set(ntok_${seq} 0)
        set(first_${seq} ${tok_id})
        set(pieces_${seq} "")
        list(APPEND seqs ${seq})
      endif()
      math(EXPR ntok_${seq} "${ntok_${seq}} + 1")
      string(APPEND pieces_${seq} "${tok_piece}")
      string(JSON ntop ERROR_VARIABLE e LENGTH "${line}" top)
      if(e)
        set(ntop 0)
      endif()
      if(NOT ntop EQUAL n_probs)
        math(EXPR ntop_bad "${ntop_bad} + 1")
      elseif(ntop GREATER 0)
        foreach(f id piece prob prob_sampled logprob)
          string(JSON v ERROR_VARIABLE e GET "${line}" top 0 ${f})
          if(e)
            math(EXPR ntop_bad "${ntop_bad} + 1")
          endif()
        endforeach()
      endif()
      math(EXPR ntok "${ntok} + 1")
    endif()
  endwhile()
  foreach(s IN LISTS seqs)
    set(${p}_pieces_${s} "${pieces_${s}}" PARENT_SCOPE)
    set(${p}_ntok_${s} "${ntok_${s}}" PARENT_SCOPE)
    set(${p}_first_${s} "${first_${s}}" PARENT_SCOPE)
  endforeach()
  set(${p}_bad ${bad} PARENT_SCOPE)
  set(${p}_ntok ${ntok} PARENT_SCOPE)
  set(${p}_nfin ${nfin} PARENT_SCOPE)
  set(${p}_ntop_bad ${ntop_bad} PARENT_SCOPE)
endfunction()

# The greedy continuation of "Once upon a time" according to run.c (its output without the
# prompt and the final newline).
file(READ "${golden}" gold)
string(LENGTH "${prompt}" plen)
string(LENGTH "${gold}" glen)
math(EXPR clen "${glen} - ${plen} - 1")
string(SUBSTRING "${gold}" ${plen} ${clen} gold_cont)

if(CASE STREQUAL "json")
  # Greedy with --json: the pieces make run.c's text, one token line per token.
  wasmlm(r -t 0 -n 404 -i "${prompt}" --json --n-probs 3)
  check("r_rc;EQUAL;0" "greedy --json runs: ${r_err}")
  parse_json("${r}" g 3)
  check("g_bad;EQUAL;0" "every --json line parses with its fields")
  check("g_nfin;EQUAL;1" "one final line (got ${g_nfin})")
  check("g_ntop_bad;EQUAL;0" "every token line has 3 alternatives with their fields")
  check("g_0_seq;EQUAL;0" "final seq is 0")
  check("g_ntok;EQUAL;g_0_n_tokens" "token lines (${g_ntok}) == n_tokens (${g_0_n_tokens})")
  check("g_pieces_0;STREQUAL;g_0_text" "joined pieces == final text")
  check("g_0_text;STREQUAL;gold_cont" "final text == run.c's greedy continuation")
  check("g_0_stop_reason;STREQUAL;eos" "run.c's golden run ends with EOS (${g_0_stop_reason})")
  check("g_0_logprob;LESS;0" "total logprob < 0 (${g_0_logprob})")
  # From BOS alone, 256 positions: run.c's other golden file.
  wasmlm(r -t 0 -n 256 --json)
  parse_json("${r}" b 0)
  file(READ "${SHARED}/reference/stories260K_run.c_greedy_noprompt_256.txt" gold2)
  string(LENGTH "${gold2}" len2)
  math(EXPR len2 "${len2} - 1")
  string(SUBSTRING "${gold2}" 0 ${len2} gold2)
  check("b_bad;EQUAL;0;AND;b_ntop_bad;EQUAL;0" "no-prompt --json parses, no top without --n-probs")
  check("b_0_text;STREQUAL;gold2" "no-prompt --json text == run.c's")
  check("b_ntok;EQUAL;b_0_n_tokens" "no-prompt token lines == n_tokens")
  # --logit-bias: banning the greedy first token changes the first token.
  wasmlm(r -t 0 --n-predict 5 -i "${prompt}" --json --logit-bias ${g_first_0}-inf)
  parse_json("${r}" ban 0)
  check("r_rc;EQUAL;0;AND;ban_ntok;EQUAL;5" "--n-predict 5 gives 5 tokens (${r_err})")
  check("NOT;ban_first_0;EQUAL;g_first_0" "--logit-bias ${g_first_0}-inf bans the greedy token")
  # Invalid UTF-8: a byte token (<0xE2>, id 229) forced by a bias; each lone byte is \ufffd.
  # A token line holds back a byte that may start a character; the last one, never completed,
  # shows only in the final text.
  wasmlm(r -t 0 --n-predict 4 --json --logit-bias 229+100)
  parse_json("${r}" u 0)
  string(JSON fffd GET "[\"\\ufffd\"]" 0)
  string(REPEAT "${fffd}" 4 want)
  string(REPEAT "${fffd}" 3 want_pieces)
  check("u_bad;EQUAL;0" "--json with invalid UTF-8 parses: ${r}")
  check("u_0_text;STREQUAL;want" "lone bytes become U+FFFD: '${u_0_text}'")
  check("u_pieces_0;STREQUAL;want_pieces" "pieces of lone bytes become U+FFFD")
  # A character split over two byte tokens (<0xC3> id 198, <0xA9> id 172: "\u00e9"), made to
  # alternate by a frequency penalty: the first token's piece is empty, the second's the whole
  # character.
  wasmlm(r --temp 0 --n-predict 4 --json --logit-bias 198+100 --logit-bias 172+100
         --frequency-penalty 50)
  parse_json("${r}" e 0)
  string(JSON e_acute GET "[\"\\u00e9\"]" 0)
  string(REPEAT "${e_acute}" 2 want)
  check("e_bad;EQUAL;0;AND;e_ntok;EQUAL;4" "split characters: 4 token lines")
  check("e_0_text;STREQUAL;want;AND;e_pieces_0;STREQUAL;want" "split characters arrive whole")
endif()

if(CASE STREQUAL "batch")
  wasmlm(one -t 0 --n-predict 40 -i "${prompt}" --json)
  parse_json("${one}" one 0)
  # --n-samples 3 at temperature 0: three texts equal to the single greedy run.
  wasmlm(r --temp 0 --n-predict 40 -i "${prompt}" --json --n-samples 3)
  check("r_rc;EQUAL;0" "--n-samples 3 runs: ${r_err}")
  parse_json("${r}" n 0)
  check("n_bad;EQUAL;0;AND;n_nfin;EQUAL;3" "--n-samples 3: 3 finals (${n_nfin})")
  foreach(k 0 1 2)
    check("n_${k}_text;STREQUAL;one_0_text" "sample ${k} text == greedy: ${n_${k}_text}")
    check("n_pieces_${n_${k}_seq};STREQUAL;n_${k}_text" "sample ${k}: pieces == text")
    check("n_ntok_${n_${k}_seq};EQUAL;n_${k}_n_tokens" "sample ${k}: token lines == n_tokens")
  endforeach()
  # --prompts: one sequence per non-blank line, each as when run alone.
  file(WRITE "${WORK}/prompts.txt" "${prompt}\n\nThe cat sat\r\n")
  wasmlm(r -t 0 --n-predict 30 --prompts "${WORK}/prompts.txt" --json)
  check("r_rc;EQUAL;0" "--prompts runs: ${r_err}")
  parse_json("${r}" p 0)
  check("p_bad;EQUAL;0;AND;p_nfin;EQUAL;2" "--prompts with 2 lines: 2 finals (${p_nfin})")
  foreach(k 0 1)
    set(text_${p_${k}_seq} "${p_${k}_text}")
  endforeach()
  wasmlm(a -t 0 --n-predict 30 -i "${prompt}" --json)
  parse_json("${a}" a 0)
  wasmlm(c -t 0 --n-predict 30 -i "The cat sat" --json)
  parse_json("${c}" c 0)
  check("text_0;STREQUAL;a_0_text" "--prompts line 1 == its single run")
  check("text_1;STREQUAL;c_0_text" "--prompts line 2 == its single run")
  # Seeds: sequence i of a batch samples as a single run with seed + i.
  wasmlm(r --temp 1 --top-p 0.95 --seed 7 --n-predict 30 -i "${prompt}" --json --n-samples 3)
  parse_json("${r}" s 0)
  wasmlm(x --temp 1 --top-p 0.95 --seed 9 --n-predict 30 -i "${prompt}" --json)
  parse_json("${x}" x 0)
  foreach(k 0 1 2)
    if(s_${k}_seq EQUAL 2)
      set(seq2 "${s_${k}_text}")
    endif()
  endforeach()
  check("seq2;STREQUAL;x_0_text" "batch sequence 2 == single run with seed 7 + 2")
  # Plain batch output: "[i] " and the prompt plus continuation, per sequence.
  wasmlm(r -t 0 --n-predict 10 -i "${prompt}" --n-samples 2)
  check("r_rc;EQUAL;0" "plain --n-samples runs")
  string(REGEX MATCHALL "\\[[01]\\] Once upon a time" heads "${r}")
  list(LENGTH heads nh)
  check("nh;EQUAL;2" "plain batch prints [0] and [1] with the prompt: ${r}")
endif()

if(CASE STREQUAL "beam")
  wasmlm(gr -t 0 --n-predict 40 -i "${prompt}" --json)
  parse_json("${gr}" g 0)
  # --beam 1 is greedy search.
  wasmlm(r --beam 1 --n-predict 40 -i "${prompt}" --json)
  check("r_rc;EQUAL;0" "--beam 1 runs: ${r_err}")
  parse_json("${r}" b1 0)
  check("b1_bad;EQUAL;0;AND;b1_nfin;EQUAL;1;AND;b1_ntok;EQUAL;0"
        "--beam 1: one final, no token lines")
  check("b1_0_text;STREQUAL;g_0_text" "--beam 1 text == greedy text")
  check("NOT;b1_0_score;STREQUAL;b1_0_score-NOTFOUND" "beam finals carry a score")
  # --beam 4: 4 finals, best score first; ranked by total log-probability (length penalty 0)
  # the best is at least as likely as greedy.
  foreach(alpha 1 0)
    wasmlm(r --beam 4 --length-penalty ${alpha} --n-predict 40 -i "${prompt}" --json)
    check("r_rc;EQUAL;0" "--beam 4 runs: ${r_err}")
    parse_json("${r}" b4 0)
    check("b4_bad;EQUAL;0;AND;b4_nfin;EQUAL;4" "--beam 4: 4 finals (${b4_nfin})")
    foreach(k 1 2 3)
      math(EXPR j "${k} - 1")
      check("NOT;b4_${k}_score;GREATER;b4_${j}_score" "beam ${k} score <= beam ${j} score")
      check("b4_${k}_seq;EQUAL;${k}" "beam ranks are 0..3")
    endforeach()
  endforeach()
  check("NOT;b4_0_logprob;LESS;g_0_logprob"
        "best beam logprob ${b4_0_logprob} >= greedy ${g_0_logprob}")
  # Plain beams: "[rank] score=S logprob=L: text".
  wasmlm(r --beam 3 --n-predict 20 -i "${prompt}")
  set(head "\\[[0-2]\\] score=-?[0-9.]+ logprob=-?[0-9.]+: Once upon a time")
  string(REGEX MATCHALL "${head}" heads "${r}")
  list(LENGTH heads nh)
  check("nh;EQUAL;3" "plain --beam 3 prints 3 ranked lines: ${r}")
  string(FIND "${r_err}" "KV cache" at)
  check("at;GREATER;-1" "beam search reports its KV cache memory: ${r_err}")
endif()

if(CASE STREQUAL "stop")
  # Stop strings, one spanning a token boundary: the text ends before them, unprinted.
  foreach(stop "Lily" "girl named")
    string(FIND "${gold_cont}" "${stop}" at)
    string(SUBSTRING "${gold_cont}" 0 ${at} want)
    wasmlm(r -t 0 -n 404 -i "${prompt}" --json --stop "${stop}" --stop "no such text")
    parse_json("${r}" s 0)
    check("r_rc;EQUAL;0;AND;s_bad;EQUAL;0" "--stop '${stop}' runs: ${r_err}")
    check("s_0_text;STREQUAL;want" "--stop '${stop}': text '${s_0_text}' == '${want}'")
    check("s_0_stop_reason;STREQUAL;stop_string" "--stop '${stop}': stop_reason stop_string")
    # plain output: the prompt and the text before the stop string (held text released)
    wasmlm(r -t 0 -n 404 -i "${prompt}" --stop "${stop}")
    set(want_plain "${prompt}${want}\n")
    check("r;STREQUAL;want_plain" "plain --stop '${stop}': '${r}'")
  endforeach()
endif()

if(CASE STREQUAL "context")
  # --ctx-size 32: without shifting the sequence stops when full (n prompt tokens: 33 - n new,
  # the last one emitted but not evaluated); with --context-shift it goes on past 32 tokens.
  file(WRITE "${WORK}/prompt.txt" "${prompt}")
  execute_process(COMMAND ${CLI} tokenize ${SHARED}/models/tok512.bin --bos
                  INPUT_FILE "${WORK}/prompt.txt" OUTPUT_VARIABLE ids)
  string(REGEX MATCHALL "[0-9]+" ids "${ids}")
  list(LENGTH ids n_prompt)
  math(EXPR want_new "33 - ${n_prompt}")
  wasmlm(r -t 0 --ctx-size 32 --n-predict 80 -i "${prompt}" --json)
  parse_json("${r}" f 0)
  check("r_rc;EQUAL;0;AND;f_bad;EQUAL;0" "--ctx-size 32 runs: ${r_err}")
  check("f_0_stop_reason;STREQUAL;context_full" "full context: stop_reason ${f_0_stop_reason}")
  check("f_0_n_tokens;EQUAL;want_new" "full context after ${want_new} new tokens (${f_0_n_tokens})")
  foreach(keep 0 -1)
    wasmlm(r -t 0 --ctx-size 32 --context-shift --keep ${keep} --n-predict 80 -i "${prompt}" --json)
    parse_json("${r}" s 0)
    check("r_rc;EQUAL;0;AND;s_bad;EQUAL;0" "--context-shift --keep ${keep} runs: ${r_err}")
    check("s_0_n_tokens;GREATER;32" "--context-shift --keep ${keep}: ${s_0_n_tokens} tokens > 32")
    check("s_ntok;EQUAL;s_0_n_tokens" "--context-shift: token lines == n_tokens")
  endforeach()
endif()

if(CASE STREQUAL "order")
  # run.c's flags sample in run.c's order; llama.cpp's flags in llama.cpp's unless told.
  wasmlm(runc -t 0.8 -p 0.9 -s 42 -n 120)
  wasmlm(runc2 --temp 0.8 --top-p 0.9 --seed 42 -n 120 --sampler-order runc)
  wasmlm(llama --temp 0.8 --top-p 0.9 --seed 42 -n 120)
  wasmlm(llama2 -t 0.8 -p 0.9 -s 42 -n 120 --sampler-order llamacpp)
  check("runc_rc;EQUAL;0;AND;llama_rc;EQUAL;0" "sampling runs: ${runc_err} ${llama_err}")
  check("runc;STREQUAL;runc2" "--sampler-order runc == run.c's flags")
  check("llama;STREQUAL;llama2" "--sampler-order llamacpp == llama.cpp's flags")
  check("NOT;runc;STREQUAL;llama" "the two orders differ at temperature 0.8, top-p 0.9")
  # run.c's edges of the short flags: -p 0 and -p 1 turn top-p off (same draws with a seed).
  # Out-of-range values, which run.c clamps silently, are errors (case errors).
  wasmlm(p0 -t 0.8 -p 0 -s 7 -n 40)
  wasmlm(p1 -t 0.8 -p 1 -s 7 -n 40)
  wasmlm(p9 -t 0.8 -p 0.9 -s 7 -n 40)
  check("p0_rc;EQUAL;0;AND;p0;STREQUAL;p1" "-p 0 and -p 1 both turn top-p off: ${p0_err}")
  check("NOT;p1;STREQUAL;p9" "-p 1 (off) differs from -p 0.9 with seed 7")
endif()

if(CASE STREQUAL "errors")
  string(REPEAT "x" 64 long_stop)
  # flag,value,...|what the message must contain (a regular expression)
  set(cases
    "--top-p,1.5|top_p" "--temp,-1|temperature" "--top-k,-1|top_k" "--min-p,2|min_p"
    "--typical,0|typical" "--top-p,nan|top_p" "--repeat-penalty,0|repeat_penalty"
    "--n-probs,21|n_probs" "--beam,0|width" "--beam,40|width"
    "--beam,2,--length-penalty,-1|length_penalty"
    "--logit-bias,garbage|--logit-bias" "--logit-bias,15+|--logit-bias"
    "--logit-bias,100000+1|100000" "--logit-bias,5+inf|bias"
    "--bogus|unknown option '--bogus'" "--top-k|--top-k needs a value"
    "--top-k,abc|--top-k: 'abc' is not an integer" "--temp,x|--temp: 'x' is not a number"
    "--n-samples,0|--n-samples" "--n-samples,65|--n-samples" "--n-predict,0|--n-predict"
    "--threads,0|--threads must be in 1..16" "--threads,17|--threads" "--threads,two|--threads"
    "--sampler-order,foo|--sampler-order" "--ctx-size,100000|n_ctx" "--seed,-5|--seed"
    "--keep,-2|--keep" "--keep,40,--ctx-size,32,--context-shift|n_keep"
    "--beam,2,--n-samples,2|--beam" "--beam,2,--stop,x|--beam" "-m,chat|not supported"
    "--prompts,${WORK}/missing.txt|cannot read .*missing.txt: No such file or directory"
    "-i,x,--prompts,${WORK}/missing.txt|either"
    "--stop,${long_stop}|--stop" "-n,3,-i,${prompt},--json|nothing to generate"
    # run.c's flags: run.c clamps these silently; the README promises exit code 1
    "-t,-0.5|-t: the temperature must be a finite number >= 0" "-t,abc|-t: 'abc' is not a number"
    "-t,0.5x|-t: '0.5x' is not a number" "-t,1e99|-t: '1e99' is out of range" "-t,nan|-t: the"
    "-p,1.5|-p: top-p must be in \\[0, 1\\]" "-p,-0.1|-p: top-p" "-p,x|-p: 'x' is not a number"
    "-n,abc|-n: 'abc' is not an integer" "-n,-1|-n must be >= 0" "-n,12x|-n: '12x'"
    "-n,99999999999|-n: .99999999999. is not an integer" "-n, 5|-n: . 5. is not an integer"
    "-s,x|-s: expected an integer >= 0" "-s,-3|-s: expected" "-s,7.5|-s: expected"
    # llama.cpp's flags: non-numbers, trailing characters, out of range; before any output
    "--temp,-1,-i,${prompt}|temperature must be" "--temp,0.7.1|--temp: '0.7.1' is not a number"
    "--top-k,3.5|--top-k: '3.5' is not an integer" "--n-predict,abc|--n-predict: 'abc'"
    "--ctx-size,-4|--ctx-size must be >= 0" "-c,x|-c: 'x' is not an integer"
    "--threads,-1|--threads must be in 1..16" "--threads,2x|--threads: '2x'"
    "--n-probs,x|--n-probs" "--beam,x|--beam" "--length-penalty,y|--length-penalty"
    "--repeat-last-n,-2|repeat_last_n" "--presence-penalty,inf|presence_penalty"
    "--keep,z|--keep" "--n-samples,1.5|--n-samples" "--seed,1e3|--seed"
    "-z,${WORK}/missing.bin|cannot read .*missing.bin: No such file or directory")
  foreach(c IN LISTS cases)
    string(FIND "${c}" "|" bar)
    string(SUBSTRING "${c}" 0 ${bar} args)
    math(EXPR bar "${bar} + 1")
    string(SUBSTRING "${c}" ${bar} -1 want)
    string(REPLACE "," ";" args "${args}")
    wasmlm(r ${args})
    string(REGEX MATCH "${want}" m "${r_err}")
    check("r_rc;EQUAL;1;AND;m" "'${args}': exit ${r_rc}, stderr '${r_err}' should match '${want}'")
    # every argument is checked before anything is printed: no partial output
    string(LENGTH "${r}" nout)
    check("nout;EQUAL;0" "'${args}': printed '${r}' on standard output before failing")
  endforeach()
  # A model that cannot be read: the message carries the system's reason (strerror).
  foreach(c "${WORK}/missing.bin|No such file or directory" "${WORK}|Is a directory")
    string(FIND "${c}" "|" bar)
    string(SUBSTRING "${c}" 0 ${bar} path)
    math(EXPR bar "${bar} + 1")
    string(SUBSTRING "${c}" ${bar} -1 want)
    foreach(cmd "" tokenize quantize)
      set(args ${path})
      if(cmd STREQUAL "quantize")
        set(args ${path} ${WORK}/out.gguf Q8_0)
      endif()
      execute_process(COMMAND ${CLI} ${cmd} ${args} INPUT_FILE ${golden}
                      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
      string(FIND "${err}" "cannot read ${path}: ${want}" at)
      string(LENGTH "${out}" nout)
      check("rc;EQUAL;1;AND;at;GREATER;-1;AND;nout;EQUAL;0"
            "wasmlm ${cmd} ${path}: exit ${rc}, stderr '${err}' should say '${want}'")
    endforeach()
  endforeach()
  set(many "")
  foreach(k RANGE 8)
    list(APPEND many --stop "s${k}")
  endforeach()
  wasmlm(r ${many})
  string(FIND "${r_err}" "at most 8" at)
  check("r_rc;EQUAL;1;AND;at;GREATER;-1" "9 stop strings: ${r_err}")
  execute_process(COMMAND ${CLI} --help OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  string(FIND "${out}" "--frequency-penalty" at)
  check("rc;EQUAL;0;AND;at;GREATER;-1" "--help lists the options")
endif()

if(CASE STREQUAL "speculative")
  # Speculative decoding leaves greedy output unchanged: run.c's bytes with a draft model (the
  # same weights as GGUF: every draft accepted) and with prompt lookup; the statistics go to
  # standard error; the refusals come before anything is printed.
  set(copy "Lily and Tom went to the park. Lily and Tom went to the park. Lily and")
  foreach(p "${prompt}" "${copy}")
    wasmlm(plain -t 0 -n 300 -i "${p}")
    wasmlm(md -t 0 -n 300 -i "${p}" -md ${SHARED}/models/stories260K.gguf --draft-max 5)
    wasmlm(ng -t 0 -n 300 -i "${p}" --lookup-ngram 3 --draft 8)
    check("plain_rc;EQUAL;0;AND;md_rc;EQUAL;0;AND;ng_rc;EQUAL;0" "speculative runs: ${md_err} ${ng_err}")
    check("md;STREQUAL;plain" "-md: the same text as without ('${p}')")
    check("ng;STREQUAL;plain" "--lookup-ngram: the same text as without ('${p}')")
    string(REGEX MATCH "([0-9]+) tokens drafted, ([0-9]+) accepted" m "${md_err}")
    check("CMAKE_MATCH_1;GREATER;0;AND;CMAKE_MATCH_1;EQUAL;CMAKE_MATCH_2" "-md: every draft accepted: ${md_err}")
  endforeach()
  set(cases "--draft-max,0|--draft-max must be in 1..32" "--draft-max,33|--draft-max"
    "--lookup-ngram,9|--lookup-ngram must be in 1..8" "--draft-p-min,2|--draft-p-min"
    "--lookup-ngram,2,-md,x.gguf|either --model-draft or --lookup-ngram"
    "--lookup-ngram,2,--json|decodes one plain sequence" "--lookup-ngram,2,--beam,2|one plain sequence"
    "-md,${WORK}/missing.gguf|cannot read .*missing.gguf"
    "-md,${SHARED}/models/tok512.bin|tok512.bin")
  foreach(c IN LISTS cases)
    string(FIND "${c}" "|" bar)
    string(SUBSTRING "${c}" 0 ${bar} flags)
    math(EXPR bar "${bar} + 1")
    string(SUBSTRING "${c}" ${bar} -1 want)
    string(REPLACE "," ";" flags "${flags}")
    wasmlm(r -t 0 -n 20 -i "${prompt}" ${flags})
    string(LENGTH "${r}" nout)
    check("r_rc;EQUAL;1;AND;nout;EQUAL;0" "${flags}: exit code ${r_rc}, nothing on standard output")
    check("r_err;MATCHES;${want}" "${flags}: '${r_err}' matches '${want}'")
  endforeach()
endif()

if(CASE STREQUAL "grammar")
  # -j: every sample of a batch is a JSON object with the schema's two required properties
  set(schema "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 10}, \"age\": {\"type\": \"integer\"}}, \"required\": [\"name\", \"age\"]}")
  wasmlm(r -i "${prompt}" --seed 3 --n-predict 300 --n-samples 4 --json -j "${schema}")
  check("r_rc;EQUAL;0" "-j runs: ${r_err}")
  parse_json("${r}" j 0)
  check("j_bad;EQUAL;0;AND;j_nfin;EQUAL;4" "-j: 4 finals (${j_nfin})")
  foreach(k 0 1 2 3)
    string(JSON t ERROR_VARIABLE e TYPE "${j_${k}_text}")
    check("NOT;e;AND;t;STREQUAL;OBJECT;AND;j_${k}_stop_reason;STREQUAL;eos"
          "-j sample ${k} is a complete JSON object: ${j_${k}_text} ${e}")
    string(JSON name ERROR_VARIABLE e1 GET "${j_${k}_text}" name)
    string(JSON age_t ERROR_VARIABLE e2 TYPE "${j_${k}_text}" age)
    string(LENGTH "${name}" name_len)
    check("NOT;e1;AND;NOT;e2;AND;age_t;STREQUAL;NUMBER;AND;NOT;name_len;GREATER;10"
          "-j sample ${k} has name (<= 10 characters) and age: ${j_${k}_text}")
  endforeach()
  # -jf reads the schema from a file; the same seed gives the same text as -j
  file(WRITE "${WORK}/schema.json" "${schema}")
  wasmlm(f -i "${prompt}" --seed 3 --n-predict 300 --n-samples 4 --json -jf "${WORK}/schema.json")
  check("f_rc;EQUAL;0;AND;f;STREQUAL;r" "-jf FILE == -j TEXT: ${f_err}")
  # --grammar in a beam search: every beam follows it
  wasmlm(b -i "${prompt}" --beam 3 --n-predict 30 --grammar "root ::= (\"yes\" | \"no\") \" \" [a-z]{1,10}")
  check("b_rc;EQUAL;0" "--beam with --grammar runs: ${b_err}")
  string(REGEX MATCHALL "\\[[0-2]\\] score=[^:]*: Once upon a time(yes|no) [a-z]+" heads "${b}")
  list(LENGTH heads nh)
  check("nh;EQUAL;3" "3 beams follow the grammar: ${b}")
  # --grammar-file; errors name the file (or the flag), the line and the column
  file(WRITE "${WORK}/g.gbnf" "root ::= \"a\" x\n# comment\nx ::= \"b\" y\n")
  wasmlm(e -i "${prompt}" --grammar-file "${WORK}/g.gbnf")
  string(FIND "${e_err}" "g.gbnf: grammar line 3, column 11: undefined rule 'y'" at)
  string(LENGTH "${e}" e_len)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1;AND;e_len;EQUAL;0" "--grammar-file error: ${e_err}")
  wasmlm(e --grammar "root ::= a")
  string(FIND "${e_err}" "--grammar: grammar line 1, column 10: undefined rule 'a'" at)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1" "--grammar error: ${e_err}")
  wasmlm(e -j "{\"type\": \"object\",\n \"propertes\": {}}")
  string(FIND "${e_err}" "-j: schema line 2, column 2 (at '/'): keyword 'propertes' is not supported" at)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1" "-j unsupported keyword: ${e_err}")
  wasmlm(e -j "{\"type\": }")
  string(FIND "${e_err}" "the schema is not JSON: JSON line 1, column 10" at)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1" "-j not JSON: ${e_err}")
  wasmlm(e -jf "${WORK}/none.json")
  string(FIND "${e_err}" "-jf: cannot read" at)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1" "-jf missing file: ${e_err}")
  wasmlm(e --grammar "root ::= \"a\"" -j "{}")
  string(FIND "${e_err}" "give one of --grammar" at)
  check("NOT;e_rc;EQUAL;0;AND;at;GREATER;-1" "two grammar flags: ${e_err}")
endif()

if(passed EQUAL 0 AND failed EQUAL 0)
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
check_finish()
