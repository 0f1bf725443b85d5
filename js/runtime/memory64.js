// memory64.js — the memory64 (wasm64) modules, for models past wasm32's 4 GB: whether the
// runtime has memory64, how many bytes a model needs before it is read (weights + KV cache +
// scratch, from the file's header), and the adapter that makes a wasm64 instance look like a
// wasm32 one to js/engine/engine.js; and whether a draft model (speculative decoding) fits beside a
// loaded model, in the module that runs it (fitDraft). It does not read models (js/models/source.js)
// nor pick builds (js/runtime/wasm.js, which names the files).
//
// The adapter. In the wasm64 modules pointers and size_t are i64, i.e. BigInt in JS. The
// exports are wrapped from each module's own `wasmlm.abi` section (tools/wasm64/abi.mjs: every
// export's parameter and result types): i64 parameters take Numbers (converted to BigInt) and
// i64 results come back as Numbers. The few exports that write a pointer or a size_t through a
// pointer the caller passes (OUT_SLOTS), or read an array of pointers (POINTER_ARRAYS), get an
// 8-byte scratch slot and copy the value into the caller's 4-byte slot, so the caller's layouts
// stay wasm32's. That works because every pointer JS sees stays below 4 GB: js/models/source.js puts
// the model's weights above the heap that every other allocation comes from (lowHeapBytes()
// reserves it), and the adapter throws rather than let a pointer above 4 GB reach JS, where
// `p >>> 0` would wrap it.

import { jsError } from './errors.js';

/** The custom section tools/wasm64/abi.mjs writes. */
export const ABI_SECTION = 'wasmlm.abi';
/** wasm32's address space, and the most V8 gives a memory64 memory (16 GiB: 262144 pages). */
export const WASM32_BYTES = 2 ** 32;
export const WASM64_BYTES = 2 ** 34;
/** The share of wasm32's 4 GB a model may be estimated to need and still be given wasm32: the
 *  estimate (modelBytes) is within ~1 % of the context's actual bytes, the rest is the heap's
 *  fragmentation and what the estimate leaves out. */
export const WASM32_FIT = 0.97;

/** Exports that write a pointer or a size_t into a slot the caller passes: name → the slots'
 *  parameter indexes. (wlmjs_threadpool_new's slot holds an int: the same in both.) A test
 *  checks this list against src/wasmlm.h and src/wasm_exports.c (tests/js/memory64.test.mjs). */
export const OUT_SLOTS = Object.freeze({
  wlmjs_model_load: [2],
  wlmjs_model_load_external: [2],
  wlmjs_context_new: [8],
  wlm_model_meta_string: [2],
  wlm_token_piece: [3],
  wlm_token_text: [2],
  wlm_json_schema_to_grammar: [3, 4],
});
/** Exports that read an array of pointers: name → [the array's parameter, its count's]. */
export const POINTER_ARRAYS = Object.freeze({
  wlmjs_generate_batch_begin: [4, 1],
  wlmjs_generate_begin_media: [4, 5],
  wlmjs_generate_begin_media_cached: [4, 5],
  wlmjs_generate_batch_begin_media: [8, 9],
  wlmjs_generate_batch_begin_media_finish: [2, 1],
  wlmjs_generate_batch_add_media: [4, 5],
});
/** i64 results that are sizes, not pointers: never checked against 4 GB. */
const SIZE_RESULTS = new Set(['wlm_context_memory', 'wlmjs_token_piece_len']);

// A module declaring a 64-bit memory (limits flag 0x04, 1 page): validates iff memory64.
const MEMORY64_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]);

/** Whether this runtime runs memory64 modules: {ok, why}. */
export function memory64Support() {
  if (supportCache) return supportCache;
  let ok = false;
  try {
    ok = WebAssembly.validate(MEMORY64_PROBE);
  } catch {
    ok = false;
  }
  supportCache = Object.freeze({
    ok,
    why: ok ? null : 'this runtime has no WebAssembly memory64 (Chromium >= 133, Firefox >= 134 and ' +
      'Node >= 24 have it; Safari and Node 20 do not)',
  });
  return supportCache;
}
let supportCache = null;

/** Whether a compiled module is one of the memory64 builds (it carries the ABI section). */
export function isMemory64Module(module) {
  return WebAssembly.Module.customSections(module, ABI_SECTION).length > 0;
}

/** The threaded memory64 build's memory: 16 MiB to start, growable to 16 GiB. */
export function sharedMemory64() {
  return new WebAssembly.Memory({ initial: 256n, maximum: BigInt(WASM64_BYTES / 65536), shared: true, address: 'i64' });
}

/** name → {params: 'ij…', result: 'j' | 'i' | … | '-'} from a module's ABI section. */
export function moduleAbi(module) {
  const [section] = WebAssembly.Module.customSections(module, ABI_SECTION);
  const abi = new Map();
  if (!section) return abi;
  for (const line of new TextDecoder().decode(section).split('\n')) {
    const [name, params, result] = line.split(' ');
    if (name) abi.set(name, { params: params === '-' ? '' : params, result });
  }
  return abi;
}

const toBig = (v) => (typeof v === 'bigint' ? v : BigInt(v ?? 0));

function above4GB(name, what, v) {
  return jsError('WLM_ERR_NOMEM', `${name}: ${what} ${v} is above 4 GB in the memory64 module; ` +
    'the heap below the weights is full (a smaller nCtx needs less)');
}

/**
 * The exports of a memory64 instance as js/engine/engine.js uses wasm32's (see the file's comment).
 * `module` is the compiled module (for its ABI section). The scratch slots are malloc'd here,
 * once: this must run before anything large is allocated (right after _initialize).
 */
export function wrapExports64(exports, module) {
  const abi = moduleAbi(module);
  const out = { memory64: true };
  let scratch = 0; // 8 slots of 8 bytes for OUT_SLOTS
  let arrays = { ptr: 0, n: 0 }; // a malloc'd i64 array for POINTER_ARRAYS, grown on demand
  const view = () => new DataView(exports.memory.buffer);
  for (const [name, value] of Object.entries(exports)) {
    const sig = abi.get(name);
    if (typeof value !== 'function' || !sig) {
      out[name] = value;
      continue;
    }
    const { params, result } = sig;
    const big = [...params].map((c, i) => (c === 'j' ? i : -1)).filter((i) => i >= 0);
    const checkPtr = result === 'j' && !SIZE_RESULTS.has(name);
    let fn = big.length === 0 ? value : (...args) => {
      for (const i of big) args[i] = toBig(args[i]);
      return value(...args);
    };
    if (result === 'j') {
      const call = fn;
      fn = (...args) => {
        const r = Number(call(...args));
        if (checkPtr && r >= WASM32_BYTES) throw above4GB(name, 'the pointer returned', r);
        return r;
      };
    }
    const slots = OUT_SLOTS[name];
    const array = POINTER_ARRAYS[name];
    if (slots) {
      const call = fn;
      fn = (...args) => {
        const callerSlots = slots.map((i) => Number(args[i] ?? 0));
        slots.forEach((i, k) => {
          if (!callerSlots[k]) return; // NULL stays NULL
          view().setBigUint64(scratch + 8 * k, 0n, true);
          args[i] = scratch + 8 * k;
        });
        const r = call(...args);
        const dv = view();
        slots.forEach((i, k) => {
          if (!callerSlots[k]) return;
          const v = Number(dv.getBigUint64(scratch + 8 * k, true));
          if (v >= WASM32_BYTES) throw above4GB(name, 'the value written', v);
          dv.setUint32(callerSlots[k], v, true);
        });
        return r;
      };
    } else if (array) {
      const [at, countAt] = array;
      const call = fn;
      fn = (...args) => {
        const n = Math.max(0, Number(args[countAt]) | 0);
        const src = Number(args[at] ?? 0);
        if (src && n) {
          if (arrays.n < n) {
            if (arrays.ptr) exports.wlmjs_free(BigInt(arrays.ptr));
            arrays = { ptr: Number(exports.wlmjs_malloc(BigInt(8 * n))), n };
            if (!arrays.ptr || arrays.ptr >= WASM32_BYTES) {
              arrays = { ptr: 0, n: 0 };
              throw jsError('WLM_ERR_NOMEM', `${name}: cannot allocate ${n} pointers`);
            }
          }
          const dv = view();
          for (let k = 0; k < n; k++) dv.setBigUint64(arrays.ptr + 8 * k, BigInt(dv.getUint32(src + 4 * k, true)), true);
          args[at] = arrays.ptr;
        }
        return call(...args);
      };
    }
    out[name] = fn;
  }
  // The one allocation that may lie above 4 GB: the weights' buffer (js/models/source.js), unchecked.
  out.mallocHigh = (n) => Number(exports.wlmjs_malloc(BigInt(n)));
  if (typeof out._initialize === 'function') {
    const init = out._initialize;
    out._initialize = () => {
      init();
      scratch = out.wlmjs_malloc(8 * 8);
      if (!scratch) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 64 bytes');
    };
  }
  return out;
}

// ---- what a model needs ----

const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
/** Architectures whose tokens attend both ways (arch.c's bidirectional rows): a sequence passes
 *  whole, so the pass buffers hold nCtx entries. */
const BIDIRECTIONAL = new Set(['bert', 'nomic-bert', 'gemma-embedding']);
/** Architectures with sliding-window layers (arch.c's swa rows): their attention.sliding_window
 *  adds a second set of RoPE rows and widens the block pointers a pass reaches. */
const SLIDING = new Set(['gpt-oss', 'gemma3', 'gemma4', 'gemma-embedding']);

/** Thrown by the header reader when it needs more bytes than it was given. */
class NeedMore extends Error {}

/**
 * The hyperparameters that size a model's context, from the first bytes of its file: a GGUF
 * header (v2/v3: general.architecture, ARCH.block_count, embedding_length, feed_forward_length,
 * attention.head_count(_kv), attention.key_length / value_length, context_length, the vocabulary
 * size), or a llama2.c checkpoint's 7-int header. Returns {format, arch, nLayers, dim, hidden,
 * nHeads, nKvHeads, headK, headV, ctx, vocab, headerBytes}; null when `bytes` is neither format;
 * throws NeedMore when the header continues past `bytes`.
 */
export function readModelHeader(bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < 28) throw new NeedMore();
  if (dv.getUint32(0, true) !== GGUF_MAGIC) {
    const h = Array.from({ length: 7 }, (_, i) => dv.getInt32(4 * i, true));
    const [dim, hidden, nLayers, nHeads, nKvHeads, vocab, ctx] = h;
    // a plausible checkpoint only (web/sources.js classifies local files the same way): other
    // bytes are C's to refuse, with its format error
    if (!(dim > 0 && nHeads > 0 && dim % nHeads === 0 && nKvHeads > 0 && nHeads % nKvHeads === 0 &&
      hidden > 0 && vocab !== 0 && Math.abs(vocab) <= 1 << 22 && ctx > 0)) return null;
    const hs = dim / nHeads;
    return plausible({ format: 'llama2c', arch: 'llama', nLayers, dim, hidden, nHeads, nKvHeads, headK: hs, headV: hs,
      ctx, vocab: Math.abs(vocab), headerBytes: 28 });
  }
  let pos = 4;
  const need = (n) => { if (pos + n > bytes.byteLength) throw new NeedMore(); };
  const u32 = () => { need(4); const v = dv.getUint32(pos, true); pos += 4; return v; };
  const u64 = () => { need(8); const v = Number(dv.getBigUint64(pos, true)); pos += 8; return v; };
  const str = () => { const n = u64(); need(n); const s = new TextDecoder().decode(bytes.subarray(pos, pos + n)); pos += n; return s; };
  const skipStr = () => { const n = u64(); need(n); pos += n; }; // (a vocabulary's strings: not decoded)
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const scalar = (t) => {
    need(SIZES[t]);
    let v;
    switch (t) {
      case 0: case 7: v = dv.getUint8(pos); break;
      case 1: v = dv.getInt8(pos); break;
      case 2: v = dv.getUint16(pos, true); break;
      case 3: v = dv.getInt16(pos, true); break;
      case 4: v = dv.getUint32(pos, true); break;
      case 5: v = dv.getInt32(pos, true); break;
      case 6: v = dv.getFloat32(pos, true); break;
      case 10: v = Number(dv.getBigUint64(pos, true)); break;
      case 11: v = Number(dv.getBigInt64(pos, true)); break;
      case 12: v = dv.getFloat64(pos, true); break;
      default: return null;
    }
    pos += SIZES[t];
    return v;
  };
  const version = u32();
  if (version < 2 || version > 3) return null;
  const nTensors = u64();
  const nKv = u64();
  const kv = new Map();
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const t = u32();
    if (t === 8) kv.set(key, str());
    else if (t === 9) {
      const et = u32();
      const n = u64();
      if (et === 8) { for (let k = 0; k < n; k++) skipStr(); kv.set(key, { length: n }); }
      else if (SIZES[et]) {
        // per-layer arrays (head_count_kv of some models, Qwen3.5's recurrent_layers): keep
        // the largest value and how many are not 0
        let max = -Infinity, nonzero = 0;
        for (let k = 0; k < n; k++) { const v = scalar(et); max = Math.max(max, v); nonzero += v !== 0; }
        kv.set(key, { length: n, max, nonzero });
      } else return null;
    } else if (SIZES[t]) kv.set(key, scalar(t));
    else return null;
  }
  // The tensor directory: where the tensor data ends, i.e. the file's size, for a download that
  // does not say it (no Content-Length); null when a type's block size is not in BLOCKS.
  // Also the bytes a token reads (gguf_weights.c's weight_bytes, which the speculative rollback's
  // rule weighs states against): every tensor, the token embeddings one row when the file has
  // its own output matrix, a mixture's experts k of n (the active weights).
  const archName = kv.get('general.architecture');
  const nExp = kv.get(`${archName}.expert_count`), nUsed = kv.get(`${archName}.expert_used_count`);
  const active = typeof nExp === 'number' && nExp > 1 && typeof nUsed === 'number' ? Math.min(1, nUsed / nExp) : 1;
  let dataEnd = 0, tensorBytes = 0, embd = null, output = false;
  for (let i = 0; i < nTensors && dataEnd !== null; i++) {
    const name = str();
    const nDims = u32();
    if (nDims < 1 || nDims > 4) return null;
    let elems = 1, ne0 = 0;
    for (let d = 0; d < nDims; d++) { const n = u64(); if (d === 0) ne0 = n; elems *= n; }
    const block = BLOCKS[u32()];
    const offset = u64();
    const size = block && ne0 % block[0] === 0 ? (elems / block[0]) * block[1] : null;
    dataEnd = size === null ? null : Math.max(dataEnd, offset + size);
    tensorBytes += (size ?? 0) * (/_exps\./.test(name) ? active : 1);
    if (name === 'token_embd.weight' && size !== null) embd = { size, row: (ne0 / block[0]) * block[1] };
    if (name === 'output.weight') output = true;
  }
  const align = typeof kv.get('general.alignment') === 'number' ? kv.get('general.alignment') || 32 : 32;
  const split = typeof kv.get('split.count') === 'number' && kv.get('split.count') > 1;
  const dataBytes = dataEnd === null || split ? null : Math.ceil(pos / align) * align + dataEnd;
  const weightBytes = dataEnd === null || split ? null : tensorBytes - (output && embd ? embd.size - embd.row : 0);
  const arch = kv.get('general.architecture');
  if (arch === 'clip') return visionHeader(kv, pos, dataBytes);
  const num = (k, dflt) => {
    const v = kv.get(`${arch}.${k}`);
    return typeof v === 'number' ? v : v?.max ?? dflt;
  };
  const dim = num('embedding_length', 0);
  const nHeads = num('attention.head_count', 1) || 1;
  const headK = num('attention.key_length', dim / nHeads);
  const nLayers = num('block_count', 0);
  return plausible({
    format: 'gguf', arch, nLayers, dim, hidden: num('feed_forward_length', dim * 4),
    nHeads, nKvHeads: num('attention.head_count_kv', nHeads) || nHeads, headK,
    headV: num('attention.value_length', headK), ctx: num('context_length', 2048),
    vocab: kv.get('tokenizer.ggml.tokens')?.length ?? 32000, headerBytes: pos, dataBytes, weightBytes,
    // RoPE tables' half width, the sliding window (two RoPE sets), whole-sequence passes
    rotHalf: Math.max(num('rope.dimension_count', headK), num('rope.dimension_count_swa', 0)) / 2,
    nSwa: SLIDING.has(arch) ? num('attention.sliding_window', 0) : 0,
    bidirectional: BIDIRECTIONAL.has(arch) || kv.get(`${arch}.attention.causal`) === false,
    mrope: arch === 'qwen2vl', fused: arch === 'phi3', attnGate: arch === 'qwen35',
    ...hybridLayers(arch, nLayers, dim, kv, num),
    ...experts(num),
  });
}

/**
 * A hybrid model's layers (src/model/gguf_hparams.c read_hybrid): {attnLayers, stateBytes} — the
 * layers with a KV cache, and one sequence's recurrent state in bytes (each recurrent layer's
 * conv rows, and Qwen3.5's DeltaNet matrices); Gemma 4 adds kvElems, K and V elements of one
 * position over its layers (they differ by layer). A plain transformer: every layer, no state.
 */
function hybridLayers(arch, nLayers, dim, kv, num) {
  if (arch === 'qwen35') {
    const layers = nLayers - num('nextn_predict_layers', 0);
    const flags = kv.get(`${arch}.attention.recurrent_layers`);
    const interval = num('full_attention_interval', 4) || 4;
    const rec = flags?.nonzero ?? layers - Math.floor(layers / interval);
    const K = num('ssm.conv_kernel', 4), D = num('ssm.state_size', 128);
    const HK = num('ssm.group_count', 16), HV = num('ssm.time_step_rank', 16);
    return { attnLayers: layers - rec, stateBytes: 4 * rec * ((K - 1) * (2 * HK * D + HV * D) + HV * D * D),
      rec: { channels: 2 * HK * D + HV * D, hv: HV, vd: HV * D } };
  }
  if (arch === 'lfm2' || arch === 'lfm2moe') {
    const kvh = kv.get(`${arch}.attention.head_count_kv`);
    const attn = typeof kvh === 'object' ? kvh.nonzero : nLayers;
    return { attnLayers: attn, stateBytes: 4 * (nLayers - attn) * (num('shortconv.l_cache', 3) - 1) * dim,
      rec: attn < nLayers ? { channels: 3 * dim, hv: 0, vd: 0 } : null };
  }
  if (arch === 'gemma4') {
    // Gemma 4: the last shared_kv_layers layers keep no cache; the others hold K and V of their
    // kind's head size (key_length_swa on sliding layers, key_length on full ones). Which of the
    // own layers slide is estimated from the pattern's share of sliding layers.
    const own = nLayers - num('attention.shared_kv_layers', 0);
    const pat = kv.get(`${arch}.attention.sliding_window_pattern`);
    const swa = Math.round(own * (typeof pat === 'object' && pat.length ? pat.nonzero / pat.length : 5 / 6));
    const hd = num('attention.key_length', 256), hdSwa = num('attention.key_length_swa', hd);
    const kvh = num('attention.head_count_kv', 1) || 1;
    return { attnLayers: own, stateBytes: 0, kvElems: 2 * kvh * (swa * hdSwa + (own - swa) * hd),
      headMax: Math.max(hd, hdSwa), ple: num('embedding_length_per_layer_input', 0) };
  }
  return { attnLayers: nLayers, stateBytes: 0 };
}

/** A mixture of experts' shape (gguf_hparams.c read_moe): {nExpert, nExpertUsed, expertFf}, all 0
 *  for a dense model. Its weights are the file's; its scratch is one row per (entry, chosen
 *  expert) (runtime/context.c). */
function experts(num) {
  const nExpert = num('expert_count', 0);
  if (!(nExpert > 1)) return { nExpert: 0, nExpertUsed: 0, expertFf: 0 };
  const nExpertUsed = num('expert_used_count', 1) || 1;
  return { nExpert, nExpertUsed, expertFf: num('expert_feed_forward_length', Math.floor(num('feed_forward_length', 0) / nExpertUsed)) };
}

/**
 * An mmproj's header (general.architecture 'clip', src/vision/mmproj.c load_hparams): {format:
 * 'gguf', arch: 'clip', vision: {projector, imageSize, patchSize, width, ff, layers, heads,
 * scale, longestEdge}, headerBytes, dataBytes}; null when a size is missing or out of the
 * loader's bounds (C then says what is wrong). A text model's fields are absent: modelBytes()
 * counts such a file by its bytes alone.
 */
function visionHeader(kv, headerBytes, dataBytes) {
  const n = (k) => (typeof kv.get(`clip.vision.${k}`) === 'number' ? kv.get(`clip.vision.${k}`) : 0);
  const projector = kv.get('clip.projector_type') ?? kv.get('clip.vision.projector_type');
  const v = { projector: typeof projector === 'string' ? projector : null, imageSize: n('image_size'), patchSize: n('patch_size'),
    width: n('embedding_length'), ff: n('feed_forward_length'), layers: n('block_count'), heads: n('attention.head_count'),
    scale: n('projector.scale_factor') || n('spatial_merge_size') ||
      (projector === 'gemma3' ? 4 : projector === 'lfm2' || projector === 'qwen2.5vl_merger' ? 2 : 1),
    longestEdge: n('preproc_image_size') };
  const ok = (x, lo, hi) => Number.isInteger(x) && x >= lo && x <= hi;
  if (!(ok(v.imageSize, 1, 4096) && ok(v.patchSize, 1, 4096) && ok(v.width, 1, 16384) && ok(v.ff, 1, 16384) &&
    ok(v.layers, 1, 256) && ok(v.heads, 1, 16384) && ok(v.scale, 1, 64) && ok(v.longestEdge, 0, 16 * 4096))) return null;
  return { format: 'gguf', arch: 'clip', vision: v, headerBytes, dataBytes };
}

/** Image rows that see each other both ways (mmproj.c's non_causal rows: Gemma 3's) pass
 *  together, so the text context's pass buffers grow to hold one image's rows (context.c
 *  wlm_eval_embd_grid); the other projectors' rows are causal and pass in chunks. */
const NON_CAUSAL_PROJECTORS = new Set(['gemma3']);

/** The bytes of a decoded image the encoder's estimate allows for (a 4096 × 4096 RGB image,
 *  copied into the heap and resampled once): a larger one needs its own room. */
export const VISION_IMAGE_ALLOWANCE = 2 * 3 * 4096 * 4096;

/**
 * What an mmproj adds to a model's wasm memory, in bytes: {weights: its file (its matrices are
 * read in place), scratch, total, nonCausalRows}. `nonCausalRows`: one image's rows when they
 * see each other both ways (Gemma 3: (S/P)² / s², 256), else 0 — modelBytes() grows the text
 * context's pass buffers by them. `scratch` mirrors src/vision/: the loader's float copies (the
 * learned positions, Gemma 3's transposed projection: at most 4 bytes an element), one
 * piece's encoder activations (encoder.c wlm_vision_encode_piece: x, h, q, k, v and the resized
 * positions, N·W floats each; the widest rows N·max(F, 3P², W) floats and as much again for
 * their quantized copy; each thread's attention scratch, heads·(N + 2·head size) floats), the
 * pieces' pixels and the image's rows (image.c: every tile's 3·side² floats, tokens·textDim
 * floats; Qwen2.5-VL's MLP up rows N·F and its projector's reordering copy), the encoded images the engine keeps (8 of them, js/engine/engine.js IMAGE_CACHE) and
 * VISION_IMAGE_ALLOWANCE for the decoded image. N is the largest piece's patches: (S/P)² (Gemma 3,
 * Idefics3), LFM2-VL's up to 256 tokens of s² patches, its 512-pixel tiles'. `h`: readModelHeader's
 * of the mmproj (null: only the file and 64 MB). `textDim`: the text model's width (the rows'
 * width; 0: the encoder's).
 */
export function visionBytes(fileBytes, h, { threads = 1, textDim = 0 } = {}) {
  const v = h?.vision;
  if (!v) return { weights: fileBytes, scratch: 64 << 20, total: fileBytes + (64 << 20) };
  const { imageSize: S, patchSize: P, width: W, ff: F, heads, scale: s } = v;
  const N0 = (S / P) ** 2;
  // the largest piece: LFM2's dynamic pieces (≤ 256 tokens of s² patches, 512-pixel tiles),
  // Qwen2.5-VL's (≤ 4096 tokens of s² patches; its SwiGLU keeps a second N·F row set)
  const lfm2 = v.projector === 'lfm2', qwen = v.projector === 'qwen2.5vl_merger';
  const N = Math.max(N0, lfm2 ? Math.max(256 * s * s, (512 / P) ** 2) : 0, qwen ? 4096 * s * s : 0);
  const D = textDim || W;
  const widest = Math.max(F, 3 * P * P, W);
  const hd = W / heads;
  const encoder = 4 * (6 * N * W + 2 * N * widest + Math.max(1, threads) * heads * (N + 2 * hd) +
    (qwen ? N * F + N / (s * s) * D : 0));
  // pieces and tokens of the largest image: Idefics3's grid of ceil(L/S)² tiles + overview,
  // LFM2's 10 tiles + thumbnail, else one
  const grid = v.longestEdge ? Math.ceil(v.longestEdge / S) ** 2 : lfm2 ? 10 : 0;
  const side = lfm2 ? Math.max(S, 512) : S;
  const tokens = (grid + 1) * Math.ceil(N / (s * s));
  const image = 4 * ((grid + 1) * 3 * side * side + tokens * D);
  const loader = 4 * N0 * W + (v.projector === 'gemma3' ? 4 * W * D : 0); // positions; Gemma's projection transposed
  const scratch = loader + encoder + image + 8 * 4 * tokens * D + VISION_IMAGE_ALLOWANCE + (8 << 20);
  // one image's rows when they pass together (modelBytes grows the text context's pass by them)
  const nonCausalRows = NON_CAUSAL_PROJECTORS.has(v.projector) ? N0 / (s * s) : 0;
  return { weights: fileBytes, scratch, total: fileBytes + scratch, nonCausalRows };
}

/** ggml types' [elements, bytes] per block (ggml.c's type traits), the types our kernels read
 *  and the plain ones: enough to size a file from its tensor directory. */
const BLOCKS = {
  0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34],
  10: [256, 84], 11: [256, 110], 12: [256, 144], 13: [256, 176], 14: [256, 210], 24: [1, 1],
  25: [1, 2], 26: [1, 4], 27: [1, 8], 28: [1, 8], 30: [1, 2],
};

/** `h`, or null when a number is out of any model's range (the file is then sized by its
 *  bytes alone, and C reports what is wrong with it). */
function plausible(h) {
  const ok = (v, max) => Number.isFinite(v) && v >= 0 && v <= max;
  const opt = (v, max) => v === undefined || v === null || ok(v, max);
  return ok(h.nLayers, 4096) && ok(h.dim, 1 << 17) && ok(h.hidden, 1 << 20) && ok(h.nHeads, 4096) &&
    ok(h.nKvHeads, 4096) && ok(h.headK, 1 << 14) && ok(h.headV, 1 << 14) && ok(h.ctx, 1 << 24) &&
    ok(h.vocab, 1 << 22) && opt(h.rotHalf, 1 << 14) && opt(h.nSwa, 1 << 24) && opt(h.headMax, 1 << 14) &&
    opt(h.ple, 1 << 17) && opt(h.stateBytes, 2 ** 40) && opt(h.rec?.channels, 1 << 20) && opt(h.rec?.vd, 1 << 20) &&
    opt(h.rec?.hv, 1 << 14) && opt(h.nExpert, 1 << 14) && opt(h.nExpertUsed, 1 << 14) && opt(h.expertFf, 1 << 20) &&
    opt(h.kvElems, 2 ** 32) && opt(h.weightBytes, 2 ** 50) ? h : null;
}

/**
 * The header of a model source as readModelHeader() returns it, reading the first bytes
 * through `peek(n)` (resolves to at least the first n bytes, or fewer at the end of the file),
 * with more asked for while the header continues (64 KiB, then 4x, at most 256 MB); null when the format is
 * not recognised.
 */
export async function peekModelHeader(peek) {
  // 64 KiB first: a llama2.c header is 28 bytes, a GGUF one with a large vocabulary a few MB; a
  // download is peeked from its first chunks, which are then copied in with the rest
  for (let n = 64 << 10; ; n *= 4) {
    const bytes = await peek(n);
    try {
      return readModelHeader(bytes);
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      if (bytes.byteLength < n || n >= 256 << 20) return null; // a truncated file: C says why
    }
  }
}

/** Speculative decoding's largest draft (WLM_MAX_DRAFT, src/wasmlm.h; js/engine/speculative.js). */
export const MAX_DRAFT = 32;
/** context.c's rule (model.h WLM_ROLL_MAX_BYTES, WLM_ROLL_WEIGHT_RATIO): a verification keeps a
 *  copy of the recurrent state per verified position while the copies take at most 256 MiB and
 *  at most half the weight bytes, else it snapshots the round's start and replays. */
export const ROLL_MAX_BYTES = 256 * 2 ** 20;
export const ROLL_WEIGHT_RATIO = 2;

/**
 * The recurrent states a hybrid's CPU context (qwen35, lfm2, lfm2moe) can come to allocate, in
 * bytes, for `nSeqMax` sequences: {stateBytes (one state), states, snapshots, rollCopies, roll,
 * total}. Mirrors src/runtime/context.c, where each is malloc'd on first use and kept until the
 * context is freed: every sequence's state and its snapshot at the prompt's end (WLM_SNAP_PROMPT:
 * generate.c after a single sequence's prompt, vision/sequence.c after each sequence's media
 * piece); sequence 0's chat checkpoint (WLM_SNAP_CHECKPOINT, GenerateParams.stateCheckpoint);
 * the speculative rollback's copies, one per drafted token (wlm_state_roll_begin: a verification
 * of n entries keeps n - 1), chosen while they fit the rule above — the most that do, over
 * every draft length the API allows (1..MAX_DRAFT): `rollCopies` — and the snapshot of a
 * round's start (WLM_SNAP_SPEC) a longer draft takes instead (only when rollCopies < MAX_DRAFT).
 * This is the worst case the API allows, not what one generation takes: a draft length is a
 * generation's parameter, unknown at load. `weightBytes`: the model's (readModelHeader's
 * weightBytes, gguf_weights.c's weight_bytes). 0 everywhere for a model without a state.
 */
export function recurrentBytes(h, { nSeqMax = 1, weightBytes = 0 } = {}) {
  const S = h?.stateBytes ?? 0;
  if (!(S > 0)) return { stateBytes: 0, states: 0, snapshots: 0, rollCopies: 0, roll: 0, total: 0 };
  const seqs = Math.max(1, nSeqMax);
  const rollCopies = Math.min(MAX_DRAFT, Math.floor(ROLL_MAX_BYTES / S), Math.floor(weightBytes / (ROLL_WEIGHT_RATIO * S)));
  const states = seqs * S;
  const snapshots = (seqs + 1 + (rollCopies < MAX_DRAFT ? 1 : 0)) * S;
  const roll = rollCopies * S;
  return { stateBytes: S, states, snapshots, rollCopies, roll, total: states + snapshots + roll };
}

/**
 * The bytes of one pass's buffers for B entries (src/runtime/context.c pass_buffers): the
 * activations x, xb, xb2, hb, hb2, q (Phi-3's fused qkv; Qwen3.5's gated attention's query and
 * gate rows; a hybrid's recurrent projections rs_in, rs_z, rs_ba, rs_o; Gemma 4's per-layer
 * inputs), kt, vt, the quantized rows (widest input + 256 floats, 16-byte aligned), a mixture of
 * experts' rows per (entry, chosen expert), the RoPE rows of each set, the block pointers a pass
 * reaches (4-byte: wasm32's) and the entries' sequence, position (and M-RoPE) numbers. `nCtx`:
 * the context's length.
 */
export function passBytes(h, B, nCtx) {
  const dim = h.dim, hid = h.hidden, head = h.headMax ?? h.headK;
  const qd = h.nHeads * head, kvd = h.nKvHeads * head, xs = Math.max(qd, dim);
  const hs = h.fused ? 2 * hid : hid;
  const rec = h.rec ?? null, vd = rec?.vd ?? 0;
  const ff = h.expertFf ?? 0;
  const widest = Math.max(hid, dim, qd, vd, ff);
  const sets = h.nSwa > 0 ? 2 : 1;
  const half = h.rotHalf ?? head / 2;
  const n = (v) => Math.max(1, v); // alloc_n's least element
  let floats = B * (2 * dim + xs + hs + hid + qd + 2 * kvd) + 2 * n(sets * B * half);
  if (h.fused) floats += B * (qd + 2 * kvd);
  if (h.attnGate) floats += B * 3 * qd;
  if (rec) floats += n(B * rec.channels) + n(B * vd) + n(B * 2 * rec.hv) + B * Math.max(vd, dim);
  if (h.ple) floats += B * h.ple * h.nLayers + Math.max(B * h.ple, h.ple * h.nLayers);
  const xqStride = Math.ceil(((widest + 256) * 4) / 16) * 16;
  let bytes = 4 * floats + B * xqStride + 4 * 2 * B + (h.mrope ? 4 * 3 * B : 0);
  if (h.nExpert > 1) {
    const R = B * h.nExpertUsed;
    bytes += 4 * (B * h.nExpert + 3 * R + h.nExpert + 1 + R * (2 * dim + 2 * ff)) + 2 * R * xqStride;
  }
  const blocks = Math.ceil(nCtx / 16);
  const win = h.bidirectional ? h.nSwa + 1 : h.nSwa + B - 1;
  const kbCap = sets > 1 && win > blocks ? Math.min(win, nCtx) : blocks;
  return bytes + 2 * 4 * kbCap;
}

/**
 * What loading a model of `fileBytes` with header `h` will take in wasm memory, in bytes:
 * {weights, kv, state, scratch, imagePass, logitRows, grows, other, shared, vision, total}. Mirrors
 * wlm_context_new (src/runtime/context.c) and what the context allocates later, at most, as
 * the API lets it run (the worst case: a generation's parameters are not known at load):
 * - kv: the KV cache of one full sequence of nCtx positions (0: the model's context length) in
 *   kvType (the attention layers' only), and a hybrid's recurrent states, their snapshots and
 *   the speculative rollback's copies (recurrentBytes(): `state`, allocated on first use);
 * - scratch: one pass's buffers (passBytes()) for WLM_BATCH_CHUNK (64) entries
 *   (WLM_BATCH_CHUNK_MOE, 128, with experts; nCtx for a bidirectional model), grown to one
 *   image's rows when the mmproj's rows pass together (`imagePass`, the growth: Gemma 3's 256
 *   rows, 33 MB for Gemma 3 4B); the attention scratch, the RoPE frequencies; `logitRows` rows
 *   of logits (a speculative verification's MAX_DRAFT + 1, or a batch's one per sequence:
 *   context.c run_entries grows them and keeps them); per sequence its tokens, block table and
 *   records;
 * - other: the vocabulary's tables, the module's stack and data, the helper threads' stacks and
 *   scratch (`threads`), and speculative decoding's per-vocabulary rows (speculative.c grow:
 *   MAX_DRAFT + 2 of them, outside the context's count); `shared`: the part of other that is
 *   not the model's own tables (all but them), which a draft model beside it does not add
 *   again (draftBytes());
 * - vision: the mmproj's (visionBytes(): its file and its encoder's scratch; 0 without one).
 * `grows`: the part of kv + scratch allocated after load (state, imagePass, the logits rows past
 * the first): ModelInfo.contextBytes is kv + scratch - grows, and kvStats().contextBytes reaches
 * kv + scratch once a context has run all of it (kvStats().stateBytesAllocated then is state).
 * Without a header (h null) only the file is counted.
 */
export function modelBytes(fileBytes, h, { nCtx = 0, kvType = 'f16', nSeqMax = 1, threads = 1, vision = null } = {}) {
  const weights = fileBytes;
  const vis = vision ? vision.total : 0;
  if (!h || h.arch === 'clip') {
    return { weights, kv: 0, state: 0, scratch: 0, imagePass: 0, logitRows: 0, grows: 0, other: 32 << 20, shared: 24 << 20,
      vision: vis, total: weights + (32 << 20) + vis };
  }
  const ctx = nCtx || h.ctx;
  const elem = kvType === 'f32' || h.bidirectional ? 4 : 2; // (an encoder's K and V are F32)
  const seqs = Math.max(1, nSeqMax);
  const kvElems = h.kvElems ?? (h.attnLayers ?? h.nLayers) * h.nKvHeads * (h.headK + h.headV); // per position
  const state = recurrentBytes(h, { nSeqMax: seqs, weightBytes: h.weightBytes ?? fileBytes }).total;
  const kv = Math.ceil(ctx / 16) * 16 * kvElems * elem + state;
  const chunk = h.nExpert > 1 ? 128 : 64; // WLM_BATCH_CHUNK_MOE with experts, else WLM_BATCH_CHUNK
  const B = h.bidirectional && ctx > chunk ? ctx : chunk;
  const pass = passBytes(h, B, ctx);
  const rows = vision?.nonCausalRows ?? 0;
  const imagePass = rows > B ? passBytes(h, rows, ctx) - pass : 0;
  const head = h.headMax ?? h.headK;
  const logitRows = Math.max(MAX_DRAFT + 1, seqs);
  // the attention scratch, the RoPE frequencies, the logits rows and one entry's row number;
  // per sequence its tokens, block table (M-RoPE: its rows' positions) and its records
  const floats = h.nHeads * (ctx + 2 * head) + (h.nSwa > 0 ? 2 : 1) * (h.rotHalf ?? head / 2) + logitRows * h.vocab + 1;
  const scratch = pass + imagePass + 4 * floats +
    seqs * (4 * ctx * (h.mrope ? 2 : 1) + 4 * Math.ceil(ctx / 16) + SEQ_RECORD_BYTES);
  const grows = state + imagePass + 4 * (logitRows - 1) * h.vocab;
  // the module's and its threads' (once per module), speculative decoding's rows (in the
  // model's context); then the model's own tables
  const shared = (24 << 20) + threads * ((1 << 20) + 4 * h.nHeads * (ctx + 2 * head)) + 4 * (MAX_DRAFT + 2) * h.vocab;
  const other = shared + 64 * h.vocab + h.headerBytes;
  return { weights, kv, state, scratch, imagePass, logitRows, grows, other, shared, vision: vis,
    total: weights + kv + scratch + other + vis };
}

/**
 * What speculative decoding's draft model (Engine.loadDraft) adds to the wasm memory the model
 * already holds, in bytes: modelBytes() for one sequence of `nCtx` positions in `kvType` (the
 * model's), less its `shared` part, which the model's estimate counts once for the module (its
 * stack and data, the helper threads, speculative decoding's rows in the model's context):
 * {weights, kv, state, scratch, imagePass, logitRows, grows, other (the draft's own tables),
 * shared: 0, vision: 0, total}. src/runtime/speculative.c runs the draft in a context of its
 * own (nSeqMax 1), which allocates what a model's does (wlm_context_new): at load
 * DraftInfo.contextBytes is kv + scratch - grows.
 */
export function draftBytes(fileBytes, h, { nCtx = 0, kvType = 'f16' } = {}) {
  const need = modelBytes(fileBytes, h, { nCtx, kvType, nSeqMax: 1, threads: 0 });
  const shared = need.shared ?? 0;
  return { ...need, other: need.other - shared, shared: 0, total: need.total - shared };
}
/** sizeof(wlm_seq) + sizeof(wlm_generation) in wasm32 (src/model/model.h; measured: a second
 *  sequence's context less its tokens and block table). */
const SEQ_RECORD_BYTES = 1916;

const gb = (b) => `${(b / 1e9).toFixed(2)} GB`;

/** "4.06 GB of weights + 0.81 GB KV cache (nCtx 4096) + 0.05 GB scratch": the parts of a
 *  modelBytes() result, for messages (a hybrid's recurrent states after its KV cache). */
export function describeBytes(need, nCtx) {
  const state = need.state ?? 0;
  return `${gb(need.weights)} of weights + ${gb(need.kv - state)} KV cache${nCtx ? ` (nCtx ${nCtx})` : ''} + ` +
    (state ? `${gb(state)} recurrent states (with their snapshots and speculative copies) + ` : '') +
    `${gb(need.scratch + need.other)} scratch${need.vision ? ` + ${gb(need.vision)} mmproj (its file and its encoder's scratch)` : ''}`;
}

/** "the model" / "the model a.gguf with its mmproj b.gguf" for messages; names: {model, mmproj}. */
function modelWords(names) {
  if (!names?.mmproj) return names?.model ? `the model ${names.model}` : 'the model';
  return `the model ${names.model ?? ''}${names.model ? ' ' : ''}with its mmproj ${names.mmproj}`;
}

/**
 * Which module a model needs: {memory64: bool, error: WasmlmError | null}. `option` is
 * EngineOptions.memory64 ('auto' | true | false). 'auto': wasm32 while `need.total` fits
 * WASM32_FIT of 4 GB, else memory64 where the runtime has it, else an error naming the sizes;
 * true / false: that one (a model that does not fit fails in C, with its sizes). Past 16 GiB
 * nothing fits: an error. `support`: memory64Support() (the tests pass another). `names`:
 * {model, mmproj}, the files the errors name (optional).
 */
export function chooseMemory(need, option, nCtx, support = memory64Support(), names = null) {
  const what = describeBytes(need, nCtx);
  if (option === false) return { memory64: false, error: null }; // wasm32 whatever it needs: C says
  if (need.total > WASM64_BYTES * WASM32_FIT) {
    return { memory64: true, error: jsError('WLM_ERR_NOMEM',
      `${modelWords(names)} needs ${gb(need.total)} of wasm memory (${what}): more than the 16 GiB a memory64 ` +
      'module can have here; a smaller nCtx or a smaller quantization may fit') };
  }
  if (option === true) return { memory64: true, error: null };
  if (need.total <= WASM32_BYTES * WASM32_FIT) return { memory64: false, error: null };
  if (support.ok) return { memory64: true, error: null };
  if (need.total <= WASM32_BYTES) return { memory64: false, error: null }; // may still fit: C decides
  return { memory64: false, error: jsError('WLM_ERR_NOMEM',
    `${modelWords(names)} (${gb(need.weights)} of weights${need.vision ? ` + ${gb(need.vision)} mmproj` : ''}) is too large for the 4 GB wasm32 memory with ` +
    `${nCtx ? `nCtx ${nCtx}` : 'its context length'}: it needs ${gb(need.total)} (${what}), and ` +
    `${support.why}; a smaller nCtx or a smaller quantization may fit`) };
}

/**
 * chooseMemory for backend 'auto' and a GGUF whose weights could stream to the GPU: `need` as on
 * the CPU, `onGpu` the same without the weights and the KV cache (they then live on the GPU).
 * When the CPU needs more than wasm32 (the memory64 module, or an error where the runtime has
 * none) but `onGpu` fits wasm32, and `wouldUseGpu()` (async: whether 'auto' takes this runtime's
 * GPU, js/backend/select.js autoWouldUseGpu) says yes, wasm32 is kept for the GPU: {memory64:
 * false, error: null, gpuFirst: true}. Otherwise chooseMemory(need, ...) with gpuFirst false;
 * the GPU is not asked when the CPU fits wasm32, or for an `option` other than 'auto'.
 */
export async function chooseMemoryForAuto(need, onGpu, option, nCtx, wouldUseGpu, support = memory64Support(), names = null) {
  const cpu = chooseMemory(need, option, nCtx, support, names);
  if (option !== 'auto' || !(cpu.memory64 || cpu.error)) return { ...cpu, gpuFirst: false };
  const gpu = chooseMemory(onGpu, option, nCtx, support, names);
  if (gpu.memory64 || gpu.error || !(await wouldUseGpu())) return { ...cpu, gpuFirst: false };
  return { memory64: false, error: null, gpuFirst: true };
}

/**
 * For a memory64 module: the bytes of heap to keep below the weights (js/models/source.js allocates
 * that much, then the weights' buffer after it, then frees the first block, which the model's
 * and the context's allocations then come from). Everything but the weights, with room to
 * spare, when that fits below 4 GB; else everything but the weights and the KV cache: the KV
 * cache (one calloc, never seen by JS) then lands above the weights, and only the scratch,
 * the vocabulary and JS's own small blocks stay below.
 */
export function lowHeapBytes(need, heapTop) {
  const small = Math.ceil((need.scratch + need.other + (need.vision ?? 0)) * 1.25) + (64 << 20);
  const all = small + Math.ceil(need.kv * 1.05);
  const room = WASM32_BYTES - (64 << 20) - heapTop;
  return Math.max(0, all <= room ? all : Math.min(small, room));
}

/** Whether a block of n bytes malloc'd now lies wholly below 4 GB (freed at once). May grow a
 *  memory64 module's memory by up to n bytes (a block that only fits at the heap's top). */
function lowBlockFits(x, n) {
  const p = x.mallocHigh(n);
  const ok = p > 0 && p + n <= WASM32_BYTES;
  if (p) x.wlmjs_free(p);
  return ok;
}

/**
 * Whether speculative decoding's draft model fits beside the loaded model, decided before a
 * byte of it is read (Engine.loadDraft): the module cannot change while a model is loaded.
 * `x`: the module's exports (memory64 ones: wrapExports64's); `model`: the loaded model's
 * modelBytes() at load (its worst case, which counts no draft: LoadOptions has none), or null
 * when unknown (then the memory in use); `draft`: draftBytes(); `nCtx`: the draft's context
 * length, `name`: its file, for the message. Returns the `lowBytes` to read the draft with
 * (js/models/source.js readIntoHeap: 0 in wasm32). Throws WasmlmError WLM_ERR_NOMEM naming what
 * the draft needs and what is left:
 * - wasm32: the draft's total against WASM32_FIT of 4 GB less the model's estimate;
 * - memory64: its total against WASM32_FIT of 16 GiB less the model's; and its scratch and
 *   tables (what JS reads, and what C allocates before the KV cache; a quarter and 4 MiB more,
 *   as room to spare) against the heap below 4 GB: a block that size must lie wholly below
 *   4 GB now (one malloc and free; when it does not, a dozen more find the largest that does,
 *   for the message). That block is kept while the draft's weights are read, so the weights go
 *   above it — past 4 GB where they must, as the model's — and its scratch and tables below.
 *   Its KV cache, which JS never sees, lands wherever it fits: below 4 GB it shares what the
 *   model's context allocates later (lowHeapBytes' room to spare).
 */
export function fitDraft(x, model, draft, nCtx, name) {
  const what = `the draft model${name ? ` ${name}` : ''} needs ${gb(draft.total)} of wasm memory (${describeBytes(draft, nCtx)})`;
  const noSwitch = 'the module cannot change while the model is loaded (load() chose it for the model alone)';
  const limit = (x.memory64 ? WASM64_BYTES : WASM32_BYTES) * WASM32_FIT;
  const used = model ? model.total : x.memory.buffer.byteLength;
  const left = Math.max(0, limit - used);
  if (draft.total > left) {
    throw jsError('WLM_ERR_NOMEM', `loadDraft(): ${what}, and ${gb(left)} is left: ` +
      `the model takes up to ${gb(used)}${model ? ' (its estimate at load)' : ''} of the ` +
      (x.memory64 ? "memory64 module's 16 GiB" : "wasm32 module's 4 GB") +
      `, of which ${Math.round(WASM32_FIT * 100)} % is usable; ${noSwitch}. A smaller draft or nCtx for it may fit` +
      (x.memory64 ? '' : ', or an engine made with memory64: true (createEngine)'));
  }
  if (!x.memory64) return 0;
  const low = Math.ceil((draft.scratch + draft.other) * 1.25) + (4 << 20);
  if (lowBlockFits(x, low)) return low;
  let lo = 0, hi = Math.floor(low / 2 ** 20); // MiB: the largest block that fits, for the message
  while (lo + 1 < hi) {
    const mid = (lo + hi) >> 1;
    if (lowBlockFits(x, mid * 2 ** 20)) lo = mid; else hi = mid;
  }
  throw jsError('WLM_ERR_NOMEM', `loadDraft(): ${what}; its scratch and tables, which must lie below ` +
    `4 GB in the memory64 module, need a block of ${gb(low)} there (with room to spare), and ` +
    `the largest free block below 4 GB, beside the model's, is ${gb(lo * 2 ** 20)}; ${noSwitch}. A smaller nCtx for the draft, or ` +
    'for the model, may fit');
}
