// channel.js — a push-to-pull queue: a producer push()es items and end()s it (with an error or
// none); one consumer reads them with for await. Used by continuous batching (js/engine/batch.js: a
// sequence's tokens) and by the server's scheduler (js/server/scheduler.js: a request's tokens).

/** A push-to-pull queue of items for one reader. */
export class Channel {
  #items = [];
  #wake = null;
  #done = false;
  #error = null;
  /** Queues an item for the reader. */
  push(item) { this.#items.push(item); this.#notify(); }
  /** Ends the channel: the reader gets the queued items, then `error` thrown if given. */
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
