// server.js — `wasmlm serve`: llama-server's OpenAI-compatible HTTP endpoints over node:http.
//   POST /v1/chat/completions  chatCompletion() (js/chat/chat_completion.js): tools, response_format,
//                              stream (server-sent events, then `data: [DONE]`)
//   POST /v1/completions       raw text completion (prompt → text)
//   POST /v1/embeddings        Engine.embed, with an embedding model (the main one or --embedding-model)
//   GET  /v1/models            the served models (capabilities: 'multimodal' with an mmproj)
//   GET  /props                llama-server's: the model, its context, modalities {vision, audio}
//   GET  /health               {status: 'ok'} (no API key needed)
// Images (OpenAI's image_url parts) need the engine loaded with an mmproj (`--mmproj`): data:
// URLs are decoded; http(s) URLs are refused (400 naming remoteImages / --allow-remote-images)
// unless the server was started to fetch them, since the server would fetch any address a
// client names (its own network included); other schemes are refused.
// Generations go through one Scheduler (js/server/scheduler.js): at most `parallel` decoded
// together in one batch, at most `queue` more waiting (503 beyond). Every refused request gets
// OpenAI's error JSON ({error: {message, type, param, code}}): 400 naming the bad field, 401
// without the API key, 404, 405, 413 past maxBody, 503 when the queue is full or the server
// drains. A client that disconnects aborts its generation. close() drains: no new connections,
// requests in progress and queued finish (or are aborted after drainMs), then the engines are freed.

import http from 'node:http';
import { timingSafeEqual, createHash, randomBytes } from 'node:crypto';
import { chatCompletion } from '../chat/chat_completion.js';
import { Scheduler, QueueFullError, serialize } from './scheduler.js';
import { HttpError, bad, errorBody, checkCompletion, checkEmbedding } from './requests.js';
import { checkOptions } from '../options.js';
import { imagePart } from '../vision/vision.js';

const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8' };

/** The HTTP error for anything a handler threw. */
function httpError(err) {
  if (err instanceof HttpError) return err;
  if (err instanceof QueueFullError) return new HttpError(503, err.message, { type: 'unavailable_error', code: 'queue_full' });
  if (err?.name === 'AbortError') return new HttpError(499, 'the request was aborted', { code: 'aborted' });
  if (err?.name === 'WasmlmError') {
    if (err.code === 'WLM_ERR_INVALID_ARG' || err.code === 'WLM_ERR_UNSUPPORTED') return bad(err.message);
    if (err.code === 'WLM_ERR_CONTEXT_FULL') return new HttpError(400, err.message, { code: 'context_length_exceeded', param: 'messages' });
  }
  return new HttpError(500, `internal error: ${err?.message ?? err}`);
}

function sendJson(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...JSON_HEADERS, 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res, err, headers = {}) {
  const e = httpError(err);
  if (e.status === 499) { res.destroy(); return; }
  sendJson(res, e.status, errorBody(e), headers);
}

/** The request body as JSON, at most maxBody bytes (413 beyond, 400 for bad JSON). */
function readJson(req, maxBody) {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (declared > maxBody) {
      reject(new HttpError(413, `the request body is ${declared} bytes; at most ${maxBody} are accepted (--max-body)`, { code: 'request_too_large' }));
      return;
    }
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > maxBody) {
        reject(new HttpError(413, `the request body passes ${maxBody} bytes (--max-body)`, { code: 'request_too_large' }));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (size > maxBody) return;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') { reject(bad('the request body is empty: a JSON object is expected', null)); return; }
      try {
        resolve(JSON.parse(text));
      } catch (e) {
        reject(bad(`the request body is not valid JSON: ${e.message}`, null));
      }
    });
    req.on('error', reject);
  });
}

function randomId(prefix) { return `${prefix}-${randomBytes(12).toString('hex')}`; }

/** Server-sent events on `res`: write(obj) sends `data: JSON`, done() `data: [DONE]` and ends. */
function sse(res) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive',
    'X-Accel-Buffering': 'no' });
  res.flushHeaders();
  return {
    write: (obj) => { if (!res.destroyed) res.write(`data: ${JSON.stringify(obj)}\n\n`); },
    done: () => { if (!res.destroyed) res.end('data: [DONE]\n\n'); },
    fail: (err) => { // after the headers: an error event (llama-server's form), then the end
      const e = httpError(err);
      if (e.status === 499 || res.destroyed) { res.destroy(); return; }
      res.end(`data: ${JSON.stringify(errorBody(e))}\n\n`);
    },
  };
}

/**
 * Creates the server (not listening yet).
 * @param {object} o
 * @param {object|null} o.engine  a loaded Engine that generates text, or null
 * @param {object|null} [o.embedEngine]  a loaded Engine with an embedding model, or null
 * @param {string} [o.modelId]  the id /v1/models lists and responses carry by default
 * @param {string} [o.embedModelId]
 * @param {string} [o.apiKey]  required as `Authorization: Bearer <key>` on every route but /health
 * @param {number} [o.parallel]  sequences decoded together (default 1)
 * @param {number} [o.queue]  requests that may wait beyond those (default 64)
 * @param {number} [o.maxBody]  bytes of a request body at most (default 1 MiB)
 * @param {number} [o.drainMs]  close(): how long requests in progress may take before they are aborted (default 30 s)
 * @param {boolean} [o.remoteImages]  fetch http(s) image URLs (default false: 400)
 * @returns {{server: http.Server, scheduler: Scheduler|null, listen: (port?: number, host?: string) => Promise<string>, close: () => Promise<void>}}
 */
export function createServer(options = {}) {
  const { engine = null, embedEngine = null, modelId = 'wasmlm', embedModelId = null, apiKey = null,
    parallel = 1, queue = 64, maxBody = 1 << 20, drainMs = 30_000, gatherMs = 2, remoteImages = false } = checkOptions('createServer()', options, 'ServerOptions') ?? {};
  const scheduler = engine ? new Scheduler(engine, { parallel, queue, gatherMs }) : null;
  const embedQueue = serialize();
  let embedWaiting = 0;
  const created = Math.floor(Date.now() / 1000);
  const keyHash = apiKey ? createHash('sha256').update(apiKey).digest() : null;
  let draining = false;
  const open = new Set(); // AbortControllers of the requests in progress

  const authorized = (req) => {
    if (!keyHash) return true;
    const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    if (!m) return false;
    return timingSafeEqual(createHash('sha256').update(m[1].trim()).digest(), keyHash);
  };

  const needEngine = () => {
    if (!scheduler) throw bad('this server has no text-generation model (it serves an embedding model: use /v1/embeddings)', 'model');
  };

  /** The image parts of a chat request checked before anything runs: a vision model loaded,
   *  data: URLs (http(s) with remoteImages). Malformed parts are chatCompletion's to refuse. */
  const checkImages = (messages) => {
    if (!Array.isArray(messages)) return;
    messages.forEach((m, i) => {
      if (!Array.isArray(m?.content)) return;
      m.content.forEach((p, j) => {
        if (p?.type !== 'image_url' && p?.type !== 'image') return;
        const where = `messages[${i}].content[${j}]`;
        if (!engine.info?.vision) {
          throw bad(`${where}: this server's model reads no images: start it with the model's mmproj (wasmlm serve MODEL --mmproj FILE)`, 'messages');
        }
        let url;
        try {
          url = imagePart(p, where);
        } catch {
          return; // chatCompletion names what is wrong
        }
        if (typeof url !== 'string') return;
        if (/^https?:/i.test(url) && !remoteImages) {
          throw bad(`${where}: an http(s) image URL is not fetched by this server (it would fetch any address a client names): ` +
            'send the image as a data: URL, or start the server with --allow-remote-images (createServer\'s remoteImages: true)', 'messages');
        }
        if (!/^(data|https?):/i.test(url)) throw bad(`${where}: an image must be a data: URL${remoteImages ? ' or an http(s) URL' : ''}`, 'messages');
      });
    });
  };

  async function chat(req, res, body, signal) {
    needEngine();
    checkImages(body.messages);
    const ticket = scheduler.reserve();
    try {
      const out = await chatCompletion(scheduler.facade(ticket), { model: modelId, ...body }, { signal });
      if (!body?.stream) { sendJson(res, 200, out); return; }
      // The role chunk, then the first token's: an engine refusal at the start (a prompt past
      // the context, …) still gets its status code instead of an error event after a 200.
      const it = out[Symbol.asyncIterator]();
      const head = [await it.next()];
      if (!head[0].done) head.push(await it.next());
      const events = sse(res);
      try {
        for (const step of head) if (!step.done) events.write(step.value);
        if (!head.at(-1).done) for (let step = await it.next(); !step.done; step = await it.next()) events.write(step.value);
        events.done();
      } catch (err) {
        events.fail(err);
      }
    } finally {
      ticket.release();
    }
  }

  async function completion(req, res, body, signal) {
    needEngine();
    const r = checkCompletion(body);
    const ticket = scheduler.reserve();
    try {
      const facade = scheduler.facade(ticket);
      const id = randomId('cmpl');
      const now = Math.floor(Date.now() / 1000);
      const model = r.model ?? modelId;
      const finish = (last) => (last?.stopReason === 'max_tokens' || last?.stopReason === 'context_full' ? 'length' : 'stop');
      const usage = (last) => ({ prompt_tokens: last?.nPrompt ?? 0, completion_tokens: last?.nGenerated ?? 0,
        total_tokens: (last?.nPrompt ?? 0) + (last?.nGenerated ?? 0) });
      const tokens = facade.generate(r.prompt, r.gen, { signal });
      if (!r.stream) {
        let text = r.echo ? r.prompt : '';
        for await (const tok of tokens) text += tok.text;
        const last = facade.lastResult;
        sendJson(res, 200, { id, object: 'text_completion', created: now, model,
          choices: [{ text, index: 0, logprobs: null, finish_reason: finish(last) }], usage: usage(last) });
        return;
      }
      const it = tokens[Symbol.asyncIterator]();
      const first = await it.next(); // errors before the first token still get a status
      const events = sse(res);
      const chunk = (text, reason = null) => ({ id, object: 'text_completion', created: now, model,
        choices: [{ text, index: 0, logprobs: null, finish_reason: reason }], ...(r.includeUsage ? { usage: null } : {}) });
      try {
        if (r.echo) events.write(chunk(r.prompt));
        for (let step = first; !step.done; step = await it.next()) if (step.value.text) events.write(chunk(step.value.text));
        const last = facade.lastResult;
        events.write(chunk('', finish(last)));
        if (r.includeUsage) events.write({ id, object: 'text_completion', created: now, model, choices: [], usage: usage(last) });
        events.done();
      } catch (err) {
        events.fail(err);
      }
    } finally {
      ticket.release();
    }
  }

  async function embeddings(req, res, body, signal) {
    if (!embedEngine) {
      throw bad('this server has no embedding model: start it with an embedding model, or with --embedding-model FILE', 'model');
    }
    const r = checkEmbedding(body, embedEngine.info.embeddingLength);
    if (embedWaiting >= queue) throw new QueueFullError(queue);
    embedWaiting++;
    let vectors, tokens = 0;
    try {
      await embedQueue(async () => {
        if (signal.aborted) return;
        for (const s of r.input) tokens += (await embedEngine.tokenize(s, { bos: true })).length;
        vectors = await embedEngine.embed(r.input, { signal });
      });
    } finally {
      embedWaiting--;
    }
    if (!vectors) return;
    const data = vectors.map((v, index) => ({ object: 'embedding', index,
      embedding: r.base64 ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : Array.from(v) }));
    sendJson(res, 200, { object: 'list', data, model: r.model ?? embedModelId ?? modelId, usage: { prompt_tokens: tokens, total_tokens: tokens } });
  }

  const vision = () => !!engine?.info?.vision;
  const models = () => ({ object: 'list', data: [
    ...(engine ? [{ id: modelId, object: 'model', created, owned_by: 'wasmlm',
      capabilities: ['completion', ...(vision() ? ['multimodal'] : [])] }] : []),
    ...(embedEngine && embedEngine !== engine ? [{ id: embedModelId ?? modelId, object: 'model', created, owned_by: 'wasmlm' }] : []),
  ] });

  const POST = { '/v1/chat/completions': chat, '/chat/completions': chat, '/v1/completions': completion, '/completions': completion,
    '/v1/embeddings': embeddings, '/embeddings': embeddings };

  async function handle(req, res) {
    let path;
    try {
      path = new URL(req.url, 'http://localhost').pathname;
    } catch {
      return sendError(res, new HttpError(400, 'bad request URL'));
    }
    if (path === '/health' || path === '/v1/health') {
      if (req.method !== 'GET') return sendError(res, new HttpError(405, `${req.method} ${path}: use GET`), { Allow: 'GET' });
      return sendJson(res, draining ? 503 : 200, { status: draining ? 'draining' : 'ok',
        ...(scheduler ? { ...scheduler.load, batches: scheduler.stats.batches, sequences: scheduler.stats.sequences, max_batch: scheduler.stats.maxBatch,
          tokens: scheduler.stats.tokens, images: scheduler.stats.images } : {}) });
    }
    if (!authorized(req)) {
      return sendError(res, new HttpError(401, 'Incorrect or missing API key: send it as "Authorization: Bearer <key>"',
        { code: 'invalid_api_key' }), { 'WWW-Authenticate': 'Bearer' });
    }
    if (draining) return sendError(res, new HttpError(503, 'the server is shutting down', { type: 'unavailable_error' }), { Connection: 'close' });
    if (path === '/v1/models' || path === '/models') {
      if (req.method !== 'GET') return sendError(res, new HttpError(405, `${req.method} ${path}: use GET`), { Allow: 'GET' });
      return sendJson(res, 200, models());
    }
    if (path === '/props' || path === '/v1/props') {
      if (req.method !== 'GET') return sendError(res, new HttpError(405, `${req.method} ${path}: use GET`), { Allow: 'GET' });
      const info = (engine ?? embedEngine)?.info;
      return sendJson(res, 200, { model_alias: engine ? modelId : embedModelId ?? modelId, model_path: engine ? modelId : embedModelId ?? modelId,
        n_ctx: info?.nCtx ?? null, total_slots: parallel, modalities: { vision: vision(), audio: false },
        vision: info?.vision ? { projector: info.vision.projector, image_size: info.vision.imageSize } : null, remote_images: remoteImages });
    }
    const handler = POST[path];
    if (!handler) return sendError(res, new HttpError(404, `no such endpoint: ${req.method} ${path}`, { code: 'not_found' }));
    if (req.method !== 'POST') return sendError(res, new HttpError(405, `${req.method} ${path}: use POST`), { Allow: 'POST' });
    const ac = new AbortController();
    open.add(ac);
    res.on('close', () => { open.delete(ac); if (!res.writableFinished) ac.abort(); });
    try {
      const body = await readJson(req, maxBody);
      if (body === null || typeof body !== 'object' || Array.isArray(body)) throw bad('the request body must be a JSON object', null);
      await handler(req, res, body, ac.signal);
    } catch (err) {
      const e = httpError(err);
      sendError(res, e, e.status === 413 ? { Connection: 'close' } : {});
    }
  }

  const server = http.createServer({ requestTimeout: 60_000, headersTimeout: 30_000 }, (req, res) => {
    handle(req, res).catch((err) => sendError(res, err));
  });
  server.keepAliveTimeout = 5_000;

  return {
    server,
    scheduler,
    /** Listens; resolves with the base URL (http://host:port). */
    listen: (port = 8080, host = '127.0.0.1') => new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        const a = server.address();
        resolve(`http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`);
      });
    }),
    /** Drains: refuses new requests (503), lets those in progress and queued finish (at most
     *  drainMs, then aborts them), closes the connections. */
    close: async () => {
      draining = true;
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeIdleConnections();
      const deadline = Date.now() + drainMs;
      while (open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const ac of open) ac.abort(); // past drainMs: the rest are aborted
      await scheduler?.idle();
      server.closeAllConnections();
      await closed;
    },
  };
}
