// _webgpu.mjs — WebGPU for the tests: Dawn (the `webgpu` package) on Chromium's SwiftShader
// Vulkan driver, which tools/setup.sh installs with `chromium` (/usr/lib/chromium). The driver
// is found through VK_ICD_FILENAMES, set here before Dawn starts unless the caller set it.
// Where no adapter comes up, tests skip with the reason, except in CI (env CI set), where they
// fail: CI installs what they need.

import fs from 'node:fs';
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { REPO } from './_helpers.mjs';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

let found = null;

/**
 * {gpu, adapter, skip}: a GPU object with an adapter, or skip = why there is none (and in CI a
 * thrown Error instead).
 */
export async function dawn() {
  if (found) return found;
  if (!process.env.VK_ICD_FILENAMES && fs.existsSync(SWIFTSHADER_ICD)) process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  process.env.XDG_RUNTIME_DIR ??= os.tmpdir(); // else the driver prints an error for each device
  let skip = '';
  let gpu = null;
  let adapter = null;
  try {
    const { create } = await import('webgpu');
    gpu = create([]);
    adapter = await gpu.requestAdapter();
    if (!adapter) skip = `Dawn found no Vulkan adapter (SwiftShader's ICD ${SWIFTSHADER_ICD} missing? run tools/setup.sh)`;
  } catch (e) {
    skip = `the webgpu package did not load (npm ci): ${e.message}`;
  }
  if (skip && process.env.CI) throw new Error(`WebGPU tests need Dawn + SwiftShader in CI: ${skip}`);
  found = { gpu, adapter, skip };
  return found;
}

/** A fresh wasm instance of dist/wasmlm.wasm, for the C references (quantize, dequantize, f16). */
export function wasmReference() {
  const mod = new WebAssembly.Module(readFileSync(resolve(REPO, 'dist/wasmlm.wasm')));
  const x = new WebAssembly.Instance(mod, { env: { emscripten_notify_memory_growth() {} } }).exports;
  x._initialize?.();
  return x;
}
