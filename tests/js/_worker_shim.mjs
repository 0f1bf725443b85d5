// _worker_shim.mjs — runs js/worker/worker.js in a Node worker_threads Worker, for worker.test.mjs:
// gives it the `self` a module Web Worker has (postMessage, addEventListener('message')).
import { parentPort } from 'node:worker_threads';

globalThis.self = {
  postMessage: (msg, transfer) => parentPort.postMessage(msg, transfer),
  addEventListener: (type, fn) => {
    if (type === 'message') parentPort.on('message', (data) => fn({ data }));
  },
};
await import('../../js/worker/worker.js');
