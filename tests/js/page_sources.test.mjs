// page_sources.test.mjs — web/sources.js's reading of a local GGUF's header (the demo page tells
// a vision projector, general.architecture "clip", from a text model by it): the key found
// where it is, after a vocabulary array larger than the first read (the read grows), and null
// for a file that is not GGUF, cut short, or without the key; and planFromEntry's mmproj part.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { ggufArchitecture, planFromEntry } from '../../web/sources.js';
import { ggufBytes } from '../../tools/vocab_gguf.mjs';
import { mmprojBytes } from '../../tools/synth_mmproj.mjs';
import { MODELS } from './_helpers.mjs';

const blob = (b) => new Blob([b]);

test('ggufArchitecture: clip for an mmproj, the text model\'s architecture, null otherwise', async () => {
  assert.equal(await ggufArchitecture(blob(mmprojBytes({ shape: 'gemma3-tiny', type: 'F32', seed: 1 }))), 'clip');
  assert.equal(await ggufArchitecture(blob(fs.readFileSync(`${MODELS}/stories260K.gguf`))), 'llama');
  // after 200 000 strings (about 2.6 MB of header: past the first 64 KiB read)
  const tokens = Array.from({ length: 200000 }, (_, i) => `token-${i}`);
  const late = ggufBytes([['tokenizer.ggml.tokens', 'arr:str', tokens], ['general.alignment', 'u32', 32], ['general.architecture', 'str', 'clip']], []);
  assert.ok(late.length > 2e6);
  assert.equal(await ggufArchitecture(blob(late)), 'clip');
  assert.equal(await ggufArchitecture(blob(late.subarray(0, late.length - 3))), null, 'cut short inside the key');
  assert.equal(await ggufArchitecture(blob(ggufBytes([['general.name', 'str', 'x']], []))), null, 'no such key');
  assert.equal(await ggufArchitecture(blob(ggufBytes([['general.architecture', 'u32', 7]], []))), null, 'not a string');
  assert.equal(await ggufArchitecture(blob(Buffer.from('not a gguf file at all'))), null);
  assert.equal(await ggufArchitecture(blob(fs.readFileSync(`${MODELS}/stories260K.bin`))), null);
  // a length that claims more than the file (and than the read's limit): null, not a hang
  const bad = Buffer.from(ggufBytes([['general.architecture', 'str', 'clip']], []));
  bad.writeBigUInt64LE(1n << 60n, 24); // the key's length
  assert.equal(await ggufArchitecture(blob(bad)), null);
});

test('planFromEntry: an entry\'s mmproj is a part of its own, checked as the model is', () => {
  const entry = { id: 'v', format: 'gguf', file: 'v.gguf', url: 'https://h/v.gguf', size: 10, sha256: 'a'.repeat(64), verified: true,
    mmproj: { file: 'mmproj-v.gguf', url: 'https://h/mmproj-v.gguf', size: null, sha256: null, verified: false, listedSize: 5 } };
  const plan = planFromEntry(entry);
  assert.deepEqual(plan.parts.map((p) => [p.stage, p.name, p.verified]), [['model', 'v.gguf', true], ['mmproj', 'mmproj-v.gguf', false]]);
  assert.equal(plan.verified, false, 'an unverified mmproj makes the plan unverified');
  assert.equal(plan.parts[1].candidates.at(-1), 'https://h/mmproj-v.gguf');
});
