// bench/_node_gpu.mjs — the GPU the Node benchmarks use (bench/webgpu.mjs, bench/images.mjs
// --node): the `webgpu` package's (Dawn), on the machine's Vulkan driver, with Chromium's
// SwiftShader as the fallback driver where there is no NVIDIA device (numbers that mean nothing
// there; the reports name the adapter).
import fs from 'node:fs';
import os from 'node:os';

/** Dawn's GPU object; `flags` are Dawn toggles (e.g. timestamp resolution for --profile). */
export async function nodeGpu(flags = []) {
  if (!process.env.VK_ICD_FILENAMES && fs.existsSync('/usr/lib/chromium/vk_swiftshader_icd.json') && !fs.existsSync('/dev/nvidia0')) {
    process.env.VK_ICD_FILENAMES = '/usr/lib/chromium/vk_swiftshader_icd.json';
  }
  process.env.XDG_RUNTIME_DIR ??= os.tmpdir(); // else the Vulkan driver prints an error per device
  const { create } = await import('webgpu');
  return create(flags);
}
