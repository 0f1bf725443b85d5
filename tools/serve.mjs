// tools/serve.mjs — the development server: serves the repository root as static files on
// 127.0.0.1 (the demo lives at /web/), with /models/files/ backed by the repo's models/files/
// (what models/fetch.mjs downloads) and then ../shared/models. No caching, no proxying: a plain
// static host, so what works here works on any static host once `npm run build` has written
// dist/; the one build step it runs itself is the page's bundles (tools/bundle.mjs), rebuilt
// when a source file changed, so an edited page needs no rebuild by hand. Every response
// carries the two headers that make the page cross-origin isolated (COOP same-origin, COEP
// require-corp), which browsers require for SharedArrayBuffer and so for the engine's helper
// threads; without them (any other static host) the page runs on one thread. ISOLATE=0 leaves
// them out.
//
//   node tools/serve.mjs            # PORT env or 8080; tries the next ports if busy
//   import { startServer } from './tools/serve.mjs'   // tests: startServer({ port: 0 })
//   import { createHandler } from './tools/serve.mjs' // tests: the same handler in their own server

import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';
import { BUNDLES, ensureBundles, hasBundles } from './bundle.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODELS_PREFIX = '/models/files/';
const PORT_ATTEMPTS = 10;

/**
 * Starts the static server.
 *
 * @param {object} [options]
 * @param {number} [options.port]  port to listen on; 0 picks a free one. Default: PORT env or 8080.
 *   When the port is taken (and was not 0), the next PORT_ATTEMPTS - 1 ports are tried.
 * @param {string} [options.root]  directory served at /; default the repository root.
 * @param {boolean} [options.quiet] do not log the URL or requests.
 * @param {boolean} [options.isolate] send the cross-origin isolation headers (default: yes,
 *   unless the ISOLATE env is 0).
 * @returns {Promise<{url: string, port: number, close: () => Promise<void>}>}
 *   url is the demo page (http://127.0.0.1:PORT/web/); close() stops listening and drops
 *   open connections.
 */
export async function startServer({ port, root = REPO_ROOT, quiet = false, isolate = process.env.ISOLATE !== '0' } = {}) {
  root = path.resolve(root);
  if (port === undefined) port = process.env.PORT ? Number(process.env.PORT) : 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`invalid port: ${port}`);
  }

  const handler = createHandler(root, quiet, { isolate });
  const server = http.createServer(handler);
  server.keepAliveTimeout = 1000;

  const attempts = port === 0 ? 1 : PORT_ATTEMPTS;
  let bound = -1;
  for (let i = 0; i < attempts && bound < 0; i++) {
    try {
      bound = await listen(server, port + i);
    } catch (err) {
      if (err.code !== 'EADDRINUSE' || i === attempts - 1) throw err;
      if (!quiet) console.error(`port ${port + i} is busy, trying ${port + i + 1}`);
    }
  }

  const url = `http://127.0.0.1:${bound}/web/`;
  if (!quiet) console.log(`wasmlm dev server: ${url}`);
  return {
    url,
    port: bound,
    close: () => new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

/** Binds `server` to 127.0.0.1:port; resolves with the bound port. */
function listen(server, port) {
  return new Promise((resolve, reject) => {
    const onError = (err) => { server.off('listening', onListening); reject(err); };
    const onListening = () => { server.off('error', onError); resolve(server.address().port); };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, '127.0.0.1');
  });
}

/**
 * The request handler (exported for tests that wrap it, e.g. to count or slow requests):
 * dotfiles are never served, `/` and `/web` redirect to `/web/` (so the
 * page's relative URLs resolve), `/models/files/*` looks in models/files/ then ../shared/models,
 * everything else comes from `root`. With `isolate` (the default) every response has
 * Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp.
 */
export function createHandler(root = REPO_ROOT, quiet = false, { isolate = true } = {}) {
  const opts = { dev: true, etag: false, extensions: [] };
  const serveRoot = sirv(root, { ...opts, extensions: ['html'] });
  // Looked up per request (sirv's dev mode), so a models/files/ created by models/fetch.mjs
  // while the server runs is used at once, and a missing ../shared/models costs nothing.
  const modelDirs = [path.join(root, 'models', 'files'), path.resolve(root, '..', 'shared', 'models')]
    .map((dir) => sirv(dir, opts));
  // The page's bundles (tools/bundle.mjs): built now, rebuilt when a source file changed, so the
  // page served is always the one in web/ and js/ (a checkout without web/page.js, e.g. an older
  // one served by a benchmark, is served as it is).
  const bundled = hasBundles(root);
  if (bundled) ensureBundles(root).catch((err) => { if (!quiet) console.error(`bundle: ${err.message}`); });
  const bundlePaths = new Set(Object.keys(BUNDLES).flatMap((f) => [`/dist/${f}`, `/dist/${f}.map`]));

  return (req, res) => {
    const rawUrl = req.url;
    if (!quiet) res.on('finish', () => console.log(`${res.statusCode} ${req.method} ${rawUrl}`));
    if (isolate) {
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' });
      res.end();
      return;
    }
    const pathname = safePathname(req.url);
    const notFound = () => {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(`404 Not Found: ${rawUrl}\n`);
    };
    if (pathname === null) return notFound();
    if (pathname === '/' || pathname === '/web') {
      res.writeHead(302, { Location: '/web/' + (new URL(rawUrl, 'http://localhost').search) });
      res.end();
      return;
    }
    if (pathname.startsWith(MODELS_PREFIX)) {
      req.url = '/' + pathname.slice(MODELS_PREFIX.length);
      const tryDir = (i) => (i < modelDirs.length ? modelDirs[i](req, res, () => tryDir(i + 1)) : notFound());
      return tryDir(0);
    }
    if (bundled && bundlePaths.has(pathname)) {
      ensureBundles(root).then(() => serveRoot(req, res, notFound), (err) => {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(`cannot bundle the page's scripts: ${err.message}\n`);
      });
      return;
    }
    serveRoot(req, res, notFound);
  };
}

/** The decoded path of a request URL, or null when it is malformed or names a dotfile. */
function safePathname(rawUrl) {
  let pathname;
  try {
    pathname = decodeURIComponent(new URL(rawUrl, 'http://localhost').pathname);
  } catch {
    return null;
  }
  if (pathname.includes('\0') || pathname.split('/').some((seg) => seg.startsWith('.'))) return null;
  return pathname;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  startServer().catch((err) => {
    console.error(`serve: ${err.message}`);
    process.exit(1);
  });
}
