// worker.js — the module Web Worker behind createWorkerEngine(): hosts one in-thread engine
// (createEngine from ./wasmlm.js) and answers the requests of js/protocol.js. Loading streams
// the model into this worker's wasm heap (progress messages), generation posts one 'token'
// message per token and yields between tokens so an 'abort' request is seen within one token.
// It keeps no state besides the engine and the AbortControllers of running requests.

import { createEngine } from './wasmlm.js';
import { PROTOCOL_VERSION, Req, Reply, serializeError } from './protocol.js';

let enginePromise = null;
const running = new Map(); // request id → AbortController (load, generate)

/** Posts a reply to the client. */
function post(msg, transfer = []) {
  self.postMessage(msg, transfer);
}

/** The engine created by 'init'; an error before it. */
async function engine() {
  if (!enginePromise) throw new Error('wasmlm worker: no engine (the client must send init first)');
  return enginePromise;
}

/** Runs `fn(signal)` with an AbortController registered under request `id`. */
async function abortable(id, fn) {
  const controller = new AbortController();
  running.set(id, controller);
  try {
    return await fn(controller.signal);
  } finally {
    running.delete(id);
  }
}

/** Answers one request: posts its replies, ending with 'result' (errors: see the listener). */
async function handle(msg) {
  const { id, type } = msg;
  let value;
  let transfer = [];
  switch (type) {
    case Req.INIT: {
      enginePromise ??= createEngine(msg.options ?? {});
      await enginePromise;
      value = { protocol: PROTOCOL_VERSION };
      break;
    }
    case Req.LOAD: {
      const e = await engine();
      value = await abortable(id, (signal) => e.load({
        model: msg.model,
        tokenizer: msg.tokenizer,
        nCtx: msg.nCtx,
        kvCache: msg.kvCache,
        signal,
        onProgress: (progress) => post({ id, type: Reply.PROGRESS, progress }),
      }));
      break;
    }
    case Req.GENERATE: {
      const e = await engine();
      const before = e.lastResult;
      try {
        value = await abortable(id, async (signal) => {
          for await (const token of e.generate(msg.prompt, msg.params, { signal })) {
            post({ id, type: Reply.TOKEN, token });
          }
          return e.lastResult;
        });
      } catch (err) {
        // An aborted generation still has a LastResult (stopReason 'aborted'): send it along.
        const lastResult = e.lastResult !== before ? e.lastResult : undefined;
        post({ id, type: Reply.ERROR, error: serializeError(err), lastResult });
        return;
      }
      break;
    }
    case Req.ABORT: {
      const controller = running.get(msg.target);
      controller?.abort();
      value = controller !== undefined;
      break;
    }
    case Req.TOKENIZE: {
      value = await (await engine()).tokenize(msg.text, msg.options);
      transfer = [value.buffer];
      break;
    }
    case Req.DETOKENIZE: {
      value = await (await engine()).detokenize(msg.ids);
      break;
    }
    case Req.FREE: {
      if (enginePromise) await (await enginePromise).free();
      value = true;
      break;
    }
    default:
      throw new Error(`wasmlm worker: unknown request type ${JSON.stringify(type)}`);
  }
  post({ id, type: Reply.RESULT, value }, transfer);
}

self.addEventListener('message', (event) => {
  const msg = event.data;
  if (!msg || typeof msg.id !== 'number') return;
  handle(msg).catch((err) => post({ id: msg.id, type: Reply.ERROR, error: serializeError(err) }));
});
