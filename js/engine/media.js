// media.js — an engine's vision model and the images it encoded: the mmproj loaded beside the
// text model (src/vision/ through wlmjs_vision_load; its encoder on the GPU when the text model
// runs there, js/backend/webgpu/vision.js), images decoded and encoded once and kept for the next
// prompt (a second question about the same image encodes nothing), and a prompt with images
// begun with the KV cache of the last one reused up to the images both share. Used by
// js/engine/engine.js (load, imageTokens) and, through the handles it lends, by generate.js and
// batch.js.

import { NEED_LOGITS, WasmlmError, abortError, jsError } from '../runtime/errors.js';
import { utf8 } from './params.js';
import { decodeImage, imageKey, MEDIA_MARKER } from '../vision/vision.js';
import { openModel } from '../models/split.js';
import { peekModelHeader } from '../runtime/memory64.js';
import { createGpuVisionEncoder, encodeImageOnGpu, readMmproj } from '../backend/webgpu/vision.js';

/** Encoded images an engine keeps for later prompts (a second question about the same image). */
const IMAGE_CACHE = 8;

/** An mmproj's source opened and its GGUF header read (the load plan's sizes), or its error. */
export async function peekMmproj(mmproj, signal) {
  const source = await openModel(mmproj, 'mmproj', signal);
  try {
    return { source, header: await peekModelHeader(source.peek) };
  } catch (e) {
    await source.close();
    if (signal?.aborted && e?.name !== 'AbortError') throw abortError('Loading the mmproj');
    throw e;
  }
}

/**
 * One engine's vision state, on the handles the engine lends (engine.js #lend: x, ctx, gpu, pool,
 * simd, syncPool, supply, heapInt32, readCString, error). Not part of the API.
 */
export class EngineMedia {
  #h;
  #vision = 0;       // wlm_vision* of load()'s mmproj, or 0
  #gpuVision = null; // the mmproj's GPU encoder (js/backend/webgpu/vision.js) when the text model runs on the GPU
  #images = new Map(); // encoded images (wlmjs_image_encode), key (js/vision/vision.js imageKey) → pointer, oldest first
  #media = null;     // the last media prompt in sequence 0: {pieces, keys, ends, tokens} (begin())

  constructor(handles) { this.#h = handles; }

  /** The wlm_vision* of the loaded mmproj, or 0. */
  get handle() { return this.#vision; }

  /**
   * Loads an mmproj (its bytes already in the heap, {ptr, size}, owned by wlmjs_vision_load from
   * here) beside the text model of width `dim`; returns ModelInfo.vision. Throws the loader's
   * message (a projector we do not support is named there), or when the projector's width is
   * not the model's (an mmproj of another model).
   */
  async load(x, m, dim, onGpu) {
    const h = this.#h;
    const slot = x.wlmjs_malloc(4) >>> 0;
    if (!slot) {
      x.wlmjs_free(m.ptr);
      throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
    }
    try {
      new DataView(x.memory.buffer).setInt32(slot, 0, true);
      const v = x.wlmjs_vision_load(m.ptr, m.size, slot) >>> 0;
      const rc = new DataView(x.memory.buffer).getInt32(slot, true);
      if (rc !== 0) {
        const msg = v ? h.readCString(x.wlm_vision_errmsg(v)) : '';
        if (v) x.wlm_vision_free(v);
        throw h.error(rc, /^mmproj\b/.test(msg) ? msg : `mmproj: ${msg || 'cannot load'}`);
      }
      this.#vision = v;
      const g = (i) => x.wlmjs_vision_info(v, i);
      const info = ({
        projector: h.readCString(x.wlmjs_vision_projector(v)), imageSize: g(0), patchSize: g(1),
        nEmbd: g(2), nLayers: g(4), nHeads: g(5), projDim: g(6), scaleFactor: g(7), longestEdge: g(8),
        pieceTokens: g(9), bytes: m.size,
      });
      if (info.projDim !== dim) {
        throw jsError('WLM_ERR_INVALID_ARG', `mmproj: its projector gives rows of ${info.projDim} floats but the ` +
          `model's width is ${dim}: an mmproj of another model`);
      }
      // with the text model on the GPU the encoder runs there too (js/backend/webgpu/vision.js),
      // unless the adapter's limits or a weight type keep it on the CPU (encoderReason says why)
      let encoder = 'cpu', encoderReason = onGpu ? '' : 'the text model runs on the CPU';
      if (onGpu) {
        try {
          const { info: vi, tensors } = readMmproj(new Uint8Array(x.memory.buffer, m.ptr, m.size));
          this.#gpuVision = await createGpuVisionEncoder(h.gpu.device, tensors, vi);
          encoder = 'webgpu';
        } catch (e) {
          if (!(e instanceof WasmlmError)) throw e;
          encoderReason = e.message;
        }
      }
      return Object.freeze({ ...info, encoder, encoderReason });
    } finally {
      x.wlmjs_free(slot);
    }
  }

  /** Frees the vision model and the encoded images. */
  unload(x = this.#h.x) {
    for (const p of this.#images.values()) x.wlmjs_image_embd_free(p);
    this.#images.clear();
    if (this.#vision) x.wlm_vision_free(this.#vision);
    this.#vision = 0;
    this.#gpuVision?.destroy();
    this.#gpuVision = null;
    this.#media = null;
  }

  /**
   * Begins a generation on a prompt with images (wlmjs_generate_begin_media_cached). With
   * `cachePrompt`, the KV cache of the last media prompt is kept up to the end of the last image
   * both share with the same text before it (same pieces, same image keys), provided sequence
   * 0 still holds it (its token ids equal those recorded then; image rows hold no id, and only
   * this path writes them); the rest is evaluated. On the GPU backend C records the prompt's
   * text and image rows as one batch, which runs there before the generation begins (the
   * image rows are kept in the GPU's KV cache like the CPU's: a second question about the same
   * image neither encodes nor evaluates it again). Returns {rc, kept: positions reused}.
   */
  async begin(prompt, promptPtr, enc, paramsPtr, cachePrompt) {
    const h = this.#h;
    const x = h.x, ctx = h.ctx, n = enc.ptrs.length;
    const pieces = prompt.split(MEDIA_MARKER).slice(0, n);
    const rec = this.#media;
    this.#media = null;
    let skip = 0;
    if (cachePrompt && rec) {
      while (skip < n && skip < rec.keys.length && rec.keys[skip] === enc.keys[skip] && rec.pieces[skip] === pieces[skip]) skip++;
      const keep = skip > 0 ? rec.ends[skip - 1] : 0;
      const addr = skip > 0 ? x.wlmjs_seq_tokens(ctx, 0) >>> 0 : 0;
      if (skip > 0 && (x.wlm_seq_n_past(ctx, 0) < keep || !addr ||
          !new Int32Array(x.memory.buffer, addr, keep).every((t, i) => t === rec.tokens[i]))) skip = 0;
    }
    const ends = new Int32Array(Math.max(1, n));
    if (skip > 0) ends.set(rec.ends.subarray(0, skip));
    const endsPtr = h.heapInt32(ends), arr = h.heapInt32(enc.ptrs);
    const slot = x.wlmjs_malloc(4) >>> 0;
    try {
      if (!slot) throw jsError('WLM_ERR_NOMEM', 'cannot allocate 4 bytes');
      let rc = x.wlmjs_generate_begin_media_cached(ctx, this.#vision, promptPtr, utf8(prompt).length, arr, n, paramsPtr,
        skip > 0 ? rec.ends[skip - 1] : 0, skip, endsPtr, slot);
      const kept = new DataView(x.memory.buffer).getInt32(slot, true);
      if (rc === NEED_LOGITS) { // the GPU backend: the prompt C recorded (text and image rows) runs there first
        try {
          await h.supply();
        } catch (e) {
          x.wlm_context_reset(ctx);
          throw e;
        }
        if (h.x !== x || h.ctx !== ctx) throw jsError('WLM_ERR_STATE', 'the engine was freed during generation');
        rc = x.wlmjs_generate_begin_media_finish(ctx, paramsPtr);
      }
      if (rc >= 0 && n > 0) {
        const got = Int32Array.from(new Int32Array(x.memory.buffer, endsPtr, n));
        const addr = x.wlmjs_seq_tokens(ctx, 0) >>> 0;
        if (addr) this.#media = { pieces, keys: enc.keys, ends: got, tokens: Int32Array.from(new Int32Array(x.memory.buffer, addr, got[n - 1])) };
      }
      return { rc, kept };
    } finally {
      x.wlmjs_free(endsPtr);
      x.wlmjs_free(arr);
      if (slot) x.wlmjs_free(slot);
    }
  }

  /**
   * Images (any form js/vision/vision.js decodeImage takes) → their encodings' pointers, in order:
   * decoded, keyed by their pixels, encoded once (wlmjs_image_encode) and kept for the next
   * prompt (the IMAGE_CACHE newest, and those of this call). Returns {ptrs, encoded, reused}.
   */
  async encode(images, signal) {
    const h = this.#h;
    const x = h.x;
    if (!Array.isArray(images)) throw jsError('WLM_ERR_INVALID_ARG', 'images must be an array');
    if (images.length && !this.#vision) {
      throw jsError('WLM_ERR_STATE', 'images need a vision model: load({ model, mmproj }) with the model\'s mmproj file');
    }
    const ptrs = [], keys = [];
    let encoded = 0, reused = 0;
    for (const [i, img] of images.entries()) {
      const d = await decodeImage(img, `images[${i}]`, { signal });
      const key = await imageKey(d);
      if (h.x !== x || !this.#vision) throw jsError('WLM_ERR_STATE', 'the model went away while images were decoded');
      let p = this.#images.get(key);
      if (p) {
        this.#images.delete(key); // the newest again
        reused++;
      } else {
        h.syncPool();
        const rgb = x.wlmjs_malloc(d.rgb.length) >>> 0;
        const slot = x.wlmjs_malloc(4) >>> 0;
        try {
          if (!rgb || !slot) throw jsError('WLM_ERR_NOMEM', `images[${i}]: cannot allocate ${d.rgb.length} bytes`);
          new Uint8Array(x.memory.buffer, rgb, d.rgb.length).set(d.rgb);
          if (this.#gpuVision) {
            try {
              p = await encodeImageOnGpu(x, this.#vision, this.#gpuVision, rgb, d.width, d.height);
            } catch (e) {
              throw Object.assign(e, { message: `images[${i}]: ${e.message}` });
            }
            if (h.x !== x || !this.#vision) {
              x.wlmjs_image_embd_free(p);
              throw jsError('WLM_ERR_STATE', 'the model went away while an image was encoded');
            }
          } else {
            p = x.wlmjs_image_encode(this.#vision, rgb, d.width, d.height, h.pool, h.simd ? 1 : 0, slot) >>> 0;
            const rc = new DataView(x.memory.buffer).getInt32(slot, true);
            if (rc !== 0) throw h.error(rc, `images[${i}]: ${h.readCString(x.wlm_vision_errmsg(this.#vision))}`);
          }
        } finally {
          if (rgb) x.wlmjs_free(rgb);
          if (slot) x.wlmjs_free(slot);
        }
        encoded++;
      }
      this.#images.set(key, p);
      ptrs.push(p);
      keys.push(key);
    }
    // keep the IMAGE_CACHE newest, and every image of this call
    for (const [k, p] of this.#images) {
      if (this.#images.size <= Math.max(IMAGE_CACHE, images.length)) break;
      if (ptrs.includes(p)) continue;
      x.wlmjs_image_embd_free(p);
      this.#images.delete(k);
    }
    return { ptrs, keys, encoded, reused };
  }
}
