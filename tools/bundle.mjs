// tools/bundle.mjs — the demo page's scripts as three minified bundles in dist/ (esbuild):
//   dist/demo.js    web/page.js: the page (web/demo.js, web/demo/*, web/sources.js) and the
//                   library it runs (js/wasmlm.js and what it imports, js/models/cache.js)
//   dist/worker.js  js/worker/worker.js: the worker engine's worker (js/engine/engine.js and its imports)
//   dist/thread.js  js/runtime/thread.js: one helper thread (js/runtime/threads.js starts it as ./thread.js)
//   dist/opfs_worker.js  js/models/storage/opfs_worker.js: the model store's OPFS writer (./opfs_worker.js)
// Why: a cold page load is CPU-bound on a small machine, and ~40 separate modules cost the
// renderer, the browser process and the network service a request each, plus ~230 KB of
// commented source to parse, before the first token (docs/how-it-works.md, ttft4).
// The sources stay as they are (no build step for the library: js/wasmlm.js is imported as it
// is by Node, tests and other pages); only web/index.html loads the bundles. @huggingface/jinja
// and hash-wasm stay outside (imported when a chat template is first rendered, when the model
// store first downloads; the page's import map names them), as do the node:* imports the library
// only makes in Node.
// The URLs the bundled code resolves against import.meta.url keep working from dist/: the wasm
// modules (js/runtime/wasm.js's '../../dist/x.wasm', re-pointed to '../dist/x.wasm' in the
// bundles, which sit one folder deep), './worker.js' and './thread.js' (these bundles), the model
// files ('../models/files/', from web/ or dist/ alike).
//
//   node tools/bundle.mjs            # writes the bundles (tools/build.sh runs it)
//   import { ensureBundles } from './tools/bundle.mjs'   // tools/serve.mjs: rebuilt when stale

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The bundles: output file in dist/ → entry point (relative to the root). */
export const BUNDLES = { 'demo.js': 'web/page.js', 'worker.js': 'js/worker/worker.js', 'thread.js': 'js/runtime/thread.js',
  'opfs_worker.js': 'js/models/storage/opfs_worker.js' };

/** The entries' paths in a checkout from before js/ had layer folders (one a benchmark serves
 *  with --root, e.g. bench/ttft.mjs). */
const FLAT_ENTRIES = { 'js/worker/worker.js': 'js/worker.js', 'js/runtime/thread.js': 'js/thread.js',
  'js/models/storage/opfs_worker.js': 'js/storage/opfs_worker.js' };

/** `entry` in `root`: its path there (relative to root). */
function entryIn(root, entry) {
  return !fs.existsSync(path.join(root, entry)) && FLAT_ENTRIES[entry] && fs.existsSync(path.join(root, FLAT_ENTRIES[entry]))
    ? FLAT_ENTRIES[entry] : entry;
}

/**
 * js/runtime/wasm.js finds the wasm modules at '../../dist/' from its own folder; bundled, its
 * code runs from dist/ (one folder deep), where the same files are '../dist/'. Throws when the
 * file has no such URL (so that a change there cannot leave the bundles pointing elsewhere).
 */
const distUrlPlugin = {
  name: 'wasmlm-dist-url',
  setup(build) {
    build.onLoad({ filter: /[\\/]js[\\/]runtime[\\/]wasm\.js$/ }, async (args) => {
      const source = await fs.promises.readFile(args.path, 'utf8');
      const contents = source.replaceAll('`../../dist/', '`../dist/');
      if (contents === source) throw new Error(`${args.path}: no \`../../dist/ URL to re-point for the bundles`);
      return { contents, loader: 'js' };
    });
  },
};

/** Whether `root` is a checkout whose page loads these bundles (an older one does not). */
export function hasBundles(root = REPO_ROOT) {
  return fs.existsSync(path.join(root, BUNDLES['demo.js']));
}

/**
 * Writes the bundles of `root` into root/dist/ (with source maps beside them).
 * @returns {Promise<{inputs: string[], outputs: {file: string, bytes: number}[]}>} the source
 *   files read (absolute paths) and the files written.
 */
export async function buildBundles(root = REPO_ROOT) {
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch (err) {
    throw new Error('the page bundles need esbuild (a devDependency): run `npm ci`', { cause: err });
  }
  const inputs = new Set();
  const outputs = [];
  for (const [out, entry] of Object.entries(BUNDLES)) {
    const result = await esbuild.build({
      absWorkingDir: root,
      entryPoints: [path.join(root, entryIn(root, entry))],
      outfile: path.join(root, 'dist', out),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      sourcemap: 'linked',
      external: ['@huggingface/jinja', 'hash-wasm', 'node:*'],
      plugins: [distUrlPlugin],
      metafile: true,
      write: false,
      logLevel: 'warning',
    });
    for (const f of Object.keys(result.metafile.inputs)) inputs.add(path.resolve(root, f));
    for (const file of result.outputFiles) writeIfChanged(file.path, file.contents);
    const bytes = result.metafile.outputs[path.relative(root, path.join(root, 'dist', out))]?.bytes ?? 0;
    outputs.push({ file: `dist/${out}`, bytes });
  }
  return { inputs: [...inputs], outputs };
}

/**
 * Writes `bytes` to `file` unless it holds them already, through a temporary file and a rename:
 * several servers (the browser tests run in parallel processes) may build the same bundles
 * while one of them serves a file, which must never be seen half written.
 */
function writeIfChanged(file, bytes) {
  try {
    if (Buffer.compare(fs.readFileSync(file), bytes) === 0) return;
  } catch { /* missing: write it */ }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
}

const built = new Map(); // root → Promise<{inputs, time}> of the last build in this process

/**
 * Rebuilds root's bundles when one is missing or a source file changed since this process last
 * built them (always once per process: the files on disk may predate an edit). Concurrent
 * callers share one build. For the development server, so that an edited page is served as it
 * is now.
 */
export function ensureBundles(root = REPO_ROOT) {
  const last = built.get(root);
  const rebuild = () => {
    const time = Date.now();
    const p = buildBundles(root).then(({ inputs }) => ({ inputs, time }));
    built.set(root, p);
    p.catch(() => built.delete(root));
    return p;
  };
  if (!last) return rebuild();
  return last.then(({ inputs, time }) => {
    const stale = Object.keys(BUNDLES).some((f) => !fs.existsSync(path.join(root, 'dist', f))) ||
      inputs.some((f) => { try { return fs.statSync(f).mtimeMs >= time; } catch { return true; } });
    return stale && built.get(root) === last ? rebuild() : built.get(root);
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  buildBundles().then(({ outputs }) => {
    console.error(outputs.map((o) => `${o.file} ${o.bytes} bytes`).join(', '));
  }, (err) => {
    console.error(`tools/bundle.mjs: ${err.message}`);
    process.exit(1);
  });
}
