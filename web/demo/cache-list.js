// web/demo/cache-list.js — the "Cached models" list: files in Cache Storage with their sizes,
// removing one or all.

import { fmtBytes, describeError } from './format.js';
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

export async function renderCacheList() {
  const list = $('cache-list');
  const note = $('cache-note');
  const clear = $('cache-clear');
  if (!app.sources.cache.available) {
    note.textContent = 'Cache Storage is not available on this page (it needs https or localhost): ' +
      'models are downloaded each time.';
    list.replaceChildren();
    clear.disabled = true;
    $('cache-summary').textContent = '(unavailable)';
    return;
  }
  let entries;
  try {
    entries = await app.sources.cache.list();
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
    size.textContent = fmtBytes(e.size);
    const origin = document.createElement('span');
    origin.className = 'cache-origin hint';
    const where = new URL(e.url);
    origin.textContent = where.host + where.pathname;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'secondary small';
    remove.textContent = 'Remove';
    remove.setAttribute('aria-label', `Remove ${e.name} from the cache`);
    remove.dataset.url = e.url;
    li.append(name, size, origin, remove);
    return li;
  }));
  const total = entries.reduce((n, e) => n + e.size, 0);
  $('cache-summary').textContent = `(${entries.length} · ${fmtBytes(total)})`;
  clear.disabled = entries.length === 0;
  note.textContent = entries.length
    ? `These files load again without a download.${await quotaNumbers()}`
    : 'Nothing cached yet. Downloaded models are kept here and load again without a download.';
}

export async function removeCached(url) {
  await app.sources.cache.delete(url);
  await renderCacheList();
  // The button that had focus is gone: keep keyboard users in the list.
  const next = $('cache-list').querySelector('button') ?? $('cache-clear');
  (next.disabled ? document.querySelector('#cache-panel summary') : next).focus();
}
