// forward.js — the transformer on the GPU: one forward pass for every architecture row of
// src/model/arch.c, read from the model's description (wlmjs_model_describe), in the order of
// src/model/forward.c: embedding (+ learned position, × scale) → per layer: norm → Q/K/V
// (fused or not, + biases) → per-head Q/K norms → RoPE (set 1 on sliding-window layers) and
// K/V into the layer's cache, in one dispatch → Q scale → attention (window on window layers) →
// output projection (+ bias) → post-norm → residual → norm → feed-forward (SwiGLU / GeGLU / GELU
// MLP) → post-norm → residual; then the final norm, the classifier and the soft-cap for the
// entries that want logits; a hybrid's recurrent layers (mixer 'deltanet' / 'shortconv', the
// kernels of wgsl_recurrent.js on each sequence's state in cache.state) and gated attention
// (attn_q's per-head query and gate rows) in recurrent.c's / forward.c's order. Each layer's
// head size, KV heads, widths and KV sharing are its own (per_layer.js layerShape: Gemma 4's
// differ by layer; a KV-shared layer computes only Q and attends to its source's cache), and
// Gemma 4's per-layer embeddings and output scale are steps of the same pass (pleSpecs; the
// table's rows of each chunk's tokens gathered on the host, pleHostTable, and written with the
// step's tokens). A
// mixture of experts is a feed-forward kind of the same pass (moe: router, route, the chosen
// experts' products read by id, their weighted sum; wgsl_moe.js; Gemma 4's beside the dense
// feed-forward, each branch post-normed, the router on the scaled stream), gpt-oss's sinks a
// step after attention.
// A batch runs in chunks of up to `chunk` entries, each one compute pass whose bind
// groups were built once (the entry count is the grid's z); a weight product runs the
// matrix-vector kernel for one entry (decode), its batch form for a few, and the tiled
// matrix-matrix kernel (wgsl_matmat.js) from MATMAT_MIN_ENT entries (prefill). The KV cache
// (kv_cache.js: a block of rows per sequence in one buffer per layer; its context shifts and
// forks) is read and written at each entry's sequence and position. It does not sample: the logits go back to the wasm engine
// (js/backend/webgpu/backend.js).

import { jsError } from '../../runtime/errors.js';
import { ATT_HEAD, attentionCombineWgsl, attentionSplit, attentionWgsl, embedWgsl, eltwiseWgsl, kvShiftWgsl, kvStoreWgsl, matvecThreadsPerRow, matvecWgsl, MAX_HEAD, NONE, mropeCosSin, normWgsl, ropeCosSin, ropeWgsl, WG } from './wgsl_ops.js';
import { MATMAT_MIN_ENT, matmatWgsl, TILE } from './wgsl_matmat.js';
import { checkFits, USAGE } from './weights.js';
import { GpuKvCache } from './kv_cache.js';
import { GPU_TYPES } from './wgsl_quant.js';
import { convWgsl, deltanetWgsl, l2normWgsl, sigmoidGateWgsl, ssmGatesWgsl } from './wgsl_recurrent.js';
import { layerShape, pleSizes, pleSpecs, ropeHalf, ropeSetRot } from './per_layer.js';
import { moeActWgsl, moeGroupWgsl, moeMatmatWgsl, moeMatvecWgsl, moeRouteWgsl, moeSumWgsl, sinksWgsl } from './wgsl_moe.js';

const PARAM_SLOT = 256; // bytes between parameter blocks (minUniformBufferOffsetAlignment)
/** A layer's bias entry as a list of vectors: none, one, or joined Q/K/V biases (fuseMatrices). */
const vecList = (v) => (!v ? [] : Array.isArray(v[0]) ? v : [v]);
const BIASES = ['bqkv', 'bq', 'bk', 'bv', 'bo', 'b_up', 'b_down']; // a layer's, added by matvec
const MATMAT_ENT = 4;   // entries per workgroup of the batch matvec (small batches)
const ATT_MAX_SPLITS = 32; // attention: the most splits of the cache (each ≥ WG positions)

/**
 * EngineOptions key for a diagnostic, not part of the public API: a Map that, when given, makes
 * every forward pass run each kernel in a compute pass of its own with GPU timestamps (the
 * adapter's timestamp-query feature, requested for it; Dawn quantizes them unless created with
 * 'disable-dawn-features=timestamp_quantization', as bench/webgpu.mjs --profile does), adding
 * each kernel's GPU time to the map under its kind (`matvec Q4_K`, `attention`, `eltwise add`, …)
 * as {ms, n}, and the gaps between one kernel's end and the next one's start under
 * '(between kernels)'. The logits are the plain pass's, bit for bit.
 */
export const GPU_PROFILE = Symbol.for('wasmlm.gpuProfile');

/** A float's bits as u32, for the parameter words. */
const fbits = (() => {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  return (v) => { f[0] = v; return u[0]; };
})();

/** Compiles WGSL into a compute pipeline; compilation errors become one WasmlmError. */
export async function makePipeline(device, code, label) {
  const module = device.createShaderModule({ label, code });
  device.pushErrorScope('validation');
  const pipeline = device.createComputePipeline({ label, layout: 'auto', compute: { module, entryPoint: 'main' } });
  const err = await device.popErrorScope();
  if (err) {
    const info = await module.getCompilationInfo?.();
    const msgs = info ? info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`) : [];
    throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: the ${label} kernel did not compile: ${msgs.join('; ') || err.message}`);
  }
  return pipeline;
}

/** Pipelines by key, compiled once per device. */
export class Pipelines {
  #device;
  #subgroups;
  #cache = new Map();
  constructor(device, { subgroups = false } = {}) {
    this.#device = device;
    this.#subgroups = subgroups;
  }
  async get(kind, arg) {
    const key = `${kind}:${arg}`;
    let p = this.#cache.get(key);
    if (!p) {
      const code = kind === 'matvec' ? matvecWgsl(arg[0], { subgroups: this.#subgroups, tpr: arg[1], ent: arg[2], glu: arg[3] === 'glu' })
        : kind === 'matmat' ? matmatWgsl(arg)
        : kind === 'embed' ? embedWgsl(arg)
          : kind === 'norm' ? normWgsl()
            : kind === 'rope' ? ropeWgsl(arg || null)
              : kind === 'kv_store' ? kvStoreWgsl(arg)
                : kind === 'kv_shift' ? kvShiftWgsl(arg)
                : kind === 'attention' ? attentionWgsl(...[arg].flat()) // [f16, max head] for the wide form
                  : kind === 'attn_combine' ? attentionCombineWgsl()
                  : kind === 'conv' ? convWgsl()
                  : kind === 'l2norm' ? l2normWgsl()
                  : kind === 'ssm_gates' ? ssmGatesWgsl()
                  : kind === 'deltanet' ? deltanetWgsl()
                  : kind === 'sigmoid_gate' ? sigmoidGateWgsl()
                  : kind === 'moe_route' ? moeRouteWgsl()
                  : kind === 'moe_matvec' ? moeMatvecWgsl(arg[0], { tpr: arg[1] })
                  : kind === 'moe_group' ? moeGroupWgsl()
                  : kind === 'moe_matmat' ? moeMatmatWgsl(arg)
                  : kind === 'moe_act' ? moeActWgsl()
                  : kind === 'moe_sum' ? moeSumWgsl()
                  : kind === 'sinks' ? sinksWgsl()
                  : eltwiseWgsl(arg);
      p = makePipeline(this.#device, code, key);
      this.#cache.set(key, p);
    }
    return p;
  }
}

/**
 * The forward pass of one model on one device. Create with GpuForward.create(); run() a batch.
 */
export class GpuForward {
  device;
  desc;
  chunk;         // entries per compute pass
  #ownBytes = 0; // GPU bytes of the activations, step and parameter buffers
  #w;            // uploadWeights() result
  #kvF16;
  #nCtx;
  #act;          // the activation buffer
  #step;         // u32: tokens [0, chunk) (NONE: an image row), positions [chunk, 2 chunk),
                 // wanted entries [2 chunk, 3 chunk), then the entry count and the wanted count
                 // (matvec's batch form), then the attention splits of the pass; from 3 chunk + 4
                 // the entries' sequences; from 4 chunk + 4 the end of each entry's non-causal
                 // image (0: causal)
  cache = null;  // GpuKvCache (kv_cache.js)
  #params;
  #ops = [];     // {pipeline, bind, grid(n, m, ns, mm) → [x, y, z] | null, kind}
  #profile = null; // GPU_PROFILE's Map, or null
  #attSplits = 1;  // the most splits of an entry's cached positions (attentionSplit)
  #off;          // activation offsets (floats)
  #ropeFreq;     // Float32Array (n_sets × the context's rope_half: per_layer.js ropeHalf)
  #ropeSets;
  #ropeSections; // M-RoPE (qwen2vl): rope.dimension_sections (4 widths in pairs), else null
  #csStride;     // floats of one entry's cos/sin of one RoPE set: the widest set's n_rot
  #mscale;
  #staging = null;
  #destroyed = false;
  #nSeq = 1;           // sequences the cache holds
  #maxWant;            // the most entries of one chunk that want logits (their rows in A)
  #ownCache = true;    // false: the cache is another pass's (a wide pass's, #widePass)
  #opts;               // create()'s options (a wide pass is made with them)
  #pipelines = null;
  #wide = null;        // the pass of more entries an image's non-causal rows run in, or null
  #pleTable = null;    // Gemma 4's per-layer embedding table on the host (per_layer.js pleHostTable)
  #groupExperts = true; // a prefill chunk's experts grouped by expert (moe_group, moe_matmat)

  /** GPU bytes held: activations, parameters and the KV cache (weights not included), and a
   *  wide pass's activations (#widePass). */
  get bytes() { return this.#ownBytes + (this.#ownCache ? this.cache?.bytes ?? 0 : 0) + (this.#wide?.bytes ?? 0); }

  static async create(device, desc, weights, opts) {
    const f = new GpuForward(device, desc, weights, opts);
    await f.#build(opts.pipelines);
    return f;
  }

  /** `recordAhead` false: every step's commands recorded when it runs (#encodeAhead; tests).
   *  `pleTable`: pleHostTable() of the model's per-layer embedding table (Gemma 4; required
   *  when the model has one, owned by the caller). `groupExperts` false: a mixture of experts
   *  runs per (entry, slot) (moe_matvec) at every entry count, the dense products unchanged
   *  (tests: the grouped form against it). `cache` (a wide pass, #widePass): another pass's KV
   *  cache, shared and not destroyed; `maxWant`: logits rows for fewer entries than a chunk. */
  constructor(device, desc, weights, opts) {
    const { kvF16, nCtx, nSeq = 1, ropeFreq, ropeSets, ropeSections = null, mscale, chunk = 32, profile = null, recordAhead = true, pleTable = null, groupExperts = true, cache = null, maxWant = 0 } = opts;
    this.#groupExperts = groupExperts;
    if (desc.hp.n_ple && !pleTable) throw jsError('WLM_ERR_STATE', 'internal: a model with per-layer embeddings needs its host table (pleTable)');
    this.#pleTable = desc.hp.n_ple ? pleTable : null;
    this.#opts = opts;
    this.#nSeq = nSeq;
    if (cache) { this.cache = cache; this.#ownCache = false; }
    this.#recordAhead = recordAhead && !profile;
    this.device = device;
    this.#profile = profile;
    this.desc = desc;
    this.#w = weights;
    this.#kvF16 = kvF16;
    this.#nCtx = nCtx;
    this.#ropeFreq = ropeFreq;
    this.#ropeSets = ropeSets;
    this.#ropeSections = ropeSections;
    this.#csStride = 2 * ropeHalf(desc.hp);
    this.#mscale = mscale;
    this.chunk = chunk;
    this.#maxWant = maxWant;
    // attention's split of the cache: tiles of WG positions, at most ATT_MAX_SPLITS splits
    this.#attSplits = Math.min(ATT_MAX_SPLITS, Math.ceil(nCtx / WG));
  }

  /** Whether hb holds gate and up side by side (2 · hidden_dim a entry): Phi-3's fused ffn_up,
   *  or gate/up joined by fuseMatrices. */
  #upRowsDoubled() {
    return this.desc.arch.ffn === 'fused_gate_up' || this.desc.layers.some((l) => l.w13);
  }

  /** A hybrid's activations per entry (recurrent.c's scratch): qg, a gated attention's query
   *  and gate rows (2 q_dim); rin, a recurrent layer's input projection (DeltaNet's q, k, v
   *  heads: ssm_channels; LFM2's B, C, x: 3 dim); rba, DeltaNet's beta and decay (2 ssm_hv);
   *  rz and ro, DeltaNet's output gate and the mixer's output (one stride: the delta-rule
   *  kernel's zo_estride). */
  #hybridSizes() {
    const h = this.desc.hp, kinds = new Set(this.desc.layers.map((l) => l.mixer));
    const VD = kinds.has('deltanet') ? h.ssm_hv * h.ssm_d : 0;
    const rin = Math.max(kinds.has('deltanet') ? h.ssm_channels : 0, kinds.has('shortconv') ? 3 * h.dim : 0);
    const ro = rin ? Math.max(VD, h.dim) : 0;
    return { qg: this.desc.arch.attn_gate ? 2 * h.q_dim : 0, rin, rba: VD ? 2 * h.ssm_hv : 0, rz: VD ? ro : 0, ro };
  }

  /** A mixture of experts' activations per entry (moe.c's scratch; none without MoE layers):
   *  moe_z, the router's logits (n_expert); moe_r, the route (k ids, then k weights); moe_g,
   *  moe_u, each slot's gate and up rows (k × expert_ff; moe_g k × 2 expert_ff where gate and up
   *  are one fused tensor, Gemma 4's: each slot's gate rows, then its up rows); moe_y, each
   *  slot's down product (k × dim); moe_in, the router's input where it is not the experts'
   *  (Gemma 4's scaled RMSNorm of the stream: dim); moe_ls and moe_cnt, a prefill chunk's pairs
   *  grouped by expert (moe_group: expert e's list of at most B pairs at moe_ls + e · B, its
   *  length at moe_cnt + e; n_expert an entry, so B · n_expert floats each). */
  #moeSizes() {
    const h = this.desc.hp, ls = this.desc.layers.filter((l) => l.ffn_kind === 'moe');
    if (!ls.length) return {};
    const K = h.n_expert_used, p4 = (n) => (n + 3) & ~3;
    return { moe_z: h.n_expert, moe_r: 2 * K, moe_g: K * this.#moeGateStride(), moe_u: K * p4(h.expert_ff), moe_y: K * p4(h.dim),
      moe_in: ls.some((l) => l.moe_in_norm) ? h.dim : 0, moe_ls: h.n_expert, moe_cnt: h.n_expert };
  }

  /** Floats between two slots' gate rows in moe_g: expert_ff, or 2 expert_ff (fused gate/up), padded to 4. */
  #moeGateStride() {
    const F = this.desc.hp.expert_ff;
    return ((this.desc.layers.some((l) => l.exp_gate_up) ? 2 * F : F) + 3) & ~3;
  }

  /** Activation offsets for `B` entries: {name: float offset, total}. */
  #layout(B) {
    const h = this.desc.hp;
    const fusedQkv = this.desc.layers.some((l) => l.wqkv);
    const fusedUp = this.#upRowsDoubled();
    const sizes = {
      x: h.dim, xb: Math.max(h.dim, h.q_dim), xb2: h.dim, q: h.q_dim, k: h.kv_dim, v: h.kv_dim,
      qkv: fusedQkv ? h.q_dim + 2 * h.kv_dim : 0, hb: fusedUp ? 2 * h.hidden_dim : h.hidden_dim,
      hb2: h.hidden_dim, cs: this.#ropeSets * this.#csStride, logits: h.vocab_size,
      att: h.n_heads * this.#attSplits * (h.head_size + 2),
      ...this.#hybridSizes(), ...pleSizes(h), ...this.#moeSizes(),
    };
    const off = {};
    let at = 0;
    const rows = (k) => (k === 'logits' && this.#maxWant ? Math.min(B, this.#maxWant) : B);
    for (const [k, n] of Object.entries(sizes)) { off[k] = at; at += rows(k) * ((n + 3) & ~3); }
    // the biases, copied from the vectors once (matvec adds them as it stores its sums)
    off.bias = at;
    for (const l of this.desc.layers) {
      for (const k of BIASES) for (const v of vecList(l[k])) at += (v[2] + 3) & ~3;
    }
    off.total = at;
    return off;
  }

  async #build(pipelines) {
    const { device, desc } = this;
    const h = desc.hp;
    const cap = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    this.#pipelines = pipelines;
    while (this.chunk > 1 && this.#layout(this.chunk).total * 4 > cap) this.chunk >>= 1;
    const B = this.chunk;
    this.#off = this.#layout(B);
    checkFits(device, `the activations of ${B} entries`, this.#off.total * 4);
    if (this.#ownCache) {
      this.cache = await GpuKvCache.create(device, desc, { nCtx: this.#nCtx, nSeq: this.#nSeq, f16: this.#kvF16,
        ropeFreq: this.#ropeFreq, ropeSets: this.#ropeSets, pipelines });
    }

    device.pushErrorScope('out-of-memory');
    this.#act = device.createBuffer({ label: 'activations', size: this.#off.total * 4, usage: USAGE.STORAGE | USAGE.COPY_DST | USAGE.COPY_SRC });
    this.#step = device.createBuffer({ label: 'step', size: (5 * B + 4) * 4, usage: USAGE.STORAGE | USAGE.COPY_DST });
    this.#ownBytes = this.#off.total * 4 + (5 * B + 4) * 4;
    const oom = await device.popErrorScope();
    if (oom) {
      this.destroy();
      throw jsError('WLM_ERR_NOMEM', `WebGPU: out of GPU memory for the activations (${this.#ownBytes} bytes; a smaller nCtx may fit): ${oom.message}`);
    }
    await this.#program(pipelines);
  }

  /** Builds the op list of one pass (forward.c's order) with its parameter blocks. */
  async #program(pipelines) {
    const { device, desc } = this;
    const h = desc.hp;
    const a = desc.arch;
    const o = this.#off;
    const B = this.chunk;
    const w = this.#w;
    const maxX = device.limits.maxComputeWorkgroupsPerDimension;
    const specs = []; // [kind, arg, params[], extra bindings[], grid]
    const D = h.dim, Q = h.q_dim, KV = h.kv_dim, H = h.hidden_dim, hs = h.head_size;
    const XS = Math.max(D, Q), HS = this.#upRowsDoubled() ? 2 * H : H;
    const V = h.vocab_size;
    const pad = (n) => (n + 3) & ~3;
    const E = { x: pad(D), xb: pad(XS), xb2: pad(D), q: pad(Q), k: pad(KV), v: pad(KV), qkv: pad(Q + 2 * KV), hb: pad(HS), hb2: pad(H), logits: pad(V),
      att: pad(h.n_heads * this.#attSplits * (hs + 2)) };
    for (const [k, n] of Object.entries({ ...this.#hybridSizes(), ...pleSizes(h), ...this.#moeSizes() })) E[k] = pad(n);
    const CS = this.#csStride;
    const wg = (n) => Math.ceil(n / WG);
    const rowsGrid = (rows) => { const x = Math.min(rows, maxX); return [x, Math.ceil(rows / x)]; };
    const vecOf = (t) => w.vecOff.get(t[4]);
    const bufOf = (t) => w.matrix.get(t[4]);
    const S = { buffer: this.#step };
    const Vb = { buffer: w.vec };
    // bias vectors' places in A (o.bias ..), and the copies that put them there
    const biasCopies = [];
    let biasNext = o.bias;
    const biasAt = (vt) => { // a vector, or joined Q/K/V biases (fuseMatrices) end to end
      const at = biasNext;
      for (const v of vecList(vt)) {
        biasCopies.push([vecOf(v), biasNext, v[2]]);
        biasNext += (v[2] + 3) & ~3;
      }
      return at;
    };

    // one entry (decode): a workgroup z per entry; 2 .. MATMAT_MIN_ENT − 1: MATMAT_ENT entries
    // per workgroup z, each weight read once for them (the one-entry sums in the same order);
    // more (prefill): the tiled matrix-matrix kernel (wgsl_matmat.js), TILE.TM rows × TILE.TN
    // entries per workgroup, each weight decoded once per tile — unless the run is `exact`
    // (run(): a speculative verification), which keeps the batch matvec for every count (the
    // grids' fourth argument is the count from which the tiled kernel runs)
    // `glu` (0 SiLU, 1 GELU; t a joined gate/up matrix, rows [gate; up], fuseMatrices): the
    // matvec forms store act(gate) · up in rows/2 outputs themselves, the tiled kernel stores both
    // halves and the element-wise glu kernel finishes them
    const matvec = (t, xOff, xE, yOff, yE, perWanted = false, accumulate = false, bias = null, glu = null) => {
      const tpr = matvecThreadsPerRow(t[2]);
      const rows = glu === null ? t[1] : t[1] / 2;
      const [gx, gy] = rowsGrid(Math.ceil(rows / (WG / tpr)));
      const [tx, ty] = rowsGrid(Math.ceil(t[1] / TILE.TM));
      const count = (n, m) => (perWanted ? m : n);
      const params = [t[1], t[2], t[3], xOff, xE, yOff, yE, accumulate ? 1 : 0, 3 * B + (perWanted ? 1 : 0),
        bias ? biasAt(bias) + 1 : 0];
      const mv = glu === null ? params : [rows, ...params.slice(1), glu];
      const form = glu === null ? [] : ['glu'];
      specs.push(['matvec', [t[0], tpr, 1, ...form], mv, [{ buffer: bufOf(t) }],
        (n, m) => [gx, gy, count(n, m) === 1 ? 1 : 0]]);
      specs.push(['matvec', [t[0], tpr, MATMAT_ENT, ...form], mv, [{ buffer: bufOf(t) }, S],
        (n, m, ns, mm) => [gx, gy, count(n, m) > 1 && count(n, m) < mm ? Math.ceil(count(n, m) / MATMAT_ENT) : 0]]);
      specs.push(['matmat', t[0], params, [{ buffer: bufOf(t) }, S],
        (n, m, ns, mm) => [tx, ty, count(n, m) >= mm ? Math.ceil(count(n, m) / TILE.TN) : 0]]);
      if (glu !== null) {
        specs.push(['eltwise', 'glu', [yOff, yE, yOff + rows, yE, rows, glu, 1], [],
          (n, m, ns, mm) => [wg(rows), 1, count(n, m) >= mm ? count(n, m) : 0]]);
      }
    };
    const norm = (len, xOff, xE, xH, yOff, yE, yH, wt, bt, rows = 1, idx = NONE, perWanted = false) => {
      specs.push(['norm', '', [len, xOff, xE, xH, yOff, yE, yH, vecOf(wt), bt ? vecOf(bt) : NONE,
        a.norm === 'layer' ? 1 : 0, fbits(h.norm_eps), idx], [Vb, S], (n, m) => [rows, 1, perWanted ? m : n]]);
    };
    const add = (yOff, yE, xOff, xE, len) => specs.push(['eltwise', 'add', [yOff, yE, xOff, xE, len], [], (n) => [wg(len), 1, n]]);
    // x += (W·v + bias), post-normed: where no post-norm comes between, in the product's own
    // write (x + (Σ + bias), the add_vec and add kernels' sums bit for bit); else through `tmp`
    // and the add kernel
    const residual = (t, vOff, vE, tmpOff, tmpE, bias, postNorm) => {
      if (!postNorm) {
        matvec(t, vOff, vE, o.x, E.x, false, true, bias);
        return;
      }
      matvec(t, vOff, vE, tmpOff, tmpE, false, false, bias);
      norm(D, tmpOff, tmpE, 0, tmpOff, tmpE, 0, postNorm, null);
      add(o.x, E.x, tmpOff, tmpE, D);
    };
    // Q's heads and K's in one dispatch (K from workgroup n_heads on), each K head's workgroup
    // then storing that head of K and V into the layer's cache (kv_store's bits); `sh` the
    // layer's shapes (layerShape). A layer without K/V of its own (shared KV): Q's heads alone
    const ropeQKStore = (qOff, qE, kOff, kE, vOff, set, kvBind, sh) => specs.push(sh.kvOwn
      ? ['rope', this.#kvF16 ? 'f16' : 'f32',
        [qOff, qE, sh.hs, sh.nRot, a.rope === 'neox' ? 1 : 0, o.cs + set * B * CS, CS, kOff, h.n_heads, kE,
          vOff, sh.KV, this.#nCtx, B, 3 * B + 4], [kvBind, S], (n) => [h.n_heads + sh.nkv, 1, n]]
      : ['rope', '', [qOff, qE, sh.hs, sh.nRot, a.rope === 'neox' ? 1 : 0, o.cs + set * B * CS, CS, 0, 0, 0], [],
        (n) => [h.n_heads, 1, n]]);

    // embedding
    const te = desc.tensors.token_embd;
    specs.push(['embed', te[0], [D, te[3], 0, o.x, E.x, 0, fbits(h.embd_scale)], [{ buffer: bufOf(te) }, S], (n) => [wg(D), 1, n]]);
    const pe = desc.tensors.position_embd;
    if (pe) specs.push(['embed', pe[0], [D, pe[3], B, o.x, E.x, 1, fbits(1)], [{ buffer: bufOf(pe) }, S], (n) => [wg(D), 1, n]]);

    // a hybrid's recurrent layers (recurrent.c's order): the conv and the delta rule walk the
    // chunk's entries in order over each entry's sequence state (R: cache.state)
    const R = this.cache.state ? { buffer: this.cache.state } : null;
    const SF = h.state_floats ?? 0;
    const deltanet = (l) => {
      const { ssm_d: Dk, ssm_hk: HK, ssm_hv: HV, ssm_channels: C } = h;
      matvec(l.ssm_in, o.xb, E.xb, o.rin, E.rin);
      matvec(l.ssm_gate, o.xb, E.xb, o.rz, E.rz);
      matvec(l.ssm_beta, o.xb, E.xb, o.rba, E.rba);
      matvec(l.ssm_alpha, o.xb, E.xb, o.rba + HV, E.rba);
      specs.push(['conv', '', [o.rin, E.rin, o.rin, E.rin, C, h.ssm_conv, vecOf(l.conv_w), NONE, NONE, 1, l.state_off, SF, 3 * B, 3 * B + 4],
        [R, Vb, S], (n) => [wg(C), 1, n ? 1 : 0]]);
      const qscale = Math.fround(1 / Math.fround(Math.sqrt(Dk))); // 1.0f / sqrtf(D)
      specs.push(['l2norm', '', [Dk, o.rin, E.rin, Dk, fbits(h.norm_eps), HK, fbits(qscale)], [], (n) => [2 * HK, 1, n]]);
      specs.push(['ssm_gates', '', [o.rba, o.rba + HV, E.rba, HV, vecOf(l.ssm_dt), vecOf(l.ssm_a)], [Vb], (n) => [wg(HV), 1, n]]);
      // the layer's state: the conv's K − 1 rows of C inputs, then each value head's D × D
      specs.push(['deltanet', '', [o.rin, E.rin, Dk, HK, o.rba, E.rba, HV, o.rz, o.ro, E.ro, l.state_off + (h.ssm_conv - 1) * C, SF, vecOf(l.ssm_norm),
        fbits(h.norm_eps), 3 * B, 3 * B + 4], [R, Vb, S], (n) => [HV, 1, n ? 1 : 0]]);
      residual(l.ssm_out, o.ro, E.ro, o.xb2, E.xb2, null, null);
    };
    const shortconv = (l) => { // [B, C, x] = in_proj · h; y = C ⊙ conv(B ⊙ x)
      matvec(l.ssm_in, o.xb, E.xb, o.rin, E.rin);
      specs.push(['conv', '', [o.rin + 2 * D, E.rin, o.ro, E.ro, D, h.ssm_conv, vecOf(l.conv_w), o.rin, o.rin + D, 0, l.state_off, SF, 3 * B, 3 * B + 4],
        [R, Vb, S], (n) => [wg(D), 1, n ? 1 : 0]]);
      residual(l.ssm_out, o.ro, E.ro, o.xb2, E.xb2, null, null);
    };

    // a mixture of experts (moe.c) on the experts' input xin (xb: the normed input; Gemma 4's
    // xb2) and the router's input rin (the same, or Gemma 4's moe_in): the router, the route,
    // then per (entry, slot) the chosen expert's gate and up products (one dispatch per buffer
    // of an expert tensor split by the binding limit; one product of 2 expert_ff rows for a
    // fused gate/up tensor), its activation and down product (times the expert's output scale),
    // then the weighted sum in slot order into `out`, or added to it (`accumulate`: the stream).
    // The products: below the tiled kernel's count (decode, a few entries, an `exact` run)
    // moe_matvec per (entry, slot); from it the pairs grouped by expert once a layer
    // (moe_group) and moe_matmat per expert over its pairs (n_expert × ⌈n / TILE.TN⌉
    // workgroups z, those past an expert's list exiting at once), each expert's weights read
    // once per TILE.TN of its pairs rather than once per pair
    const moe = (l, xin, xinE, rin, rinE, out, outE, accumulate) => {
      const K = h.n_expert_used, F = h.expert_ff, pF = pad(F), pG = this.#moeGateStride(), pD = pad(D);
      const none = (v) => (v ? vecOf(v) : NONE);
      const grouped = (n, mm) => this.#groupExperts && n >= mm;
      matvec(l.moe_router, rin, rinE, o.moe_z, E.moe_z);
      specs.push(['moe_route', '', [o.moe_z, E.moe_z, h.n_expert, K, h.moe_gating, h.moe_norm_w, fbits(h.moe_w_scale),
        none(l.moe_router_b), none(l.moe_probs_b), o.moe_r, E.moe_r], [Vb], (n) => [1, 1, n]]);
      specs.push(['moe_group', '', [o.moe_r, E.moe_r, K, h.n_expert, o.moe_ls, B, o.moe_cnt, 3 * B], [S],
        (n, m, ns, mm) => [1, 1, grouped(n, mm) ? 1 : 0]]);
      const ids = (pieces, xOff, xE, xPair, yOff, yE, bias, scale = null) => {
        for (const t of pieces) {
          const rows = t[1] / (t[7] - t[6]), tpr = matvecThreadsPerRow(t[2]);
          const [gx, gy] = rowsGrid(Math.ceil(rows / (WG / tpr)));
          const [tx, ty] = rowsGrid(Math.ceil(rows / TILE.TM));
          specs.push(['moe_matvec', [t[0], tpr], [rows, t[2], t[3], xOff, xE, xPair, yOff, yE, o.moe_r, E.moe_r, K, t[6], t[7], none(bias), none(scale)],
            [{ buffer: bufOf(t) }, Vb], (n, m, ns, mm) => [gx, gy, grouped(n, mm) ? 0 : n * K]]);
          specs.push(['moe_matmat', t[0], [rows, t[2], t[3], xOff, xE, xPair, yOff, yE, o.moe_ls, B, o.moe_cnt, K, t[6], 3 * B, none(bias), none(scale)],
            [{ buffer: bufOf(t) }, Vb, S], (n, m, ns, mm) => [tx, ty, grouped(n, mm) ? (t[7] - t[6]) * Math.ceil(n / TILE.TN) : 0]]);
        }
      };
      let gOff = o.moe_g, uOff = o.moe_u, uE = pF;
      if (l.exp_gate_up) { // each slot's gate rows, then its up rows
        ids(l.exp_gate_up, xin, xinE, 0, o.moe_g, pG, null);
        uOff = o.moe_g + F;
        uE = pG;
      } else {
        ids(l.exp_gate, xin, xinE, 0, gOff, pG, l.exp_gate_b);
        ids(l.exp_up, xin, xinE, 0, uOff, uE, l.exp_up_b);
      }
      if (a.moe_act === 'swiglu_oai') specs.push(['moe_act', '', [gOff, pG, uOff, uE, F], [], (n) => [wg(F), 1, n * K]]);
      else specs.push(['eltwise', 'glu', [gOff, pG, uOff, uE, F, a.moe_act === 'gelu' ? 1 : 0, 1], [], (n) => [wg(F), 1, n * K]]);
      ids(l.exp_down, gOff, pG, 1, o.moe_y, pD, l.exp_down_b, l.exp_out_scale);
      specs.push(['moe_sum', '', [o.moe_y, pD, o.moe_r, E.moe_r, K, out, outE, D, accumulate ? 1 : 0], [],
        (n) => [wg(D), 1, n]]);
    };
    // the router's input when it reads the stream (Gemma 4: RMSNorm(x) without gain / √dim ⊙
    // ffn_gate_inp.scale, as moe.c), built in moe_in; else the experts' input
    const routerIn = (l, xin, xinE) => {
      if (!l.moe_in_norm) return [xin, xinE];
      norm(D, o.x, E.x, 0, o.moe_in, E.moe_in, 0, l.moe_in_norm, null);
      specs.push(['eltwise', 'scale', [o.moe_in, E.moe_in, D, fbits(Math.fround(1 / Math.fround(Math.sqrt(D))))], [], (n) => [wg(D), 1, n]]);
      if (l.moe_in_scale) specs.push(['eltwise', 'mul_vec', [o.moe_in, E.moe_in, vecOf(l.moe_in_scale), D], [Vb], (n) => [wg(D), 1, n]]);
      return [o.moe_in, E.moe_in];
    };

    // the dense feed-forward's gated product into hb (of the layer's width H)
    const denseUp = (l, H) => {
      const act = a.act === 'gelu' ? 1 : 0;
      if (l.w13) { // gate and up joined (fuseMatrices)
        matvec(l.w13, o.xb, E.xb, o.hb, E.hb, false, false, null, act);
      } else if (a.ffn === 'gated') {
        matvec(l.w1, o.xb, E.xb, o.hb, E.hb);
        matvec(l.w3, o.xb, E.xb, o.hb2, E.hb2);
        specs.push(['eltwise', 'glu', [o.hb, E.hb, o.hb2, E.hb2, H, act, 1], [], (n) => [wg(H), 1, n]]);
      } else if (a.ffn === 'fused_gate_up') {
        matvec(l.w3, o.xb, E.xb, o.hb, E.hb);
        specs.push(['eltwise', 'glu', [o.hb, E.hb, o.hb + H, E.hb, H, act, 1], [], (n) => [wg(H), 1, n]]);
      } else {
        matvec(l.w3, o.xb, E.xb, o.hb, E.hb, false, false, l.b_up);
        specs.push(['eltwise', 'glu', [o.hb, E.hb, 0, 0, H, 1, 0], [], (n) => [wg(H), 1, n]]);
      }
    };

    // a layer's feed-forward, after its mixer's residual (forward.c's order): dense; the
    // experts alone (onto the stream, through xb when a post-norm comes between); or Gemma 4's
    // both: RMSNorm(dense, post_ffw_norm_1) + RMSNorm(experts(RMSNorm(x, pre_ffw_norm_2)),
    // post_ffw_norm_2), post-normed, onto the stream
    const ffn = (l) => {
      const H = layerShape(h, l).H; // (Gemma 4: the layer's own width)
      norm(D, o.x, E.x, 0, o.xb, E.xb, 0, l.ffn_norm, l.ffn_norm_b);
      if (l.ffn_kind === 'moe' && !l.moe_post_norm_1) {
        const post = l.post_ffn_norm;
        moe(l, o.xb, E.xb, ...routerIn(l, o.xb, E.xb), post ? o.xb : o.x, post ? E.xb : E.x, !post);
        if (post) {
          norm(D, o.xb, E.xb, 0, o.xb, E.xb, 0, post, null);
          add(o.x, E.x, o.xb, E.xb, D);
        }
        return;
      }
      denseUp(l, H);
      if (l.ffn_kind !== 'moe') {
        residual(l.w2, o.hb, E.hb, o.xb, E.xb, l.b_down, l.post_ffn_norm);
        return;
      }
      matvec(l.w2, o.hb, E.hb, o.xb, E.xb, false, false, l.b_down);
      norm(D, o.xb, E.xb, 0, o.xb, E.xb, 0, l.moe_post_norm_1, null);
      norm(D, o.x, E.x, 0, o.xb2, E.xb2, 0, l.moe_pre_norm, null);
      moe(l, o.xb2, E.xb2, ...routerIn(l, o.xb2, E.xb2), o.xb2, E.xb2, false);
      norm(D, o.xb2, E.xb2, 0, o.xb2, E.xb2, 0, l.moe_post_norm_2, null);
      add(o.xb, E.xb, o.xb2, E.xb2, D);
      if (l.post_ffn_norm) norm(D, o.xb, E.xb, 0, o.xb, E.xb, 0, l.post_ffn_norm, null);
      add(o.x, E.x, o.xb, E.xb, D);
    };

    // Gemma 4's per-layer embeddings (per_layer.js; nothing for other models)
    const ple = pleSpecs(desc, {
      matvec, norm, residual, add,
      scale: (y, yE, len, v) => specs.push(['eltwise', 'scale', [y, yE, len, fbits(v)], [], (n) => [wg(len), 1, n]]),
      scaleBy: (y, yE, len, v) => specs.push(['eltwise', 'scale_by', [y, yE, vecOf(v), len], [Vb], (n) => [wg(len), 1, n]]),
      glu: (g, gE, u, uE, len, act) => specs.push(['eltwise', 'glu', [g, gE, u, uE, len, act, 1], [], (n) => [wg(len), 1, n]]),
    }, o, E);
    ple.inputs();

    desc.layers.forEach((l, li) => {
      const set = this.#ropeSets > 1 && l.swa ? 1 : 0;
      norm(D, o.x, E.x, 0, o.xb, E.xb, 0, l.attn_norm, l.attn_norm_b);
      if (l.mixer === 'deltanet' || l.mixer === 'shortconv') {
        (l.mixer === 'deltanet' ? deltanet : shortconv)(l);
        ffn(l);
        return;
      }
      // this layer's shapes (layerShape: the model's, but in Gemma 4)
      const sh = layerShape(h, l);
      const { hs, nkv, kvOwn } = sh, LQ = sh.Q, LKV = sh.KV;
      let qo, ko, vo, qE, kE;
      if (a.attn_gate) { // attn_q: per head the query rows, then as many gate rows
        if (!l.q_norm) throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: ${a.name}'s gated attention needs per-head Q/K norms`);
        matvec(l.wq, o.xb, E.xb, o.qg, E.qg);
        matvec(l.wk, o.xb, E.xb, o.k, E.k, false, false, l.bk);
        matvec(l.wv, o.xb, E.xb, o.v, E.v, false, false, l.bv);
        qo = o.q; ko = o.k; vo = o.v; qE = E.q; kE = E.k;
      } else if (l.wqkv) {
        matvec(l.wqkv, o.xb, E.xb, o.qkv, E.qkv, false, false, l.bqkv);
        qo = o.qkv; ko = o.qkv + LQ; vo = o.qkv + LQ + LKV; qE = kE = E.qkv;
      } else {
        matvec(l.wq, o.xb, E.xb, o.q, E.q, false, false, l.bq);
        if (kvOwn) matvec(l.wk, o.xb, E.xb, o.k, E.k, false, false, l.bk);
        // (V = K, Gemma 4's full layers without attn_v: V's norm below reads K's projection)
        if (kvOwn && l.v_is_k && !l.v_norm) throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: ${a.name}: V = K without V's norm`);
        if (kvOwn && !l.v_is_k) matvec(l.wv, o.xb, E.xb, o.v, E.v, false, false, l.bv);
        qo = o.q; ko = o.k; vo = o.v; qE = E.q; kE = E.k;
      }
      if (a.attn_gate) { // the query rows normed out of qg into q (the head's gate rows stay)
        norm(hs, o.qg, E.qg, 2 * hs, qo, qE, hs, l.q_norm, null, h.n_heads);
        norm(hs, ko, kE, hs, ko, kE, hs, l.k_norm, null, nkv);
      } else if (l.q_norm) {
        norm(hs, qo, qE, hs, qo, qE, hs, l.q_norm, null, h.n_heads);
      }
      if (kvOwn && l.v_norm) { // Gemma 4: RMSNorm of each V head without gain (of K's projection where V = K)
        norm(hs, l.v_is_k ? ko : vo, kE, hs, vo, kE, hs, l.v_norm, null, nkv);
      }
      if (kvOwn && l.k_norm && !a.attn_gate) norm(hs, ko, kE, hs, ko, kE, hs, l.k_norm, null, nkv);
      const kvBind = { buffer: this.cache.layers[l.kv_slot ?? li] };
      if (a.rope !== 'none' && !l.no_rope) { // (a NoPE layer, SmolLM3's every 4th: stored as it is)
        ropeQKStore(qo, qE, ko, kE, vo, set, kvBind, sh);
      } else if (kvOwn) {
        specs.push(['kv_store', this.#kvF16, [ko, vo, kE, LKV, this.#nCtx, B, 3 * B + 4], [kvBind, S],
          (n) => [wg(this.#kvF16 ? LKV / 2 : LKV), 1, n]]);
      }
      if (sh.qScale !== 1) specs.push(['eltwise', 'scale', [qo, qE, LQ, fbits(sh.qScale)], [], (n) => [wg(LQ), 1, n]]);
      // split over the cache (the splits this pass's longest entry needs: ns), then combined
      // (heads above ATT_HEAD, Gemma 4's full layers: the kernel's wide form)
      specs.push(['attention', hs > ATT_HEAD ? [this.#kvF16, MAX_HEAD] : this.#kvF16, [qo, qE, 0, 0, hs, LKV, this.#nCtx, h.n_heads / nkv, B,
        l.swa ? h.n_swa : 0, fbits(1 / Math.sqrt(hs)), 4 * B + 5, o.att, E.att, this.#attSplits, 3 * B + 4], [kvBind, S],
      (n, m, ns) => [h.n_heads, ns, n]]);
      specs.push(['attn_combine', '', [o.xb, E.xb, hs, o.att, E.att, this.#attSplits, 3 * B + 2], [S],
        (n) => [h.n_heads, 1, n]]);
      if (l.attn_sinks) { // gpt-oss: each head times 1 / (1 + e^(sink − lse)), lse from the partials
        specs.push(['sinks', '', [o.xb, E.xb, hs, o.att, E.att, this.#attSplits, 3 * B + 2, vecOf(l.attn_sinks)], [Vb, S],
          (n) => [h.n_heads, 1, n]]);
      }
      if (a.attn_gate) { // o ⊙ sigmoid(gate), per head
        specs.push(['sigmoid_gate', '', [o.xb, E.xb, hs, o.qg + hs, E.qg, 2 * hs, hs], [], (n) => [wg(hs), h.n_heads, n]]);
      }
      residual(l.wo, o.xb, E.xb, o.xb2, E.xb2, l.bo, l.post_attn_norm);
      ffn(l);
      ple.layer(l, li);
    });

    // the entries that want logits: final norm gathered by S[2B + j], classifier, soft-cap
    norm(D, o.x, E.x, 0, o.xb, E.xb, 0, desc.tensors.output_norm, desc.tensors.output_norm_b, 1, 2 * B, true);
    matvec(desc.tensors.output, o.xb, E.xb, o.logits, E.logits, true);
    if (h.final_softcap > 0) {
      specs.push(['eltwise', 'softcap', [o.logits, E.logits, V, fbits(h.final_softcap)], [], (n, m) => [wg(V), 1, m]]);
    }
    this.#logitStride = E.logits;

    // the biases into their places in A, once
    if (biasCopies.length) {
      const enc = device.createCommandEncoder();
      for (const [from, to, len] of biasCopies) enc.copyBufferToBuffer(w.vec, from * 4, this.#act, to * 4, ((len + 3) & ~3) * 4);
      device.queue.submit([enc.finish()]);
    }
    // parameters: one 256-byte slot each, in one uniform buffer
    this.#params = device.createBuffer({ label: 'params', size: specs.length * PARAM_SLOT, usage: USAGE.UNIFORM | USAGE.COPY_DST });
    const words = new Uint32Array(specs.length * PARAM_SLOT / 4);
    specs.forEach((s, i) => words.set(s[2].map((v) => v >>> 0), i * PARAM_SLOT / 4));
    device.queue.writeBuffer(this.#params, 0, words);
    this.#ownBytes += specs.length * PARAM_SLOT;
    const pipes = await Promise.all(specs.map((s) => pipelines.get(s[0], s[1])));
    this.#ops = specs.map((s, i) => {
      const entries = [{ binding: 0, resource: { buffer: this.#act } },
        { binding: 1, resource: { buffer: this.#params, offset: i * PARAM_SLOT, size: 64 } },
        ...s[3].map((r, j) => ({ binding: 2 + j, resource: r }))];
      const kind = s[0] === 'matvec' || s[0] === 'matmat' ? `${s[0]}${s[1][3] === 'glu' ? '+glu' : ''} ${GPU_TYPES[s[1][0] ?? s[1]]?.name ?? ''}`
        : s[0] === 'moe_matvec' ? `moe_matvec ${GPU_TYPES[s[1][0]]?.name ?? ''}`
          : s[0] === 'moe_matmat' ? `moe_matmat ${GPU_TYPES[s[1]]?.name ?? ''}` : s[0] === 'eltwise' ? `eltwise ${s[1]}` : s[0];
      return { pipeline: pipes[i], bind: device.createBindGroup({ layout: pipes[i].getBindGroupLayout(0), entries }), grid: s[4], kind };
    });
  }

  #logitStride = 0;
  #ahead = null; // {key, staging, cmd}: the next step's commands, recorded while this one ran
  #recordAhead = true;
  /** Chunks whose commands had been recorded ahead (#encodeAhead) and were submitted as they were. */
  recordedHits = 0;

  /**
   * Records one chunk: its compute pass (n entries, m wanted, ns attention splits, the tiled
   * kernel from mm entries; no kernels with `ops` false: GPU_PROFILE ran them) and the copies of
   * its m logits rows to the readback buffer's rows row .. row + m − 1. Each step's tokens,
   * positions and RoPE factors reach the GPU by writeBuffer, not in the commands, so what is
   * recorded depends only on these arguments (and on the readback buffer).
   */
  #encode(n, m, ns, mm, row, ops = true) {
    const enc = this.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (const op of ops ? this.#ops : []) {
      const g = op.grid(n, m, ns, mm);
      if (!g || g[2] === 0) continue;
      pass.setPipeline(op.pipeline);
      pass.setBindGroup(0, op.bind);
      pass.dispatchWorkgroups(g[0], g[1], g[2]);
    }
    pass.end();
    const rowBytes = this.desc.hp.vocab_size * 4;
    for (let r = 0; r < m; r++) { // logits rows are pad(V) floats apart in A
      enc.copyBufferToBuffer(this.#act, (this.#off.logits + r * this.#logitStride) * 4, this.#staging, (row + r) * rowBytes, rowBytes);
    }
    return enc.finish();
  }

  /**
   * The most likely next step after a run whose entries wanted logits at `positions` (of those
   * entries): each of them one position further (a decode step after a prefill or a step; a
   * batch's or beams' next step), recorded now, while the GPU computes this one, so that its
   * recording (a few µs of Dawn's validation per dispatch, ~150 dispatches a step for a 16-layer
   * model: milliseconds) is off the step's critical path. run() submits it when its arguments
   * match, and records afresh otherwise (a miss costs only the recording).
   */
  #encodeAhead(positions, mm) {
    const m = positions.length;
    if (!this.#recordAhead || m === 0 || m > this.chunk || !this.#staging || this.#staging.size < m * this.desc.hp.vocab_size * 4) return;
    let ns = 1;
    for (const p of positions) ns = Math.max(ns, attentionSplit(p + 2, this.#attSplits).splits);
    const key = `${m},${m},${ns},${mm}`;
    this.#ahead = { key, staging: this.#staging, cmd: this.#encode(m, m, ns, mm, 0) };
  }

  /**
   * Runs entries (token ids, positions) through the model; `want[i]` true for the entries whose
   * logits are returned, in entry order, as one Float32Array (rows of vocab_size). Positions are
   * of the one sequence the cache holds; K/V of each entry's position are written. `exact`: the
   * logits equal one-entry runs' bit for bit (the batch matvec for any count, not the tiled
   * matrix-matrix kernel, whose sums run in another order) — a speculative verification, whose
   * greedy tokens must be plain greedy decoding's. `seqs`: each entry's sequence (0..nSeq − 1;
   * default all 0), whose cache rows it writes and attends to. `into`: a function given those
   * rows as a view of the mapped readback buffer, valid only during the call (it copies them
   * where they go: no copy of its own, no allocation of vocab_size floats a step); run() then
   * returns an empty array. Image rows (src/runtime/deferred.c): `erows[i]` ≥ 0 makes entry i's
   * input row erows[i] of `embd` (rows of dim floats, not scaled; tokens[i] is then -1) in place
   * of its token's embedding; `lens[i]` > 0 is the end of its non-causal image (it attends to
   * positions up to there: the image's rows see each other both ways), whose rows pass in one
   * chunk (#chunks) — more than a chunk's in a wider pass of their own (#widePass), which takes
   * no entry that wants logits. `rpos` (an M-RoPE model, create()'s ropeSections): 3 positions
   * per entry, temporal, height and width (deferred.c's dfr_rpos: an image row's from its grid,
   * the text after an image where the image's span ends), by which the RoPE sections turn
   * (mropeCosSin); `positions` stay the cache rows the entries write and the causal order.
   */
  async run(tokens, positions, want, { exact = false, seqs = null, into = null, lens = null, erows = null, embd = null, rpos = null } = {}) {
    if (this.#destroyed) throw jsError('WLM_ERR_STATE', 'WebGPU: the GPU forward pass was released');
    const { device } = this;
    const h = this.desc.hp;
    const B = this.chunk;
    const V = h.vocab_size;
    const nWant = want.reduce((s, w) => s + (w ? 1 : 0), 0);
    const rowBytes = V * 4;
    if (nWant && (!this.#staging || this.#staging.size < nWant * rowBytes)) {
      this.#staging?.destroy();
      this.#staging = device.createBuffer({ label: 'logits readback', size: nWant * rowBytes, usage: USAGE.MAP_READ | USAGE.COPY_DST });
    }
    const ahead = this.#ahead;
    this.#ahead = null;
    const mm = exact ? Infinity : MATMAT_MIN_ENT;
    const wantPos = [];
    let row = 0;
    // M-RoPE: each entry's (t, h, w) positions turn its sections (without them, as for text
    // alone: its position in every section)
    const mrope = rpos && this.#ropeSections;
    if (mrope && rpos.length < 3 * tokens.length) throw jsError('WLM_ERR_STATE', `internal: ${rpos.length / 3} M-RoPE positions for ${tokens.length} entries`);
    const sub = (a, i0, n) => a && a.subarray(i0, i0 + n);
    for (const [ci, [i0, n, wide]] of this.#chunks(tokens.length, lens, seqs).entries()) {
      if (wide) { // an image's rows that see each other, more than a chunk: a wider pass
        if (want.slice(i0, i0 + n).some(Boolean)) {
          throw jsError('WLM_ERR_UNSUPPORTED', `WebGPU: the rows of a non-causal image (${n} entries, more than a pass's ${B}) want no logits`);
        }
        const w = await this.#widePass(n);
        await w.run(sub(tokens, i0, n), sub(positions, i0, n), want.slice(i0, i0 + n), { seqs: sub(seqs, i0, n), lens: sub(lens, i0, n), erows: sub(erows, i0, n), embd, rpos: rpos && rpos.subarray(3 * i0, 3 * (i0 + n)) });
        continue;
      }
      const step = new Uint32Array(5 * B + 4);
      let m = 0;
      for (let j = 0; j < n; j++) {
        step[j] = tokens[i0 + j];
        step[B + j] = positions[i0 + j];
        step[3 * B + 4 + j] = seqs ? seqs[i0 + j] : 0;
        step[4 * B + 4 + j] = lens ? lens[i0 + j] : 0;
        if (want[i0 + j]) { step[2 * B + m++] = j; wantPos.push(positions[i0 + j]); }
      }
      step[3 * B] = n;
      step[3 * B + 1] = m;
      let ns = 1; // the splits the pass's entries need, at most
      for (let j = 0; j < n; j++) {
        const len = lens && lens[i0 + j] > 0 ? lens[i0 + j] : positions[i0 + j] + 1;
        ns = Math.max(ns, attentionSplit(len, this.#attSplits).splits);
      }
      step[3 * B + 2] = ns;
      device.queue.writeBuffer(this.#step, 0, step);
      if (erows) this.#writeRows(erows, embd, i0, n);
      if (this.#pleTable) { // the table's rows of the chunk's tokens, entry j at pla + j · stride
        const stride = (h.n_ple * h.n_layers + 3) & ~3;
        device.queue.writeBuffer(this.#act, this.#off.pla * 4, this.#pleTable.rows(tokens, i0, n, stride));
      }
      if (this.desc.arch.rope !== 'none') {
        const CS = this.#csStride; // each set its own rotated width (Gemma 4), CS floats apart
        const cs = new Float32Array(this.#ropeSets * B * CS);
        for (let s = 0; s < this.#ropeSets; s++) {
          const half = ropeSetRot(h, s) / 2;
          for (let j = 0; j < n; j++) {
            const at = (s * B + j) * CS, e = i0 + j;
            if (mrope) mropeCosSin(cs, at, rpos.subarray(3 * e, 3 * e + 3), mrope, this.#ropeFreq, s, half, this.#mscale, CS / 2);
            else ropeCosSin(cs, at, positions[e], this.#ropeFreq, s, half, this.#mscale, CS / 2);
          }
        }
        device.queue.writeBuffer(this.#act, this.#off.cs * 4, cs);
      }
      if (this.#profile) await this.#profileOps(n, m, ns, mm);
      const recorded = ahead && ci === 0 && ahead.key === `${n},${m},${ns},${mm}` && ahead.staging === this.#staging;
      if (recorded) this.recordedHits++;
      device.queue.submit([recorded ? ahead.cmd : this.#encode(n, m, ns, mm, row, !this.#profile)]);
      row += m;
    }
    if (!nWant) {
      await device.queue.onSubmittedWorkDone();
      return new Float32Array(0);
    }
    const mapped = this.#staging.mapAsync(1, 0, nWant * rowBytes);
    this.#encodeAhead(wantPos, mm);
    await mapped;
    const range = this.#staging.getMappedRange(0, nWant * rowBytes);
    try {
      if (into) into(new Float32Array(range));
      return into ? new Float32Array(0) : new Float32Array(range.slice(0));
    } finally {
      this.#staging.unmap();
    }
  }

  /**
   * The chunks of a batch of n entries, [first entry, count, wide]: up to `chunk` entries each,
   * the rows of a non-causal image (consecutive entries of one sequence with the same end in
   * `lens`) never cut: they see each other both ways, so every one of them must be in the pass
   * that computes them; more of them than a chunk holds make a chunk of their own (wide: run in
   * #widePass).
   */
  #chunks(n, lens, seqs) {
    const B = this.chunk, out = [];
    let start = 0, i = 0;
    const flush = () => { if (i > start) out.push([start, i - start, false]); start = i; };
    while (i < n) {
      let j = i + 1; // the unit at i: one entry, or a non-causal image's rows
      if (lens && lens[i] > 0) while (j < n && lens[j] === lens[i] && (!seqs || seqs[j] === seqs[i])) j++;
      if (j - i > B) {
        flush();
        out.push([i, j - i, true]);
        i = start = j;
        continue;
      }
      if (j - start > B) flush();
      i = j;
    }
    flush();
    return out;
  }

  /** Writes the image rows of entries i0 .. i0 + n − 1 (erows[i] ≥ 0: row erows[i] of embd) into
   *  their input rows x of A (the embedding kernel leaves those entries alone). */
  #writeRows(erows, embd, i0, n) {
    const D = this.desc.hp.dim, stride = (D + 3) & ~3;
    for (let j = 0; j < n;) {
      const r = erows[i0 + j];
      if (r < 0) { j++; continue; }
      let k = j + 1; // rows that follow each other in both (one write where the stride is D)
      while (stride === D && k < n && erows[i0 + k] === r + (k - j)) k++;
      this.device.queue.writeBuffer(this.#act, (this.#off.x + j * stride) * 4, embd, r * D, (k - j) * D);
      j = k;
    }
  }

  /**
   * The pass an image's non-causal rows run in when there are more of them than a chunk (Gemma
   * 3's 256): chunks of the next power of two ≥ n entries, this pass's weights and KV cache, one
   * logits row; made on first use and kept for the next image (GPU memory: its activations).
   * Throws WLM_ERR_NOMEM where those activations do not fit one buffer.
   */
  async #widePass(n) {
    if (this.#wide && this.#wide.chunk >= n) return this.#wide;
    this.#wide?.destroy();
    this.#wide = null;
    let W = this.chunk;
    while (W < n) W *= 2;
    const w = new GpuForward(this.device, this.desc, this.#w, { ...this.#opts, chunk: W, cache: this.cache, maxWant: 1, recordAhead: false, profile: null });
    await w.#build(this.#pipelines);
    if (w.chunk < n) {
      w.destroy();
      throw jsError('WLM_ERR_NOMEM', `WebGPU: an image's ${n} rows see each other both ways, so they pass together, ` +
        `but the activations of only ${w.chunk} entries fit one GPU buffer here`);
    }
    this.#wide = w;
    return w;
  }

  /** GPU_PROFILE: runs the ops of one chunk (n entries, m wanted, ns attention splits, the tiled
   *  kernel from mm entries), each in a compute pass of its own whose start and end the GPU
   *  stamps (timestamp-query), all in one submission as a plain step is; adds each kernel's GPU
   *  time to its kind and the time between one kernel's end and the next one's start (the
   *  barrier and launch between dispatches) to '(between kernels)'. */
  async #profileOps(n, m, ns, mm) {
    const { device } = this;
    if (!device.features.has('timestamp-query')) {
      throw jsError('WLM_ERR_UNSUPPORTED', 'WebGPU: GPU_PROFILE needs the adapter\'s timestamp-query feature');
    }
    const ops = this.#ops.filter((op) => { const g = op.grid(n, m, ns, mm); return g && g[2] !== 0; });
    const count = Math.min(2 * ops.length, 4096); // WebGPU's largest query set
    const qs = device.createQuerySet({ type: 'timestamp', count });
    const res = device.createBuffer({ size: 8 * count, usage: USAGE.QUERY_RESOLVE | USAGE.COPY_SRC });
    const read = device.createBuffer({ size: 8 * count, usage: USAGE.MAP_READ | USAGE.COPY_DST });
    const enc = device.createCommandEncoder();
    ops.forEach((op, i) => {
      const stamp = 2 * i + 1 < count;
      const pass = enc.beginComputePass(stamp ? { timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : {});
      const g = op.grid(n, m, ns, mm);
      pass.setPipeline(op.pipeline);
      pass.setBindGroup(0, op.bind);
      pass.dispatchWorkgroups(g[0], g[1], g[2]);
      pass.end();
    });
    enc.resolveQuerySet(qs, 0, count, res, 0);
    enc.copyBufferToBuffer(res, 0, read, 0, 8 * count);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(1);
    const t = new BigUint64Array(read.getMappedRange().slice(0));
    read.unmap();
    for (const b of [read, res]) b.destroy();
    qs.destroy();
    const add = (kind, ns) => {
      const e = this.#profile.get(kind) ?? { ms: 0, n: 0 };
      e.ms += Math.max(0, ns) / 1e6;
      e.n++;
      this.#profile.set(kind, e);
    };
    for (let i = 0; 2 * i + 1 < count; i++) {
      add(ops[i].kind, Number(t[2 * i + 1] - t[2 * i]));
      if (i) add('(between kernels)', Number(t[2 * i] - t[2 * i - 1]));
    }
  }

  destroy() {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#act?.destroy();
    this.#step?.destroy();
    if (this.#ownCache) this.cache?.destroy();
    this.#wide?.destroy();
    this.#wide = null;
    this.#params?.destroy();
    this.#staging?.destroy();
    this.#ahead = null;
  }
}

export { MAX_HEAD };
