// _drivers.mjs — one small page interface over three browser automation libraries, so that the
// core page cases (_cases.mjs) run unchanged in the three browser engines:
//   chromium  Debian's Chromium through playwright-core (CDP), as tests/browser/ drives it
//   firefox   Debian's firefox-esr through puppeteer-core over WebDriver BiDi (no geckodriver)
//   webkit    WebKitGTK, Safari's engine: its MiniBrowser through WebKitWebDriver (classic
//             WebDriver) and selenium-webdriver, on a virtual display (Xvfb) started here
// playwright-core cannot drive the last two: its firefox and webkit launchers pass flags that only
// Playwright's own patched builds know (-juggler-pipe, --inspector-pipe); stock Firefox ignores
// the first and exits, MiniBrowser refuses the second.
//
// The interface is what the cases need and nothing more: goto, evaluate (a function run in the
// page, its result as JSON), waitFor (a function polled in the page until it returns something
// truthy), click and fill (the driver's own input), screenshot. Anything a test must see from the
// page's start (errors, the worker's token messages) comes from a script the test server puts
// first in <head> (_cases.mjs), because WebKitWebDriver has no way to run one before the page's
// own scripts (no WebDriver BiDi: it refuses the webSocketUrl capability).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ARTIFACTS, CHROMIUM, STEP_TIMEOUT } from '../browser/_helpers.mjs';

const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';
const WEBKIT_DRIVER = process.env.WEBKIT_WEBDRIVER || '/usr/bin/WebKitWebDriver';
const MINIBROWSER = process.env.MINIBROWSER || findMiniBrowser();
const XVFB = '/usr/bin/Xvfb';
const VIEWPORT = { width: 1280, height: 900 };

/** Per engine: the executables it needs (tools/setup.sh installs them) and its launcher. */
export const ENGINES = {
  chromium: { needs: [CHROMIUM], apt: 'chromium', launch: launchChromium },
  firefox: { needs: [FIREFOX], apt: 'firefox-esr', launch: launchFirefox },
  webkit: { needs: [WEBKIT_DRIVER, MINIBROWSER, XVFB], apt: 'webkit2gtk-driver xvfb', launch: launchWebKit },
};

/**
 * WebKitGTK's MiniBrowser opened on `url` directly, without WebDriver, for what an automation
 * session cannot show: WebKitWebDriver's sessions are ephemeral, and there (as in Safari's private
 * browsing) navigator.storage.getDirectory() rejects. Here the browser keeps a profile of its
 * own under `profile` (HOME and the XDG folders), `features` are WebKit feature flags switched on
 * (--features=+A,+B; `MiniBrowser --features=help` lists them: WebKitGTK leaves off storage APIs
 * Safari ships), and the page reports to the test's server itself. Returns {close()}.
 */
export async function startMiniBrowser(url, { features = [], profile }) {
  const group = processGroup();
  try {
    const display = await startXvfb(group);
    const env = { ...process.env, DISPLAY: `:${display}`, HOME: profile, XDG_DATA_HOME: path.join(profile, 'data'),
      XDG_CACHE_HOME: path.join(profile, 'cache'), XDG_CONFIG_HOME: path.join(profile, 'config') };
    group.add(spawn(MINIBROWSER, [...(features.length ? [`--features=${features.map((f) => `+${f}`).join(',')}`] : []), url],
      { stdio: 'ignore', env }));
    return { close: () => group.release() };
  } catch (e) {
    group.release();
    throw e;
  }
}

/** Child processes ended together: by release(), or when this process exits. */
function processGroup() {
  const children = [];
  const killAll = () => { for (const c of children) if (c.exitCode === null) c.kill(); };
  process.once('exit', killAll);
  return {
    add(child) { children.push(child); return child; },
    release() { killAll(); process.off('exit', killAll); },
  };
}

/** A virtual display of its own (-displayfd: Xvfb picks a free number and writes it to fd 3),
 *  in `group`; resolves with its number. */
async function startXvfb(group) {
  const xvfb = group.add(spawn(XVFB, ['-displayfd', '3', '-screen', '0', `${VIEWPORT.width}x${VIEWPORT.height}x24`, '-nolisten', 'tcp'],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] }));
  return readLine(xvfb, xvfb.stdio[3], 'Xvfb');
}

/** Where libwebkit2gtk puts MiniBrowser (/usr/lib/<multiarch triplet>/webkit2gtk-4.1/). */
function findMiniBrowser() {
  const triplets = fs.existsSync('/usr/lib') ? fs.readdirSync('/usr/lib').filter((d) => d.endsWith('-linux-gnu')) : [];
  const found = triplets.flatMap((t) => ['webkit2gtk-4.1', 'webkitgtk-6.0', 'webkit2gtk-4.0']
    .map((v) => `/usr/lib/${t}/${v}/MiniBrowser`)).find((f) => fs.existsSync(f));
  return found ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
}

/** The executables of `engine` that are missing (empty when it can run). */
export function missing(engine) {
  return ENGINES[engine].needs.filter((file) => !fs.existsSync(file));
}

/**
 * Starts `engine` with a fresh profile and returns its page: {engine, version, goto(url),
 * evaluate(fn, arg), waitFor(fn, arg, {timeout, what}), click(selector), fill(selector, text),
 * screenshot(name), close()}. `fn` is a function (its source is sent to the page; it sees only its
 * argument) that may return a promise; results travel as JSON.
 */
export async function launchBrowser(engine) {
  await fsp.mkdir(ARTIFACTS, { recursive: true });
  const driver = await ENGINES[engine].launch();
  const page = {
    engine,
    version: driver.version,
    goto: (url) => driver.goto(url),
    evaluate: (fn, arg = null) => driver.evaluate(String(fn), arg),
    /** Resolves with fn(arg)'s first truthy value, polled in the page every 20 ms. On a timeout
     *  the error names `what` and, when given, what the function `state` returns in the page then. */
    waitFor(fn, arg = null, { timeout = STEP_TIMEOUT, what = String(fn), state = null } = {}) {
      const poll = `async ({ arg, timeout, what }) => {
        const fn = (${fn});
        const state = (${state ?? 'null'});
        const end = Date.now() + timeout;
        for (;;) {
          const value = await fn(arg);
          if (value) return value;
          if (Date.now() > end) {
            throw new Error('timed out after ' + timeout + ' ms waiting for ' + what + (state ? '; the page then: ' + JSON.stringify(state()) : ''));
          }
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }`;
      return driver.evaluate(poll, { arg, timeout, what });
    },
    click: (selector) => driver.click(selector),
    fill: (selector, text) => driver.fill(selector, text),
    /** Saves tests/artifacts/<name>.png once the page has painted its current state (two frames). */
    async screenshot(name) {
      await driver.evaluate(String(() => new Promise((resolve) => {
        setTimeout(resolve, 1000); // no frames in a hidden page
        requestAnimationFrame(() => requestAnimationFrame(resolve));
      })), null);
      await driver.screenshot(path.join(ARTIFACTS, `${name}.png`));
    },
    close: () => driver.close(),
  };
  return page;
}

/** A function object from its source, for the libraries that serialize functions themselves. */
const asFunction = (source) => new Function(`return (${source});`)();

async function launchChromium() {
  const { chromium } = await import('playwright-core');
  const userDataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'wasmlm-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: STEP_TIMEOUT,
    viewport: VIEWPORT,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context.setDefaultTimeout(STEP_TIMEOUT);
  const page = context.pages()[0] ?? await context.newPage();
  return {
    version: `Chromium ${context.browser()?.version() ?? (await page.evaluate(() => navigator.userAgent)).match(/Chrome\/([\d.]+)/)?.[1]}`,
    goto: (url) => page.goto(url),
    evaluate: (source, arg) => page.evaluate(asFunction(source), arg),
    click: (selector) => page.locator(selector).click(),
    fill: (selector, text) => page.locator(selector).fill(text),
    screenshot: (file) => page.screenshot({ path: file, fullPage: true }),
    async close() {
      try {
        await context.close();
      } finally {
        await fsp.rm(userDataDir, { recursive: true, force: true });
      }
    },
  };
}

async function launchFirefox() {
  const { default: puppeteer } = await import('puppeteer-core');
  // puppeteer-core writes a temporary profile (its automation preferences) and removes it on close.
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    timeout: STEP_TIMEOUT,
    protocolTimeout: STEP_TIMEOUT + 30_000, // after waitFor's own limit, which says what it waited for
    defaultViewport: VIEWPORT,
  });
  const page = (await browser.pages())[0] ?? await browser.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT);
  return {
    version: (await browser.version()).replace(/^firefox\//, 'Firefox '),
    goto: (url) => page.goto(url),
    evaluate: (source, arg) => page.evaluate(asFunction(source), arg),
    click: (selector) => page.locator(selector).click(),
    fill: (selector, text) => page.locator(selector).fill(text),
    screenshot: (file) => page.screenshot({ path: file, fullPage: true }),
    close: () => browser.close(),
  };
}

async function launchWebKit() {
  const { Builder, By } = await import('selenium-webdriver');
  const group = processGroup();
  try {
    const display = await startXvfb(group);
    const port = await freePort();
    // WebKitWebDriver starts MiniBrowser itself, with the display it was given.
    const webdriver = group.add(spawn(WEBKIT_DRIVER, [`--port=${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, DISPLAY: `:${display}` },
    }));
    await waitForPort(port, webdriver);
    const driver = await new Builder().usingServer(`http://127.0.0.1:${port}`).withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] },
    }).build();
    await driver.manage().setTimeouts({ script: STEP_TIMEOUT + 10_000, pageLoad: STEP_TIMEOUT });
    await driver.manage().window().setRect(VIEWPORT);
    const caps = await driver.getCapabilities();
    const element = (selector) => driver.findElement(By.css(selector));
    return {
      version: `WebKitGTK ${caps.get('browserVersion')} (MiniBrowser)`,
      goto: (url) => driver.get(url),
      async evaluate(source, arg) {
        const out = await driver.executeAsyncScript(`const done = arguments[arguments.length - 1];
          Promise.resolve(arguments[0]).then(${source}).then(
            (value) => done({ value: value === undefined ? null : value }),
            (e) => done({ error: String(e && e.message || e) }));`, arg);
        if (out?.error !== undefined) throw new Error(`in the page: ${out.error}`);
        return out.value;
      },
      click: async (selector) => (await element(selector)).click(),
      async fill(selector, text) {
        const el = await element(selector);
        await el.clear();
        await el.sendKeys(text);
      },
      async screenshot(file) {
        await fsp.writeFile(file, Buffer.from(await driver.takeScreenshot(), 'base64'));
      },
      async close() {
        try {
          await driver.quit();
        } finally {
          group.release();
        }
      },
    };
  } catch (e) {
    group.release();
    throw e;
  }
}

/** The first line `stream` of `child` writes; rejects if the child exits first. */
function readLine(child, stream, name) {
  return new Promise((resolve, reject) => {
    let text = '';
    let stderr = '';
    child.stderr?.on('data', (d) => { stderr += d; });
    stream.on('data', (d) => {
      text += d;
      if (text.includes('\n')) resolve(text.trim());
    });
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}): ${stderr.trim().slice(-500)}`)));
    child.once('error', reject);
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on 127.0.0.1:port; rejects if `child` exits. */
async function waitForPort(port, child) {
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const end = Date.now() + STEP_TIMEOUT;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`WebKitWebDriver exited (${child.exitCode}): ${stderr.trim().slice(-500)}`);
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => { socket.end(); resolve(true); });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > end) throw new Error(`WebKitWebDriver did not listen on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
