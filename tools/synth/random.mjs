// tools/synth/random.mjs — the synthesizer's deterministic random numbers: fnv1a (a tensor name's
// hash), uniformStream (xorshift128 seeded by splitmix32(seed ^ fnv1a(name)), one stream per
// tensor) and rng (such a stream one value at a time).

import { splitmix32 } from '../synth.mjs';

export function fnv1a(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
  return h;
}
/** The stream of uniformStream(seed, name) one value u in [0, 1) per call (mean 0.5, a 0.5 gives
 * u exactly: every step is exact in doubles). */
export function rng(seed, name) {
  const fill = uniformStream(seed, name), one = new Float64Array(1);
  return () => { fill(one, 1, 0.5, 0.5); return one[0]; };
}
/**
 * xorshift128 (Marsaglia) seeded by splitmix32(seed ^ fnv1a(name)): one stream per tensor,
 * filling arrays: fill(buf, n, mean, a) sets buf[0..n) to mean + (2u − 1)·a for the stream's next
 * n values u = w / 2^32, with the generator's state in locals (a closure call per value made a
 * 3.8 B-parameter shape slow).
 */
export function uniformStream(seed, name) {
  const sm = splitmix32((seed ^ fnv1a(name)) >>> 0);
  let x = sm(), y = sm(), z = sm(), w = sm() || 1;
  return (buf, n, mean, a) => {
    let X = x, Y = y, Z = z, W = w;
    for (let i = 0; i < n; i++) {
      const t = X ^ (X << 11);
      X = Y; Y = Z; Z = W;
      W = (W ^ (W >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
      buf[i] = mean + (2 * (W * 2.3283064365386963e-10) - 1) * a; // W · 2⁻³², exactly W / 4294967296
    }
    x = X; y = Y; z = Z; w = W;
  };
}
