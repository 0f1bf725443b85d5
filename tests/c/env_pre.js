// Emscripten pre-js for the C tests under node: pass WASMLM_SHARED, WASMLM_VOCAB_DIR and
// WASMLM_SYNTH_DIR (test_embed's models) from the
// real environment (Emscripten's getenv() otherwise sees a synthetic environment).
Module['preRun'] = Module['preRun'] || [];
Module['preRun'].push(function () {
  if (typeof ENV !== 'undefined' && process.env['WASMLM_SHARED']) ENV['WASMLM_SHARED'] = process.env['WASMLM_SHARED'];
  if (typeof ENV !== 'undefined' && process.env['WASMLM_VOCAB_DIR']) ENV['WASMLM_VOCAB_DIR'] = process.env['WASMLM_VOCAB_DIR'];
  if (typeof ENV !== 'undefined' && process.env['WASMLM_SYNTH_DIR']) ENV['WASMLM_SYNTH_DIR'] = process.env['WASMLM_SYNTH_DIR'];
});
