// storage/locks.js — one download per file across the tabs (and workers) of an origin: the Web
// Locks API's exclusive lock per stored file, and a BroadcastChannel on which the tab holding it
// reports progress to the tabs waiting. A tab that gets the lock after another finished finds the
// file complete in storage; one that gets it after another tab closed mid-way resumes from the
// bytes that tab committed. Where Web Locks are missing (Node, old browsers) the function runs
// at once: one realm's own calls are still shared (see store.js).

const PREFIX = 'wasmlm-download:';

/**
 * Runs `fn()` holding the lock of `key`; `onWaitProgress(p)` gets the progress the holder
 * broadcasts while this one waits. `signal` aborts the wait.
 */
export async function withFileLock(key, fn, { signal, onWaitProgress, locks = globalThis.navigator?.locks } = {}) {
  if (typeof locks?.request !== 'function') return fn(null);
  const name = PREFIX + key;
  const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(name) : null;
  let holding = false;
  if (channel && onWaitProgress) channel.onmessage = (e) => { if (!holding) onWaitProgress(e.data); };
  try {
    return await locks.request(name, { mode: 'exclusive', ...(signal ? { signal } : {}) }, async () => {
      holding = true;
      return fn((p) => channel?.postMessage(p));
    });
  } finally {
    channel?.close();
  }
}
