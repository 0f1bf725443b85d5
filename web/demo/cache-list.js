// web/demo/cache-list.js — the "Cached models" list: the files the model store keeps (OPFS:
// large models, resumable; js/models/storage/) and those in Cache Storage, with their sizes, when they
// were stored and whether they matched a published checksum; removing one or all, and resuming a
// partial download.

import { fmtBytes, fmtPercent, describeError } from './format.js';
import { $, app } from './state.js';

/** " (12.3 MB used of 20.0 MB)" from navigator.storage.estimate(), or "". */
export async function quotaNumbers() {
  try {
    const { usage, quota } = await navigator.storage.estimate();
    return Number.isFinite(usage) && Number.isFinite(quota) ? ` (${fmtBytes(usage)} used of ${fmtBytes(quota)})` : '';
  } catch {
    return '';
  }
}

/** Downloads resumed from the list, by URL: their progress text. */
const resuming = new Map();

function button(text, label, url, action) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'secondary small';
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.dataset.url = url;
  if (action) b.dataset.action = action;
  return b;
}

export async function renderCacheList() {
  const list = $('cache-list');
  const note = $('cache-note');
  const clear = $('cache-clear');
  if (!app.sources.cache.available && !(await app.sources.storePersists())) {
    note.textContent = 'Cache Storage is not available on this page (it needs https or localhost): ' +
      'models are downloaded each time.';
    list.replaceChildren();
    clear.disabled = true;
    $('cache-summary').textContent = '(unavailable)';
    return;
  }
  let entries;
  try {
    entries = await app.sources.listStored();
  } catch (err) {
    note.textContent = `Cannot read the cache: ${describeError(err)}`;
    return;
  }
  list.replaceChildren(...entries.map((e) => {
    const li = document.createElement('li');
    const name = document.createElement('span');
    name.className = 'cache-name';
    name.textContent = e.name;
    name.title = e.url;
    const size = document.createElement('span');
    size.className = 'cache-size';
    size.textContent = e.complete ? fmtBytes(e.size) : `${fmtBytes(e.done)} of ${e.size ? fmtBytes(e.size) : '?'}`;
    const origin = document.createElement('span');
    origin.className = 'cache-origin hint';
    const where = new URL(e.url);
    const facts = e.complete
      ? [e.verified ? 'verified' : 'unverified', e.storedAt ? `stored ${new Date(e.storedAt).toLocaleString()}` : null]
      : [resuming.get(e.url) ?? `partial${e.size ? ` (${fmtPercent(e.done / e.size)})` : ''}: resumes where it stopped`];
    origin.textContent = [where.host + where.pathname, ...facts.filter(Boolean)].join(' · ');
    const buttons = [button('Remove', `Remove ${e.name} from the cache`, e.url)];
    if (!e.complete && !resuming.has(e.url)) buttons.unshift(button('Resume', `Resume the download of ${e.name}`, e.url, 'resume'));
    const actions = document.createElement('span');
    actions.className = 'cache-actions';
    actions.append(...buttons);
    li.append(name, size, origin, actions);
    return li;
  }));
  const total = entries.reduce((n, e) => n + (e.complete ? e.size : e.done), 0);
  $('cache-summary').textContent = `(${entries.length} · ${fmtBytes(total)})`;
  clear.disabled = entries.length === 0;
  note.textContent = entries.length
    ? `These files load again without a download.${await quotaNumbers()}`
    : 'Nothing cached yet. Downloaded models are kept here and load again without a download.';
}

export async function removeCached(url) {
  await app.sources.deleteStored(url);
  await renderCacheList();
  // The button that had focus is gone: keep keyboard users in the list.
  const next = $('cache-list').querySelector('button') ?? $('cache-clear');
  (next.disabled ? document.querySelector('#cache-panel summary') : next).focus();
}

/** Resumes a partial download of the store; the row shows its progress, then the stored file. */
export async function resumeCached(url) {
  const entry = (await app.sources.listStored()).find((e) => e.url === url && !e.complete);
  if (!entry || resuming.has(url)) return;
  resuming.set(url, 'resuming…');
  await renderCacheList();
  let last = 0;
  try {
    await app.sources.resumeStored(entry, {
      onProgress: (p) => {
        resuming.set(url, `resuming: ${fmtBytes(p.loaded)} of ${fmtBytes(p.total)}` +
          (p.secondsLeft != null ? `, ${Math.ceil(p.secondsLeft)} s left` : ''));
        if (performance.now() - last > 500) { last = performance.now(); renderCacheList(); }
      },
    });
    resuming.delete(url);
  } catch (err) {
    resuming.set(url, `failed: ${describeError(err)}`);
    setTimeout(() => { resuming.delete(url); renderCacheList(); }, 10_000);
  }
  await renderCacheList();
}
