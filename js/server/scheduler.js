// scheduler.js — one engine shared by the server's requests (`wasmlm serve --parallel N`): a
// bounded queue of generations, taken N at a time and decoded together in one batch
// (Engine.generateBatch: one forward pass over every live sequence per step, js/batch.js), or
// alone through Engine.generate (which keeps the KV cache of the previous prompt) when only one
// waits. Requests that arrive within `gatherMs` of each other start together.
//
// What the engine cannot do yet, and this file therefore does not: admit a sequence into a
// batch that is already decoding (continuous batching). wlm_generate_batch_begin fixes the
// batch's sequences; a request that arrives while a batch decodes waits until every sequence
// of that batch has ended. Nor can one sequence of a batch be ended alone: a client that
// disconnects from a batch stops receiving at once, but its sequence decodes on (to its stop
// or max_tokens) unless every sequence of the batch has been abandoned, which aborts the
// batch. Both need C entry points (a batch_add(ctx, prompt, params) -> seq and a per-sequence
// abort) that src/wasmlm.h does not have.
//
// Each generation is handed to chatCompletion() (js/chat_completion.js) through a per-request
// facade engine (facade()): chatCompletion renders the prompt, builds the grammar and reads tool
// calls as it does on a plain Engine, and its generate() call lands here.

import { abortError, jsError } from '../errors.js';

/** Thrown by reserve() when `queue` requests already wait: the server answers 503. */
export class QueueFullError extends Error {
  constructor(limit) {
    super(`the server is busy: ${limit} requests are already waiting (--queue)`);
    this.name = 'QueueFullError';
  }
}

/** Options that only a single-sequence generation takes (js/params.js; C ignores them in a batch). */
const SINGLE_ONLY = ['cachePrompt', 'stateCheckpoint', 'contextShift', 'nKeep', 'draft'];

/** A push-to-pull channel: the scheduler pushes a job's tokens, its request pulls them. */
class Channel {
  #items = [];
  #wake = null;
  #done = false;
  #error = null;
  push(item) { this.#items.push(item); this.#notify(); }
  end(error = null) { if (!this.#done) { this.#done = true; this.#error = error; this.#notify(); } }
  get ended() { return this.#done; }
  #notify() { const w = this.#wake; this.#wake = null; w?.(); }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#items.length) { yield this.#items.shift(); continue; }
      if (this.#done) { if (this.#error) throw this.#error; return; }
      await new Promise((resolve) => { this.#wake = resolve; });
    }
  }
}

export class Scheduler {
  #engine;
  #parallel;
  #queueLimit;
  #gatherMs;
  #reserved = 0;     // places taken by requests that have not started decoding
  #waiting = [];     // jobs ready to start, in arrival order
  #running = 0;      // jobs in the batch decoding now
  #loop = null;
  #idleWaiters = [];
  /** Totals since start: {batches, sequences, maxBatch, tokens (generated)}. */
  stats = { batches: 0, sequences: 0, maxBatch: 0, tokens: 0 };

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
    if (this.#loop) return;
    this.#loop = (async () => {
      while (this.#waiting.length) {
        if (this.#gatherMs > 0 && this.#waiting.length < this.#parallel) {
          await new Promise((r) => setTimeout(r, this.#gatherMs));
        }
        const jobs = this.#waiting.splice(0, this.#parallel);
        if (jobs.length === 0) continue;
        for (const j of jobs) { j.started = true; j.ticket.release(); }
        this.#running = jobs.length;
        this.stats.batches++;
        this.stats.sequences += jobs.length;
        this.stats.maxBatch = Math.max(this.stats.maxBatch, jobs.length);
        try {
          if (jobs.length === 1) await this.#runOne(jobs[0]);
          else await this.#runBatch(jobs);
        } catch (err) { // the engine failed outside any one job: every job still open gets it
          for (const j of jobs) j.channel.end(err);
        } finally {
          for (const j of jobs) j.signal?.removeEventListener('abort', j.onAbort);
          this.#running = 0;
        }
      }
    })().finally(() => {
      this.#loop = null;
      if (this.#waiting.length) this.#pump();
      else this.#checkIdle();
    });
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

  /** Several sequences in one Engine.generateBatch: one forward pass per step for all. */
  async #runBatch(jobs) {
    const engine = this.#engine;
    const ctl = new AbortController();
    const live = new Set(jobs);
    const state = jobs.map(() => ({ text: '', nGenerated: 0, logprob: 0, nPrompt: 0 }));
    const leave = (job) => {
      if (!live.delete(job)) return;
      job.channel.end(abortError('The generation'));
      if (live.size === 0) ctl.abort(); // nobody listens any more: end the batch
    };
    const listeners = jobs.map((job) => {
      const f = () => leave(job);
      if (job.signal?.aborted) f();
      else job.signal?.addEventListener('abort', f, { once: true });
      return f;
    });
    let begun = false;
    const params = jobs.map((j) => Object.fromEntries(Object.entries(j.params).filter(([k]) => !SINGLE_ONLY.includes(k))));
    try {
      // Prompt lengths for usage (the batch reports them only when all have ended).
      for (const [i, j] of jobs.entries()) {
        state[i].nPrompt = (await engine.tokenize(j.prompt, { bos: j.params.addBos ?? true, parseSpecial: j.params.parseSpecial ?? false })).length;
      }
      if (live.size === 0) return;
      for await (const item of engine.generateBatch(jobs.map((j) => j.prompt), params, { signal: ctl.signal })) {
        begun = true;
        const job = jobs[item.seq];
        if (!item.stopReason) this.stats.tokens++;
        if (!live.has(job)) continue;
        const s = state[item.seq];
        const { seq, stopReason, ...tok } = item;
        if (stopReason) {
          if (tok.text) { s.text += tok.text; job.channel.push(tok); } // text held back for a stop string
          live.delete(job);
          job.setResult({ stopReason, text: s.text, nPrompt: s.nPrompt, nCached: 0, nGenerated: s.nGenerated, logprob: s.logprob });
          job.channel.end();
        } else {
          s.text += tok.text;
          s.nGenerated++;
          s.logprob += tok.logprob ?? 0;
          job.channel.push(tok);
        }
      }
    } catch (err) {
      if (!begun && err?.name !== 'AbortError') {
        // refused at begin (one prompt past the context, a grammar the engine rejects, …): C
        // names only the first offending sequence, so each request runs alone and gets its own
        // answer rather than another's error
        jobs.forEach((j, i) => j.signal?.removeEventListener('abort', listeners[i]));
        for (const job of [...live]) {
          live.delete(job);
          await this.#runOne(job);
        }
      } else if (!(err?.name === 'AbortError' && live.size === 0)) {
        for (const job of live) job.channel.end(err);
      }
    } finally {
      jobs.forEach((j, i) => j.signal?.removeEventListener('abort', listeners[i]));
      for (const job of live) { // should not happen: the batch ended without ending this sequence
        job.channel.end(jsError('WLM_ERR_STATE', 'the batch ended before this sequence did'));
      }
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
