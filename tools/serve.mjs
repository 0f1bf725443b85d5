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
// With --build (what `npm start` runs) it listens at once and runs `tools/build.sh --wasm-only
// --if-needed --progressive` beside it: the module the page loads first is built first (on a
// fresh clone ~1.5-2 min on 2 busy cores, where all nine take ~4.5 min or more), "serving at
// URL; building the other N modules in the background" is printed when it is done, and the
// others follow (the SIMD128 threaded one next, the memory64 ones last). Until the build has said
// which modules it builds, and while a module is one of those not yet built (or absent), a
// request for /dist/*.wasm waits; it then gets the complete file (build.sh announces a module
// only after its link succeeded). When the build fails, those requests get a 500 whose body is
// the build's last lines, printed on the console too, and the server goes on serving the rest.
//
//   node tools/serve.mjs            # PORT env or 8080; tries the next ports if busy
//   node tools/serve.mjs --build    # `npm start`: also builds the wasm modules, one at a time,
//                                   # the page's first module first (tools/build.sh --progressive)
//   import { startServer } from './tools/serve.mjs'   // tests: startServer({ port: 0 })
//   import { createHandler } from './tools/serve.mjs' // tests: the same handler in their own server

import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
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
 * @param {boolean|{command: string, args?: string[]}} [options.build] run a builder beside the
 *   server and hold module requests until it built them (startBuilder): true runs
 *   `bash tools/build.sh --wasm-only --if-needed --progressive` in `root`; an object runs that
 *   command instead (tests: a stub that speaks build.sh's lines). Default: none.
 * @returns {Promise<{url: string, port: number, close: () => Promise<void>,
 *   builder: ReturnType<typeof startBuilder> | null}>}
 *   url is the demo page (http://127.0.0.1:PORT/web/); close() stops listening, drops open
 *   connections and stops the builder (SIGTERM); builder.done resolves when the build ended.
 */
export async function startServer({ port, root = REPO_ROOT, quiet = false, isolate = process.env.ISOLATE !== '0', build } = {}) {
  root = path.resolve(root);
  if (port === undefined) port = process.env.PORT ? Number(process.env.PORT) : 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`invalid port: ${port}`);
  }

  if (build !== undefined && build !== false && build !== true &&
      !(build && typeof build === 'object' && typeof build.command === 'string')) {
    throw new TypeError('build must be true, false or {command, args}');
  }
  const unknownKeys = build && typeof build === 'object' ? Object.keys(build).filter((k) => k !== 'command' && k !== 'args') : [];
  if (unknownKeys.length) throw new TypeError(`build: unknown option ${unknownKeys.join(', ')} (command, args)`);
  const builder = build ? startBuilder({ root, quiet, ...(build === true ? {} : build) }) : null;
  const handler = createHandler(root, quiet, { isolate, builder });
  const server = http.createServer(handler);
  server.keepAliveTimeout = 1000;

  const attempts = port === 0 ? 1 : PORT_ATTEMPTS;
  let bound = -1;
  for (let i = 0; i < attempts && bound < 0; i++) {
    try {
      bound = await listen(server, port + i);
    } catch (err) {
      if (err.code !== 'EADDRINUSE' || i === attempts - 1) {
        builder?.stop();   // no server: no build beside it
        throw err;
      }
      if (!quiet) console.error(`port ${port + i} is busy, trying ${port + i + 1}`);
    }
  }

  const url = `http://127.0.0.1:${bound}/web/`;
  if (!quiet) {
    console.log(`wasmlm dev server: ${url}` +
      (builder?.state === 'running' ? ' (building the wasm modules, the page\'s first one first: its request waits for it)' : ''));
    builder?.on('built', ({ module, k, n }) => {
      if (k === 1) {
        console.log(`serving at ${url}; ${module} is built` +
          (n > 1 ? `; building the other ${n - 1} modules in the background` : ''));
      }
    });
    builder?.on('end', ({ ok, message }) => {
      if (ok) console.log(`wasmlm dev server: the build is done; serving at ${url}`);
      else console.error(`wasmlm dev server: ${message}\n  (requests for the modules it did not build get this error; the server goes on)`);
    });
  }
  return {
    url,
    port: bound,
    builder,
    close: () => new Promise((resolve) => {
      builder?.stop();
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

const BUILT_LINE = /^tools\/build\.sh: built (dist\/\S+\.wasm) \((\d+)\/(\d+)\)$/;
const BUILDING_LINE = /^tools\/build\.sh: building: (.*)$/;
const TAIL_LINES = 30;

/**
 * Runs the module build beside the server and follows it by the lines tools/build.sh prints:
 * "tools/build.sh: building: dist/A.wasm dist/B.wasm" (the modules it is about to build, each
 * such line replacing the last) and "tools/build.sh: built dist/A.wasm (K/N)" (A complete). Its
 * output is copied to stderr (unless quiet). An EventEmitter with:
 *   state    'running' | 'done' | 'failed'
 *   ready(name) → Promise<{ok: true} | {ok: false, message}>: when a request for dist/`name` may
 *            be served: at once once the build is done; while it runs, once the build has
 *            announced its modules and `name` is not one not yet built and its file exists;
 *            after a failure, {ok: false} for those it did not build (or that are absent)
 *   done     Promise<{ok, code, message}>, also emitted as 'end'; 'built' {module, k, n}
 *   stop()   SIGTERM to the build's process group (build.sh's pending record makes the next
 *            run redo a module cut short)
 *
 * @param {{root: string, command?: string, args?: string[], quiet?: boolean}} options
 */
export function startBuilder({ root, command = 'bash', args = ['tools/build.sh', '--wasm-only', '--if-needed', '--progressive'], quiet = false }) {
  const b = new EventEmitter();
  b.state = 'running';
  let announced = false;
  let pending = new Set();
  const tail = [];
  let message = '';
  // its own process group, so that stop() ends make and the compilers too, not only the shell
  const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const onLine = (line) => {
    if (!quiet) process.stderr.write(line + '\n');
    tail.push(line);
    if (tail.length > TAIL_LINES) tail.shift();
    let m;
    if ((m = BUILDING_LINE.exec(line))) {
      announced = true;
      pending = new Set(m[1].split(/\s+/).filter(Boolean));
      b.emit('change');
    } else if ((m = BUILT_LINE.exec(line))) {
      pending.delete(m[1]);
      b.emit('built', { module: m[1], k: Number(m[2]), n: Number(m[3]) });
      b.emit('change');
    }
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) { onLine(buf.slice(0, i)); buf = buf.slice(i + 1); }
    });
    stream.on('end', () => { if (buf) onLine(buf); buf = ''; });
  }
  const what = [command, ...args].join(' ');
  b.done = new Promise((resolve) => {
    let settled = false;
    const finish = (ok, code, why) => {
      if (settled) return;
      settled = true;
      b.state = ok ? 'done' : 'failed';
      message = ok ? '' : `the build failed (${why}: ${what})` + (tail.length ? `; its last lines:\n${tail.join('\n')}` : '');
      const result = { ok, code, message };
      b.emit('end', result);
      b.emit('change');
      resolve(result);
    };
    child.on('error', (err) => finish(false, null, `cannot run it: ${err.message}`));
    // 'close': after its output was read, so every line has been seen
    child.on('close', (code, signal) => finish(code === 0, code, signal ? `killed by ${signal}` : `exit code ${code}`));
  });
  const exists = (name) => { try { return fs.statSync(path.join(root, name)).isFile(); } catch { return false; } };
  const check = (name) => {
    if (b.state === 'done') return { ok: true };
    if (b.state === 'failed') return pending.has(name) || !exists(name) ? { ok: false, message } : { ok: true };
    return announced && !pending.has(name) && exists(name) ? { ok: true } : null;
  };
  b.ready = (name) => {
    const now = check(name);
    if (now) return Promise.resolve(now);
    return new Promise((resolve) => {
      const onChange = () => {
        const r = check(name);
        if (r) { b.off('change', onChange); resolve(r); }
      };
      b.on('change', onChange);
    });
  };
  b.setMaxListeners(0);   // one per waiting request
  b.stop = () => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    try { process.kill(-child.pid, 'SIGTERM'); } catch { child.kill('SIGTERM'); }
  };
  process.once('exit', b.stop);   // the server ends (an error, process.exit): so does its build
  b.done.then(() => process.off('exit', b.stop));
  return b;
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
 * With `builder` (startBuilder), a request for /dist/NAME.wasm waits for builder.ready(NAME)
 * and, when that module's build failed, gets a 500 with the build's message.
 */
export function createHandler(root = REPO_ROOT, quiet = false, { isolate = true, builder = null } = {}) {
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
    const module = builder && /^\/dist\/[^/]+\.wasm$/.test(pathname) ? pathname.slice(1) : null;
    if (module) {
      builder.ready(module).then((r) => {
        if (res.destroyed) return;   // the client gave up waiting
        if (r.ok) return serveRoot(req, res, notFound);
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(`${module} was not built: ${r.message}\n`);
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
  const argv = process.argv.slice(2);
  const unknown = argv.filter((a) => a !== '--build');
  if (unknown.length) {
    console.error(`serve: unknown argument ${unknown.join(' ')} (--build)`);
    process.exit(1);
  }
  startServer({ build: argv.includes('--build') }).then(({ close }) => {
    // Ctrl-C: stop the build too (its pending record makes the next run redo a cut module)
    for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { close().then(() => process.exit(130)); });
  }, (err) => {
    console.error(`serve: ${err.message}`);
    process.exit(1);
  });
}
