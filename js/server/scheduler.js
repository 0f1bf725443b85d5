// scheduler.js — one engine shared by the server's requests (`wasmlm serve --parallel N`): a
// bounded queue of generations decoded together by continuous batching (llama-server's): with
// N > 1 the engine holds one open batch (Engine.openBatch, js/engine/batch.js: one forward pass over
// every live sequence per step) while any request runs; a request joins it at the next step as
// soon as fewer than N sequences decode, and a request whose client disconnects leaves it at
// once (wlm_generate_batch_end: its slot and KV cache freed for the next waiting request). With
// N = 1 each request runs alone through Engine.generate, which keeps the KV cache of the
// previous prompt. The batch is closed when nothing runs or waits, so the engine is idle
// between bursts (and for SIGTERM's drain).
//
// Each generation is handed to chatCompletion() (js/chat/chat_completion.js) through a per-request
// facade engine (facade()): chatCompletion renders the prompt, builds the grammar and reads tool
// calls as it does on a plain Engine, and its generate() call lands here.
//
// A generation with images (chatCompletion's image parts: params.images) joins the batch as a
// text one does (ContinuousBatch.add with images: its media prompt prefilled into its slot
// between two steps, js/engine/batch.js): its images are decoded (decodeImage, js/vision/vision.js:
// data: URLs, http(s) ones where the server allows them) once it holds a slot but before it is
// added, so an http(s) fetch does not hold up the other sequences' steps (the batch's own loop
// would await it; the client's abort reaches it here); the batch then encodes them (or finds
// them in the engine's image cache) as Engine.generate does. Decoding itself (pngjs, jpeg-js)
// is synchronous, a pause of the event loop as on the single path. Decoded images never wait
// in the queue: at most N requests' images are held at once.

import { Channel } from '../engine/channel.js';
import { abortError } from '../runtime/errors.js';
import { decodeImage } from '../vision/vision.js';

/** Thrown by reserve() when `queue` requests already wait: the server answers 503. */
export class QueueFullError extends Error {
  constructor(limit) {
    super(`the server is busy: ${limit} requests are already waiting (--queue)`);
    this.name = 'QueueFullError';
  }
}

/** Options that only a single-sequence generation takes (js/engine/params.js; C ignores them in a batch). */
const SINGLE_ONLY = ['cachePrompt', 'stateCheckpoint', 'contextShift', 'nKeep', 'draft'];
/** A generation with images. */
const withImages = (job) => Array.isArray(job.params.images) && job.params.images.length > 0;

export class Scheduler {
  #engine;
  #parallel;
  #queueLimit;
  #gatherMs;
  #reserved = 0;     // places taken by requests that have not started decoding
  #waiting = [];     // jobs ready to start, in arrival order
  #running = 0;      // jobs in the batch decoding now
  #loop = null;
  #wakeLoop = null;  // wakes the batch loop: a job queued or ended
  #idleWaiters = [];
  /** Totals since start: {batches, sequences, maxBatch, tokens (generated), images (sequences
   *  with images, counted in `sequences` too)}. */
  stats = { batches: 0, sequences: 0, maxBatch: 0, tokens: 0, images: 0 };

  /**
   * @param {object} engine  a loaded Engine (load()'s nSeqMax >= parallel avoids a context rebuild)
   * @param {{parallel?: number, queue?: number, gatherMs?: number}} [options]  parallel: sequences
   *   decoded together (1..64); queue: requests that may wait beyond those (>= 0); gatherMs: how
   *   long the first of a new batch waits for others (default 2 ms)
   */
  constructor(engine, { parallel = 1, queue = 64, gatherMs = 2 } = {}) {
    this.#engine = engine;
    this.#parallel = parallel;
    this.#queueLimit = queue;
    this.#gatherMs = gatherMs;
  }

  /** {waiting, running}: requests admitted and not decoding yet, sequences decoding now. */
  get load() { return { waiting: this.#reserved, running: this.#running }; }

  /**
   * Takes a place in the queue for a request, or throws QueueFullError. The place is given back
   * when its generation starts, or by ticket.release() (a request refused before generating).
   */
  reserve() {
    if (this.#reserved >= this.#queueLimit + Math.max(0, this.#parallel - this.#running)) {
      throw new QueueFullError(this.#queueLimit);
    }
    this.#reserved++;
    let held = true;
    return { release: () => { if (held) { held = false; this.#reserved--; this.#checkIdle(); } } };
  }

  /**
   * The engine as chatCompletion() sees it for one request holding `ticket`: its generate()
   * queues the generation here; lastResult is that generation's result once it has ended.
   */
  facade(ticket) {
    const engine = this.#engine;
    let result = null;
    return {
      get info() { return engine.info; },
      tokenize: (text, options) => engine.tokenize(text, options),
      detokenize: (ids) => engine.detokenize(ids),
      jsonSchemaToGrammar: (schema, options) => engine.jsonSchemaToGrammar(schema, options),
      generate: (prompt, params = {}, { signal } = {}) => this.#submit(ticket, String(prompt), params, signal,
        (r) => { result = r; }),
      get lastResult() { return result; },
    };
  }

  /** Resolves once no request waits or decodes (SIGTERM's drain). */
  idle() {
    if (this.#reserved === 0 && this.#running === 0 && !this.#loop) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #checkIdle() {
    if (this.#reserved === 0 && this.#running === 0 && !this.#loop) {
      for (const w of this.#idleWaiters.splice(0)) w();
    }
  }

  /** Queues one generation; returns the async iterable of its tokens (Engine.generate's). */
  #submit(ticket, prompt, params, signal, setResult) {
    const channel = new Channel();
    const job = { prompt, params, signal, channel, setResult, ticket, started: false, onAbort: null };
    if (signal?.aborted) {
      ticket.release();
      channel.end(abortError('The generation'));
      return channel;
    }
    job.onAbort = () => {
      const i = this.#waiting.indexOf(job);
      if (i >= 0) { // still queued: leave the queue
        this.#waiting.splice(i, 1);
        ticket.release();
        channel.end(abortError('The generation'));
      }
    };
    signal?.addEventListener('abort', job.onAbort, { once: true });
    this.#waiting.push(job);
    this.#pump();
    return channel;
  }

  #pump() {
    this.#wakeLoop?.();
    if (this.#loop) return;
    this.#loop = (async () => {
      if (this.#parallel === 1) {
        while (this.#waiting.length) {
          const job = this.#waiting.shift();
          this.#start(job);
          this.stats.batches++;
          try { await this.#runOne(job); } finally { this.#running = 0; }
        }
        return;
      }
      if (this.#gatherMs > 0 && this.#waiting.length < this.#parallel) {
        await new Promise((r) => setTimeout(r, this.#gatherMs)); // the first step takes them together
      }
      if (!this.#waiting.length) return;
      let batch;
      try {
        batch = await this.#engine.openBatch({ maxSequences: this.#parallel });
      } catch (err) { // the engine cannot batch (no KV cache, freed, …): every waiting job gets it
        for (const j of this.#waiting.splice(0)) { j.ticket.release(); j.signal?.removeEventListener('abort', j.onAbort); j.channel.end(err); }
        return;
      }
      this.stats.batches++;
      const open = new Set();
      try {
        for (;;) {
          while (this.#waiting.length && this.#running < this.#parallel) {
            const job = this.#waiting.shift();
            this.#start(job);
            const run = this.#runInBatch(batch, job).finally(() => {
              open.delete(run);
              this.#running--;
              this.#wakeLoop?.();
            });
            open.add(run);
          }
          if (open.size === 0 && !this.#waiting.length) break;
          await new Promise((resolve) => { this.#wakeLoop = resolve; });
          this.#wakeLoop = null;
        }
      } finally {
        await batch.close();
        await Promise.allSettled([...open]);
      }
    })().finally(() => {
      this.#loop = null;
      if (this.#waiting.length) this.#pump();
      else this.#checkIdle();
    });
  }

  /** A job leaves the queue and starts decoding. */
  #start(job) {
    job.started = true;
    job.ticket.release();
    job.signal?.removeEventListener('abort', job.onAbort);
    this.#running++;
    this.stats.sequences++;
    if (withImages(job)) this.stats.images++;
    this.stats.maxBatch = Math.max(this.stats.maxBatch, this.#running);
  }

  /** One sequence alone: Engine.generate (prompt cache, every option). */
  async #runOne(job) {
    const engine = this.#engine;
    try {
      for await (const tok of engine.generate(job.prompt, job.params, { signal: job.signal })) {
        this.stats.tokens++;
        job.channel.push(tok);
      }
      job.setResult(engine.lastResult);
      job.channel.end();
    } catch (err) {
      job.setResult(engine.lastResult);
      job.channel.end(err);
    }
  }

  /** One sequence in the open batch: it joins at the next step (its images fetched and decoded
   *  first, the batch stepping on during a fetch); its client's abort ends it. */
  async #runInBatch(batch, job) {
    const params = Object.fromEntries(Object.entries(job.params).filter(([k]) => !SINGLE_ONLY.includes(k)));
    let seq;
    try {
      if (withImages(job)) {
        // in order and named as Engine.generate does (images[i]: its first bad one is the error);
        // raw pixels go on, checked again by the batch
        const decoded = [];
        for (const [i, img] of params.images.entries()) {
          const { width, height, rgb } = await decodeImage(img, `images[${i}]`, { signal: job.signal });
          decoded.push({ width, height, data: rgb });
        }
        params.images = decoded;
        if (job.signal?.aborted) throw abortError('The generation');
      }
      seq = batch.add(job.prompt, params, { signal: job.signal });
      for await (const item of seq) {
        const { seq: _slot, stopReason, ...tok } = item;
        if (stopReason) {
          if (tok.text) job.channel.push(tok); // text held back for a stop string
        } else {
          this.stats.tokens++;
          job.channel.push(tok);
        }
      }
      const r = seq.result;
      job.setResult({ stopReason: r.stopReason, text: r.text, nPrompt: r.nPrompt, nCached: 0, nGenerated: r.nGenerated, logprob: r.logprob });
      job.channel.end();
    } catch (err) {
      if (seq) {
        const r = seq.result;
        job.setResult({ stopReason: 'aborted', text: r.text, nPrompt: r.nPrompt, nCached: 0, nGenerated: r.nGenerated, logprob: r.logprob });
      }
      job.channel.end(err);
    }
  }
}

/**
 * Runs `fn` with the engine to itself, one call at a time (the embedding engine: Engine.embed
 * batches the texts of one request itself). Returns fn's promise.
 */
export function serialize() {
  let tail = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => {});
    return run;
  };
}
