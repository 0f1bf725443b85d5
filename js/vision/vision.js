// vision.js — images for js/engine/engine.js: an image given in any of the accepted forms decoded to
// 8-bit RGB the way llama.cpp's mtmd-helper gets it from stb_image (stbi_load_from_memory with
// 3 channels: grey replicated, alpha dropped — not composited —, 16-bit samples cut to their
// high byte), the media markers of a raw prompt counted, OpenAI content parts turned into
// markers, and a key per image (a hash of its pixels) so that an image encoded once is not
// encoded again. It does not encode: C does (wlm_image_encode, src/vision/).
//
// Decoding: in Node the well-kept libraries pngjs (PNG) and jpeg-js (JPEG); in a page (or a
// worker) createImageBitmap, read back unpremultiplied through a WebGL 2 texture (a 2D canvas
// where WebGL 2 is missing: exact for opaque pixels only). Before decoding, the declared size is read
// from the file's header and refused past IMAGE_MAX_SIDE / IMAGE_MAX_PIXELS (the limits of
// wlm_image_encode), so a tiny file that declares a huge image costs nothing.

import { jsError } from '../runtime/errors.js';
import { checkOptions } from '../options.js';

/** llama.cpp's default media marker (mtmd_default_marker): where an image goes in a raw prompt. */
export const MEDIA_MARKER = '<__media__>';
/** The largest image: each side, and pixels in all (WLM_IMAGE_MAX_SIDE / _PIXELS of wasmlm.h). */
export const IMAGE_MAX_SIDE = 16384;
export const IMAGE_MAX_PIXELS = 2 ** 26;

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined';
const bad = (msg) => jsError('WLM_ERR_INVALID_ARG', msg);
// Node's decoders, by a specifier that bundlers leave alone (pages never take this branch)
const nodeImport = (name) => import(name);

/** Markers in a prompt. */
export function countMarkers(prompt) {
  let n = 0;
  for (let i = prompt.indexOf(MEDIA_MARKER); i >= 0; i = prompt.indexOf(MEDIA_MARKER, i + MEDIA_MARKER.length)) n++;
  return n;
}

/** Refuses a marker count that differs from the images, naming both (before any decoding). */
export function checkMarkers(prompt, nImages) {
  const n = countMarkers(prompt);
  if (n !== nImages) {
    throw bad(`the prompt has ${n} media marker${n === 1 ? '' : 's'} (${MEDIA_MARKER}) but ${nImages} image` +
      `${nImages === 1 ? ' was' : 's were'} given: each marker takes the next image`);
  }
}

function checkSize(w, h, what) {
  if (!(w >= 1 && h >= 1)) throw bad(`${what}: the image has no pixels (${w}×${h})`);
  if (w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE || w * h > IMAGE_MAX_PIXELS) {
    throw bad(`${what}: the image is ${w}×${h}: over the limit of ${IMAGE_MAX_SIDE} pixels a side and ` +
      `${IMAGE_MAX_PIXELS} pixels in all`);
  }
}

/**
 * The declared size of a PNG or JPEG from its header: {format, width, height}, or {format: null}
 * for anything else. Throws on a PNG / JPEG whose header is cut short or malformed.
 */
export function imageHeader(b, what = 'image') {
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) {
    if (b.length < 24 || String.fromCharCode(b[12], b[13], b[14], b[15]) !== 'IHDR') throw bad(`${what}: a PNG without its IHDR header`);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    return { format: 'png', width: dv.getUint32(16), height: dv.getUint32(20) };
  }
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) {
    // the first start-of-frame marker (SOF0..SOF15 but DHT C4, JPG C8, DAC CC)
    let i = 2;
    while (i + 4 <= b.length) {
      if (b[i] !== 0xff) throw bad(`${what}: a malformed JPEG (no marker at byte ${i})`);
      const m = b[i + 1];
      if (m === 0xff) { i++; continue; }
      if (m === 0xd8 || m === 0x01 || (m >= 0xd0 && m <= 0xd7)) { i += 2; continue; }
      if (m === 0xd9 || m === 0xda) break;
      const len = (b[i + 2] << 8) | b[i + 3];
      if (len < 2) throw bad(`${what}: a malformed JPEG (segment length ${len})`);
      if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
        if (i + 9 > b.length) break;
        return { format: 'jpeg', height: (b[i + 5] << 8) | b[i + 6], width: (b[i + 7] << 8) | b[i + 8] };
      }
      i += 2 + len;
    }
    throw bad(`${what}: a JPEG without a frame header (cut short or malformed)`);
  }
  return { format: null };
}

/** stb_image's 3-channel output from 4-channel samples: R, G, B kept, alpha dropped. */
function rgbaToRgb(src, w, h, shift = 0) {
  const n = w * h, rgb = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    rgb[3 * i] = src[4 * i] >> shift;
    rgb[3 * i + 1] = src[4 * i + 1] >> shift;
    rgb[3 * i + 2] = src[4 * i + 2] >> shift;
  }
  return rgb;
}

async function decodeNode(bytes, head, what) {
  if (head.format === 'png') {
    const mod = await nodeImport('pngjs');
    const { PNG } = mod.default ?? mod;
    let png;
    try {
      // skipRescale: 16-bit samples as they are, cut to their high byte below (stb_image's
      // stbi__convert_16_to_8), not pngjs's rounding
      png = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { skipRescale: true });
    } catch (e) {
      throw bad(`${what}: cannot decode this PNG (${e?.message ?? e})`);
    }
    return { width: png.width, height: png.height, rgb: rgbaToRgb(png.data, png.width, png.height, png.depth === 16 ? 8 : 0) };
  }
  if (head.format === 'jpeg') {
    const mod = await nodeImport('jpeg-js');
    const jpeg = mod.default ?? mod;
    let img;
    try {
      img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: false, tolerantDecoding: false,
        maxResolutionInMP: IMAGE_MAX_PIXELS / 1e6, maxMemoryUsageInMB: 1024 });
    } catch (e) {
      throw bad(`${what}: cannot decode this JPEG (${e?.message ?? e})`);
    }
    if (img.data.length !== img.width * img.height * 3) throw bad(`${what}: cannot decode this JPEG`);
    return { width: img.width, height: img.height, rgb: new Uint8Array(img.data.buffer, img.data.byteOffset, img.data.length) };
  }
  throw bad(`${what}: not a PNG or JPEG image (Node decodes these two; in a page the browser decodes any format it knows)`);
}

/** In a page or worker: createImageBitmap → RGBA (WebGL 2 or a 2D canvas) → RGB (alpha dropped). */
async function decodeBitmap(source, what) {
  if (typeof createImageBitmap !== 'function' || typeof OffscreenCanvas !== 'function') {
    throw bad(`${what}: decoding needs createImageBitmap and OffscreenCanvas here`);
  }
  let bmp = source;
  if (!(typeof ImageBitmap === 'function' && source instanceof ImageBitmap)) {
    try {
      bmp = await createImageBitmap(source, { premultiplyAlpha: 'none', colorSpaceConversion: 'none' });
    } catch (e) {
      throw bad(`${what}: the browser cannot decode this image (${e?.message ?? e})`);
    }
  }
  checkSize(bmp.width, bmp.height, what);
  const data = readWebGl(bmp) ?? read2d(bmp);
  return { width: bmp.width, height: bmp.height, rgb: rgbaToRgb(data, bmp.width, bmp.height) };
}

/** A 2D canvas stores premultiplied colour: semi-transparent pixels lose precision, and fully
 *  transparent ones their colour. The fallback where WebGL 2 is missing. */
function read2d(bmp) {
  const g = new OffscreenCanvas(bmp.width, bmp.height).getContext('2d', { willReadFrequently: true });
  g.drawImage(bmp, 0, 0);
  return g.getImageData(0, 0, bmp.width, bmp.height).data;
}

/** The bitmap's RGBA as decoded (not premultiplied): uploaded to a WebGL 2 texture without
 *  premultiplication and read back from a framebuffer. null where WebGL 2 is missing. */
function readWebGl(bmp) {
  let gl = null;
  try {
    gl = new OffscreenCanvas(1, 1).getContext('webgl2', { premultipliedAlpha: false });
  } catch { /* none */ }
  if (!gl) return null;
  try {
    const tex = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, tex);
    gl.pixelStorei(gl.UNPACK_PREMULTIPLY_ALPHA_WEBGL, false);
    gl.pixelStorei(gl.UNPACK_COLORSPACE_CONVERSION_WEBGL, gl.NONE);
    gl.pixelStorei(gl.UNPACK_FLIP_Y_WEBGL, false);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, gl.RGBA, gl.UNSIGNED_BYTE, bmp);
    const fb = gl.createFramebuffer();
    gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, tex, 0);
    if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) return null;
    const out = new Uint8Array(bmp.width * bmp.height * 4);
    gl.pixelStorei(gl.PACK_ALIGNMENT, 1);
    gl.readPixels(0, 0, bmp.width, bmp.height, gl.RGBA, gl.UNSIGNED_BYTE, out);
    if (gl.getError() !== gl.NO_ERROR) return null;
    gl.deleteFramebuffer(fb);
    gl.deleteTexture(tex);
    return out;
  } finally {
    gl.getExtension('WEBGL_lose_context')?.loseContext();
  }
}

function asBytes(v) {
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  return null;
}

/** Raw pixels {width, height, data} (RGB or RGBA bytes, e.g. an ImageData), checked. */
function rawPixels(v, what) {
  checkOptions(what, v, ['width', 'height', 'data', 'colorSpace'], { noun: 'key', keepUndefined: true });
  const { width: w, height: h } = v;
  if (!Number.isInteger(w) || !Number.isInteger(h)) throw bad(`${what}: width and height must be integers`);
  checkSize(w, h, what);
  const d = asBytes(v.data);
  if (!d) throw bad(`${what}: data must be bytes (RGB or RGBA, row-major)`);
  if (d.length === w * h * 3) return { width: w, height: h, rgb: Uint8Array.from(d) };
  if (d.length === w * h * 4) return { width: w, height: h, rgb: rgbaToRgb(d, w, h) };
  throw bad(`${what}: data has ${d.length} bytes: ${w}×${h} needs ${w * h * 3} (RGB) or ${w * h * 4} (RGBA)`);
}

async function fetchBytes(url, what, signal) {
  let res;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    throw bad(`${what}: cannot fetch ${url.startsWith('data:') ? 'the data: URL' : url} (${e?.message ?? e})`);
  }
  if (!res.ok) throw bad(`${what}: ${url} answered HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** Encoded file bytes → {width, height, rgb}, the size checked before decoding. */
async function decodeBytes(bytes, what) {
  if (bytes.length === 0) throw bad(`${what}: no bytes`);
  const head = imageHeader(bytes, what);
  if (head.format) checkSize(head.width, head.height, what);
  if (isNode) return decodeNode(bytes, head, what);
  return decodeBitmap(new Blob([bytes]), what);
}

/**
 * Any accepted image → {width, height, rgb} (8-bit RGB, row-major). Accepted: encoded bytes
 * (Uint8Array, ArrayBuffer, a typed array view, a Node Buffer), a Blob / File, an ImageBitmap,
 * raw pixels {width, height, data} (RGB or RGBA: an ImageData), a URL string (data:, blob:,
 * http(s):, and in Node a file path). Throws WasmlmError WLM_ERR_INVALID_ARG naming `what`.
 */
export async function decodeImage(image, what = 'image', { signal } = {}) {
  if (image == null) throw bad(`${what}: an image is required`);
  const bytes = asBytes(image);
  if (bytes) return decodeBytes(bytes, what);
  if (typeof image === 'string') {
    if (/^(data|blob|https?):/i.test(image)) return decodeBytes(await fetchBytes(image, what, signal), what);
    if (isNode) {
      const fs = await import('node:fs/promises');
      let b;
      try {
        b = await fs.readFile(image.startsWith('file:') ? new URL(image) : image);
      } catch (e) {
        throw bad(`${what}: cannot read ${image} (${e?.code ?? e?.message ?? e})`);
      }
      return decodeBytes(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), what);
    }
    throw bad(`${what}: a string must be a data:, blob: or http(s): URL`);
  }
  if (typeof ImageBitmap === 'function' && image instanceof ImageBitmap) return decodeBitmap(image, what);
  if (typeof Blob === 'function' && image instanceof Blob) {
    return decodeBytes(new Uint8Array(await image.arrayBuffer()), what);
  }
  if (typeof image === 'object' && 'width' in image && 'height' in image && 'data' in image) return rawPixels(image, what);
  throw bad(`${what}: unsupported image (bytes, a Blob, an ImageBitmap, {width, height, data} or a URL string)`);
}

function fnv64(bytes) { // two 32-bit FNV-1a lanes: where crypto.subtle is missing (plain-http pages)
  let a = 0x811c9dc5, b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < bytes.length; i++) {
    a = Math.imul(a ^ bytes[i], 0x01000193);
    b = Math.imul(b ^ bytes[i], 0x5bd1e995);
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}

/** A key for a decoded image: its size and a SHA-256 of its pixels (equal pixels, equal key). */
export async function imageKey({ width, height, rgb }) {
  let h;
  if (globalThis.crypto?.subtle) {
    const d = new Uint8Array(await crypto.subtle.digest('SHA-256', rgb));
    h = Array.from(d, (v) => v.toString(16).padStart(2, '0')).join('');
  } else {
    h = fnv64(rgb);
  }
  return `${width}x${height}:${h}`;
}

/**
 * An OpenAI content part that holds an image → the image in a form decodeImage takes, or
 * undefined when the part is not an image. Accepted: {type: 'image_url', image_url: {url} or a
 * URL string} (data:, blob:, http(s):), and as extensions {type: 'image', image} (bytes, Blob,
 * ImageBitmap, raw pixels, a URL). Never a file path: a request body (wasmlm serve) must not
 * read the server's files. Unknown keys are refused, naming them.
 */
export function imagePart(p, where) {
  if (!p || typeof p !== 'object') return undefined;
  if (p.type === 'image_url') {
    checkOptions(where, p, ['type', 'image_url'], { noun: 'key', keepUndefined: true });
    const u = p.image_url;
    if (typeof u !== 'string' && (!u || typeof u !== 'object' || typeof u.url !== 'string')) throw bad(`${where}.image_url: {url: string} is required`);
    if (typeof u !== 'string') checkOptions(`${where}.image_url`, u, ['url', 'detail'], { noun: 'key', keepUndefined: true });
    const url = typeof u === 'string' ? u : u.url;
    // a URL only: never a file path (a request body must not read the server's files)
    if (!/^(data|blob|https?):/i.test(url)) throw bad(`${where}.image_url.url: a data:, blob: or http(s): URL is required`);
    return url;
  }
  if (p.type === 'image') {
    checkOptions(where, p, ['type', 'image'], { noun: 'key', keepUndefined: true });
    if (p.image == null) throw bad(`${where}.image is required`);
    if (typeof p.image === 'string' && !/^(data|blob|https?):/i.test(p.image)) { // never a file path (see above)
      throw bad(`${where}.image: a string must be a data:, blob: or http(s): URL`);
    }
    return p.image;
  }
  return undefined;
}

/**
 * Chat messages whose content may hold image parts → {messages, images}: each image part
 * replaced by a text part holding the media marker (as llama.cpp's server does before it
 * renders the template), the images in order. Messages without image parts are returned as
 * they are. A marker typed by the caller in the text is refused (it would take an image).
 */
export function extractImages(messages) {
  const images = [];
  if (!Array.isArray(messages)) return { messages, images };
  const typed = [];
  const out = messages.map((m, i) => {
    if (!m || typeof m !== 'object') return m;
    if (typeof m.content === 'string' && m.content.includes(MEDIA_MARKER)) typed.push(`messages[${i}].content`);
    if (!Array.isArray(m.content)) return m;
    let has = false;
    const content = m.content.map((p, j) => {
      const img = imagePart(p, `messages[${i}].content[${j}]`);
      if (img === undefined) {
        if (p && typeof p.text === 'string' && p.text.includes(MEDIA_MARKER)) typed.push(`messages[${i}].content[${j}]`);
        return p;
      }
      has = true;
      images.push(img);
      return { type: 'text', text: MEDIA_MARKER };
    });
    return has ? { ...m, content } : m;
  });
  if (images.length && typed.length) { // it would take an image
    throw bad(`${typed[0]} contains the media marker ${MEDIA_MARKER}: with image parts, images go in parts only`);
  }
  return { messages: out, images };
}

/**
 * Messages whose content is an array of text parts (image parts already made markers by
 * extractImages) → the same with the texts joined, as chatCompletion joins them. Another part
 * type is refused, naming it.
 */
export function joinTextParts(messages) {
  if (!Array.isArray(messages)) return messages;
  return messages.map((m, i) => {
    if (!m || typeof m !== 'object' || !Array.isArray(m.content)) return m;
    const content = m.content.map((p, j) => {
      if (!p || typeof p !== 'object' || p.type !== 'text' || typeof p.text !== 'string') {
        throw bad(`messages[${i}].content[${j}]: only {type: 'text', text} and image parts ({type: 'image_url', image_url: {url}}, ` +
          `{type: 'image', image}) are supported${p && typeof p.type === 'string' ? ` (got type '${p.type}')` : ''}`);
      }
      return p.text;
    }).join('');
    return { ...m, content };
  });
}
