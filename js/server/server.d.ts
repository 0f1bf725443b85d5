// server.d.ts — the types of `wasmlm/server` (js/server/server.js), what `wasmlm serve` runs:
// llama-server's OpenAI-compatible endpoints over node:http (Node only).

import type { Server } from 'node:http';
import type { Engine } from '../wasmlm.js';

/** createServer()'s options. Unknown keys are rejected: WasmlmError WLM_ERR_INVALID_ARG naming
 *  the key and the known ones (js/options.js). */
export interface ServerOptions {
  /** A loaded Engine with a text-generation model (load it with nSeqMax >= parallel), or null. */
  engine?: Engine | null;
  /** A loaded Engine with an embedding model for /v1/embeddings, or null (then 400). */
  embedEngine?: Engine | null;
  /** The id /v1/models lists and responses carry when the request names none (default 'wasmlm'). */
  modelId?: string;
  embedModelId?: string | null;
  /** Required as `Authorization: Bearer <key>` on every route but /health (401 without it). */
  apiKey?: string | null;
  /** Requests decoded together (continuous batching: one joins the running batch at its next
   *  step, one whose client disconnects leaves it at once), 1..64 (default 1). */
  parallel?: number;
  /** Requests that may wait beyond those being decoded (default 64); more get 503. */
  queue?: number;
  /** Largest request body in bytes (default 1 MiB); larger get 413. */
  maxBody?: number;
  /** close(): how long requests in progress and queued may still run, ms (default 30000). */
  drainMs?: number;
  /** How long the first request of a new batch waits for others to join it, ms (default 2). */
  gatherMs?: number;
  /** Fetch http(s) image URLs of image_url parts, as llama-server does (default false: such a
   *  part gets 400 naming this option, since the server would fetch any address a client
   *  names). data: URLs are always decoded; images need `engine` loaded with an mmproj. */
  remoteImages?: boolean;
}

export interface WasmlmServer {
  server: Server;
  /** Listens (default 8080 on 127.0.0.1; port 0: any free one); resolves with 'http://host:port'. */
  listen(port?: number, host?: string): Promise<string>;
  /**
   * Drains and stops: new requests get 503 and no new connections are accepted; requests in
   * progress and queued finish (aborted after drainMs); then the connections close. The engines
   * are the caller's to free.
   */
  close(): Promise<void>;
}

/**
 * The server, not yet listening. Endpoints: POST /v1/chat/completions (Engine.chatCompletion's
 * request; stream: server-sent events ending with `data: [DONE]`), POST /v1/completions
 * (prompt: one string; max_tokens default 16; echo; stream), POST /v1/embeddings (input: a
 * string or up to 2048 strings; encoding_format 'float' or 'base64'), GET /v1/models, GET
 * /health ({status: 'ok' | 'draining', waiting, running, batches, sequences, max_batch,
 * tokens: generated since start, images: sequences with images since start}; no key
 * needed), GET /props (llama-server's: model_alias, n_ctx, total_slots, modalities {vision,
 * audio}). /v1/models lists the model's capabilities: 'completion', and 'multimodal' when its
 * engine has an mmproj. Chat messages may hold image parts ({type: 'image_url', image_url:
 * {url: 'data:image/png;base64,…'}}) when the engine was loaded with an mmproj (else 400); a
 * request with images joins the running batch as a text one does (its images decoded once it
 * has a slot, then encoded between two steps). The same paths without /v1 too. Errors are OpenAI's JSON {error: {message, type,
 * param, code}}: 400 for a malformed body (param names the field), 401, 404, 405, 413, 503
 * (queue full: code 'queue_full'; draining), 500. A client that disconnects aborts its
 * generation (in a batch: its sequence leaves at the next step, its slot freed).
 */
export function createServer(options?: ServerOptions): WasmlmServer;
