// per_layer.js — a layer's own shapes as the GPU forward pass reads them, and Gemma 4's
// per-layer embeddings. Every layer of the model's description (wlmjs_model_describe,
// src/model/describe.c) carries its head size, KV heads, Q / KV widths, rotated width,
// feed-forward width, Q's scale and whether it keeps K/V of its own (the model's values in every
// architecture but Gemma 4's, whose sliding and full layers differ and whose last
// hp.n_shared_kv layers read an earlier layer's cache); forward.js and kv_cache.js read them
// through layerShape(), with the model's (hp) as the fallback of an older description. The
// RoPE tables hold one set per kind of layer (set 1: the sliding layers), each set its own
// rotated width. It builds no kernels: pleSpecs() lists the per-layer-embedding steps in terms
// of the pass's own helpers (matvec, norm, …), so one forward pass serves every architecture.
// The per-layer embedding table (per_layer_token_embd: n_vocab × n_layer · P, ~2.5 GB at 8 bits
// in E2B, past most adapters' binding limit) is not uploaded: as llama.cpp keeps that lookup on
// the host, it stays in wasm memory (src/formats/gguf.h wlm_gguf_tensor_host_lookup: in the
// streamed load's resident area too) and pleHostTable() gathers the rows of a pass's tokens,
// dequantized by C, which the pass writes into its activations before it runs.

import { jsError } from '../../runtime/errors.js';

/** Layer `l`'s shapes: {hs, nkv, Q, KV, H, nRot, qScale, kvOwn} (head size, KV heads, n_heads ·
 *  hs, nkv · hs, feed-forward width, rotated width, the factor Q is multiplied by before
 *  attention, and whether it computes and stores K/V: false on a KV-shared layer). */
export function layerShape(hp, l) {
  return {
    hs: l.head_size ?? hp.head_size,
    nkv: l.n_kv_heads ?? hp.n_kv_heads,
    Q: l.q_dim ?? hp.q_dim,
    KV: l.kv_dim ?? hp.kv_dim,
    H: l.hidden ?? hp.hidden_dim,
    nRot: l.n_rot ?? hp.n_rot,
    qScale: l.q_scale ?? hp.q_scale,
    kvOwn: l.kv_own === undefined ? true : !!l.kv_own,
  };
}

/** The rotated width of RoPE set `s` (1: the sliding layers, their own width in Gemma 4). */
export const ropeSetRot = (hp, s) => (s === 1 && hp.n_rot_swa ? hp.n_rot_swa : hp.n_rot);

/** Frequencies per set in the context's table (its rope_half): the widest set's n_rot / 2. */
export const ropeHalf = (hp) => Math.max(hp.n_rot, hp.n_rot_swa ?? 0) / 2;

/**
 * The KV cache's slots (one per layer owning a cache): for slot s, the row width (kv_dim),
 * head size, rotated width and RoPE set of the layer that writes it ({kvDim, hs, nRot, set,
 * noRope}), in slot order. `ropeSets` > 1: sliding layers use set 1.
 */
export function kvSlots(desc, ropeSets) {
  const slots = [];
  desc.layers.forEach((l, li) => {
    const s = l.kv_slot ?? li;
    if (s < 0 || slots[s] || !layerShape(desc.hp, l).kvOwn) return;
    const sh = layerShape(desc.hp, l);
    slots[s] = { kvDim: sh.KV, hs: sh.hs, nRot: sh.nRot, set: ropeSets > 1 && l.swa ? 1 : 0, noRope: !!l.no_rope };
  });
  return slots;
}

/** Gemma 4's per-layer-embedding activations per entry: ple (the inputs, n_layers rows of P),
 *  pla (the table's row, scaled), ph (a layer's gated input, P). Zeros without. */
export function pleSizes(hp) {
  const P = hp.n_ple ?? 0, PL = P * hp.n_layers;
  return { ple: PL, pla: PL, ph: P };
}

/** A float32 value, as C's float arithmetic rounds it. */
const f32 = Math.fround;

/**
 * The per-layer embedding table `t` (desc.tensors.ple_embd: [type, n_vocab, n_layer · P,
 * row_bytes, address in wasm memory]) read on the host: rows(tokens, from, n, stride) returns
 * a Float32Array of n rows `stride` floats apart (stride ≥ n_layer · P, the tail zeros), row j
 * the table's row of tokens[from + j] dequantized to F32 by C's to_float of its type
 * (wlmjs_dequantize: the CPU pass's ple_inputs reads it the same way), for the pass's `pla`
 * activations. `x`: the engine's exports, whose memory holds the table. free() releases its
 * scratch (n_layer · P floats of wasm memory). Throws WLM_ERR_NOMEM when the scratch cannot be
 * allocated, WLM_ERR_INVALID_ARG for a token outside the table, WLM_ERR_UNSUPPORTED for a type C
 * cannot dequantize. Returns null without a table.
 */
export function pleHostTable(x, t) {
  if (!t) return null;
  const [type, nRows, PL, rowBytes, addr] = t;
  let scratch = x.wlmjs_malloc(PL * 4) >>> 0;
  if (!scratch) throw jsError('WLM_ERR_NOMEM', `cannot allocate ${PL * 4} bytes of wasm memory for a per-layer embedding row`);
  return {
    rows(tokens, from, n, stride) {
      if (!scratch) throw jsError('WLM_ERR_STATE', 'the per-layer embedding table was released');
      const out = new Float32Array(n * stride);
      for (let j = 0; j < n; j++) {
        const tok = tokens[from + j];
        if (!(tok >= 0 && tok < nRows)) throw jsError('WLM_ERR_INVALID_ARG', `token ${tok} is outside the per-layer embedding table (${nRows} rows)`);
        if (x.wlmjs_dequantize(type, addr + tok * rowBytes, scratch, PL) !== PL) {
          throw jsError('WLM_ERR_UNSUPPORTED', `the per-layer embedding table's type ${type} cannot be dequantized`);
        }
        out.set(new Float32Array(x.memory.buffer, scratch, PL), j * stride); // (a fresh view: memory may grow)
      }
      return out;
    },
    free() {
      if (scratch) x.wlmjs_free(scratch);
      scratch = 0;
    },
  };
}

/**
 * The per-layer embeddings as steps of the pass (llama.cpp's build_inp_per_layer /
 * project_per_layer_inputs and the end of each layer of gemma4-iswa.cpp; forward.c's
 * ple_inputs and ple_layer). `ops`: the pass's builders {matvec(t, xOff, xE, yOff, yE), norm(len,
 * xOff, xE, xH, yOff, yE, yH, w, b, rows), residual(t, vOff, vE, tmpOff, tmpE, bias, postNorm),
 * scale(yOff, yE, len, s), add(yOff, yE, xOff, xE, len), glu(gOff, gE, uOff, uE, len, act),
 * scaleBy(yOff, yE, len, v)}, `o` / `E` the activation offsets and entry strides. The table's
 * rows of the pass's tokens are in `pla` when it runs (pleHostTable). Returns {inputs(),
 * layer(l, li)}: inputs() after the embedding, layer() after layer li's feed-forward residual
 * (the per-layer embedding, then the layer's output scale).
 */
export function pleSpecs(desc, ops, o, E) {
  const h = desc.hp, P = h.n_ple ?? 0, PL = P * h.n_layers, D = h.dim;
  return {
    // ple = (RMSNorm_l(proj · x / √D, proj_norm) + table[t] · √P) / √2, L rows of P
    inputs() {
      if (!P) return;
      ops.matvec(desc.tensors.ple_model_proj, o.x, E.x, o.ple, E.ple);
      ops.scale(o.ple, E.ple, PL, f32(1 / f32(Math.sqrt(D))));
      ops.norm(P, o.ple, E.ple, P, o.ple, E.ple, P, desc.tensors.ple_proj_norm, null, h.n_layers);
      ops.scale(o.pla, E.pla, PL, f32(Math.sqrt(P))); // (the rows: pleHostTable, written by run())
      ops.add(o.ple, E.ple, o.pla, E.pla, PL);
      ops.scale(o.ple, E.ple, PL, f32(1 / f32(Math.sqrt(2))));
    },
    // x += RMSNorm(proj · (gelu(inp_gate · x) ⊙ ple_l), post_norm); then x ·= out_scale
    layer(l, li) {
      if (P && l.ple_gate) {
        ops.matvec(l.ple_gate, o.x, E.x, o.ph, E.ph);
        ops.glu(o.ph, E.ph, o.ple + li * P, E.ple, P, 1);
        ops.residual(l.ple_proj, o.ph, E.ph, o.xb, E.xb, null, l.ple_norm);
      }
      if (l.out_scale) ops.scaleBy(o.x, E.x, D, l.out_scale);
    },
  };
}
