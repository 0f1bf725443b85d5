// worker.js — the module Web Worker behind createWorkerEngine(): hosts one in-thread engine
// (js/engine/engine.js, on the wasm module the page compiled when it is the one the worker would pick)
// and answers the requests of js/worker/protocol.js. Loading streams the model into this worker's wasm
// heap (progress messages), generation posts one 'token' message per token (batches too; beam
// search one 'step' message per step) and yields between steps so an 'abort' request is seen
// within one step.
// It keeps no state besides the engine, the AbortControllers of running requests, and the error
// listeners of the helper threads the page starts for it (js/worker/protocol.js Helper).

import { startEngine } from '../engine/engine.js';
import { Helper, PROTOCOL_VERSION, Req, Reply, serializeError } from './protocol.js';
import { SPAWN_HELPER } from '../runtime/threads.js';
// What engine.js imports, named here too so the worker requests its module graph at once.
import { jsError } from '../runtime/errors.js';
import '../engine/params.js';
import '../runtime/platform.js';
import '../models/source.js';
import '../models/split.js';
import '../runtime/memory64.js';
import '../runtime/threads.js';
import '../runtime/wasm.js';

let enginePromise = null;
let warmup = null; // what Engine.warmUp() returned after 'init' (null: not run)
const running = new Map(); // request id → AbortController (load, generate)
const batches = new Map(); // open_batch request id → its ContinuousBatch (Engine.openBatch)
const helperErrors = new Map(); // key of a helper the client starts → its error listener
let helperKeys = 0;

/** Posts a reply to the client. */
function post(msg, transfer = []) {
  self.postMessage(msg, transfer);
}

/**
 * A helper thread (js/runtime/thread.js at `url`) that the client starts (js/worker/protocol.js Helper), shaped
 * as js/runtime/threads.js's helpers: the engine talks to it through a MessageChannel whose other end
 * the client hands it.
 */
function helperFromClient(url) {
  const key = ++helperKeys;
  const { port1, port2 } = new MessageChannel();
  post({ type: Helper.START, key, url: String(url), port: port2 }, [port2]);
  return {
    post: (m) => port1.postMessage(m),
    onMessage: (fn) => {
      port1.addEventListener('message', (e) => fn(e.data));
      port1.start();
    },
    onError: (fn) => helperErrors.set(key, fn),
    terminate: () => {
      helperErrors.delete(key);
      port1.close();
      post({ type: Helper.STOP, key });
    },
  };
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
      const first = !enginePromise;
      if (!enginePromise) {
        const { helpersFromClient = false, ...options } = msg.options ?? {};
        if (helpersFromClient) options[SPAWN_HELPER] = helperFromClient;
        enginePromise = startEngine(options, msg.compiled ?? null);
      }
      const e = await enginePromise;
      post({ id, type: Reply.RESULT, value: { protocol: PROTOCOL_VERSION, threads: e.threads } });
      // Compile ahead while the page downloads the model (Engine.warmUp; opt-in, see
      // WorkerEngineOptions.warmup): a load request that arrives meanwhile waits for it.
      if (first && msg.options?.warmup === true) {
        try {
          warmup = await e.warmUp();
        } catch (err) {
          warmup = { tokens: 0, ms: 0, error: String(err?.message ?? err) };
        }
      }
      return;
    }
    case Req.LOAD: {
      const e = await engine();
      value = await abortable(id, (signal) => e.load({
        model: msg.model,
        tokenizer: msg.tokenizer,
        mmproj: msg.mmproj,
        nCtx: msg.nCtx,
        kvCache: msg.kvCache,
        nSeqMax: msg.nSeqMax,
        kvType: msg.kvType,
        backend: msg.backend,
        signal,
        onProgress: (progress) => post({ id, type: Reply.PROGRESS, progress }),
      }));
      break;
    }
    case Req.LOAD_DRAFT: {
      const e = await engine();
      value = await abortable(id, (signal) => e.loadDraft(msg.options == null ? null : {
        ...msg.options, signal, onProgress: (progress) => post({ id, type: Reply.PROGRESS, progress }),
      }));
      break;
    }
    case Req.GENERATE:
    case Req.GENERATE_BATCH: {
      const e = await engine();
      const batch = type === Req.GENERATE_BATCH;
      const key = batch ? 'lastBatchResult' : 'lastResult';
      const before = e[key];
      try {
        value = await abortable(id, async (signal) => {
          const tokens = batch ? e.generateBatch(msg.prompts, msg.params, { signal })
            : e.generate(msg.prompt, msg.params, { signal });
          for await (const token of tokens) post({ id, type: Reply.TOKEN, token });
          return e[key];
        });
      } catch (err) {
        // An aborted generation still has its summary (stopReason 'aborted'): send it along.
        post({ id, type: Reply.ERROR, error: serializeError(err), [key]: e[key] !== before ? e[key] : undefined });
        return;
      }
      break;
    }
    case Req.OPEN_BATCH: {
      const e = await engine();
      const b = await e.openBatch({ maxSequences: msg.options?.maxSequences });
      batches.set(id, b);
      value = { batch: id, maxSequences: b.maxSequences };
      break;
    }
    case Req.BATCH_ADD: {
      const b = batches.get(msg.batch);
      if (!b) throw jsError('WLM_ERR_STATE', 'the batch is closed');
      const snap = () => ({ live: b.live, waiting: b.waiting, stats: { ...b.stats } });
      value = await abortable(id, async (signal) => {
        const seq = b.add(msg.prompt, msg.params, { signal });
        for await (const token of seq) post({ id, type: Reply.TOKEN, token, nPrompt: seq.result.nPrompt, ...snap() });
        return { result: seq.result, ...snap() };
      });
      break;
    }
    case Req.BATCH_CLOSE: {
      const b = batches.get(msg.batch);
      batches.delete(msg.batch);
      await b?.close();
      value = true;
      break;
    }
    case Req.BEAM_SEARCH: {
      const e = await engine();
      const before = e.lastBeamResult;
      try {
        value = await abortable(id, (signal) => e.beamSearch(msg.prompt, msg.params, {
          signal, onStep: (step) => post({ id, type: Reply.STEP, step }),
        }));
      } catch (err) {
        // An aborted search keeps its beams so far in lastBeamResult: send it along.
        const lastBeamResult = e.lastBeamResult !== before ? e.lastBeamResult : undefined;
        post({ id, type: Reply.ERROR, error: serializeError(err), lastBeamResult });
        return;
      }
      break;
    }
    case Req.KV_STATS: {
      value = await (await engine()).kvStats();
      break;
    }
    case Req.PREVIEW: {
      value = await (await engine()).previewDistribution(msg.params);
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
    case Req.IMAGE_TOKENS: {
      const e = await engine();
      value = await abortable(id, (signal) => e.imageTokens(msg.image, { signal }));
      break;
    }
    case Req.DETOKENIZE: {
      value = await (await engine()).detokenize(msg.ids);
      break;
    }
    case Req.JSON_SCHEMA_TO_GRAMMAR: {
      value = await (await engine()).jsonSchemaToGrammar(msg.schema, msg.options);
      break;
    }
    case Req.EMBED: {
      const e = await engine();
      value = await abortable(id, (signal) => e.embed(msg.texts, { ...msg.options, signal }));
      transfer = value.map((v) => v.buffer);
      break;
    }
    case Req.RERANK: {
      const e = await engine();
      value = await abortable(id, (signal) => e.rerank(msg.query, msg.documents, { ...msg.options, signal }));
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
  // A load's reply also says what the warm-up did (WorkerEngine.warmup).
  post({ id, type: Reply.RESULT, value, ...(type === Req.LOAD ? { warmup } : {}) }, transfer);
}

self.addEventListener('message', (event) => {
  const msg = event.data;
  if (msg?.type === Helper.ERROR) {
    helperErrors.get(msg.key)?.(new Error(msg.message));
    return;
  }
  if (!msg || typeof msg.id !== 'number') return;
  handle(msg).catch((err) => post({ id: msg.id, type: Reply.ERROR, error: serializeError(err) }));
});
