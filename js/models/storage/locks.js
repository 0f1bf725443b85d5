// storage/locks.js — one download per file across the tabs (and workers) of an origin: the Web
// Locks API's exclusive lock per stored file, and a BroadcastChannel on which the tab holding it
// reports progress to the tabs waiting. A tab that gets the lock after another finished finds the
// file complete in storage; one that gets it after another tab closed mid-way resumes from the
// bytes that tab committed. Where Web Locks are missing (Node, old browsers) a queue per key in
// this realm stands in for them.

const PREFIX = 'wasmlm-download:';

/** Without Web Locks: the tail of each key's queue in this realm. */
const queues = new Map();

function localLock(name, fn) {
  const before = queues.get(name) ?? Promise.resolve();
  const run = before.then(() => fn(null));
  const tail = run.catch(() => {});
  queues.set(name, tail);
  tail.then(() => { if (queues.get(name) === tail) queues.delete(name); });
  return run;
}

/**
 * Runs `fn()` holding the lock of `key`; `onWaitProgress(p)` gets the progress the holder
 * broadcasts while this one waits. `signal` aborts the wait.
 */
export async function withFileLock(key, fn, { signal, onWaitProgress, locks = globalThis.navigator?.locks } = {}) {
  const name = PREFIX + key;
  if (typeof locks?.request !== 'function') return localLock(name, fn);
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
