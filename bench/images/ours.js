// bench/images/ours.js — wasmlm's side of one bench/images.mjs row, the same in the page
// (bench/images/page.js, headless Chromium) and in Node (bench/images.mjs --node, where the GPU is
// Dawn's): a vision pair loaded on `backend` with `threads` threads, one untimed warm-up with an
// image, then per run a new image (bytes: a different one each run, so nothing reuses an
// encoding) and
//  - time to first token with the image: the wall time from the generate() call (media marker,
//    stopped at the first token) to its first token;
//  - the same prompt without the image (text TTFT);
//  - lastResult.imageMs: the image's decode + encode.
// `engineOptions` go to createEngine (Node's WebGPU: { gpu }); `log` gets a line a run.

import { createEngine } from '../../js/wasmlm.js';

export async function runOurs({ model, mmproj, images, prompt, threads = 1, nCtx = 4096, backend = 'cpu', engineOptions = {}, log = () => {} }) {
  const engine = await createEngine({ threads, ...engineOptions });
  try {
    const t0 = performance.now();
    const info = await engine.load({ model, mmproj, nCtx, backend });
    const loadMs = performance.now() - t0;
    const first = async (text, imgs) => { // wall ms to the first token, and the generation's result
      const w0 = performance.now();
      let ms = null;
      for await (const t of engine.generate(text, { temperature: 0, maxTokens: 1, ...(imgs ? { images: imgs } : {}) })) {
        if (t.id >= 0 && ms === null) ms = performance.now() - w0;
      }
      return { ms, r: engine.lastResult };
    };
    const marker = `<__media__>${prompt}`;
    await first(marker, [images[0]]); // warm-up (its image is not used again)
    const runs = [];
    for (const img of images.slice(1)) {
      const withImage = await first(marker, [img]);
      const text = await first(prompt, null);
      runs.push({ ttftMs: withImage.ms, ttftTextMs: text.ms, imageMs: withImage.r.imageMs, nPrompt: withImage.r.nPrompt,
        nPromptText: text.r.nPrompt, imagesEncoded: withImage.r.imagesEncoded });
      log(`ours: ttft ${withImage.ms.toFixed(0)} ms, image ${withImage.r.imageMs.toFixed(0)} ms`);
    }
    return { engine: 'wasmlm', loadMs, build: info.build, threads: info.threads, backend: info.backend,
      backendReason: info.backendReason ?? null, encoder: info.vision?.encoder ?? null,
      encoderReason: info.vision?.encoderReason ?? null, projector: info.vision?.projector, runs };
  } finally {
    await engine.free();
  }
}
