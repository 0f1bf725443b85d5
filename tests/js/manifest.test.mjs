// manifest.test.mjs — models/manifest.json against the published sizes and sha256 that
// independent public projects pin (../shared/reference/published-model-files.md, and for the
// hybrids, Qwen3.5 and LFM2.5, the table in models/README.md; both read here as the markdown
// tables they are): every entry has a size and a sha256 equal to the table's, or, where the
// table has none, says why in `unverified`; its URL is the table's repository and file, at
// resolve/main or at its pinned revision (the revision the table names, where it names one); the
// entries without a row (stories260K and the Llama 2 tokenizer.bin) carry the sha256 of the
// copies in ../shared/models.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { REPO, SHARED, MODELS } from './_helpers.mjs';

const manifest = JSON.parse(fs.readFileSync(path.join(REPO, 'models/manifest.json'), 'utf8'));
const TABLE = path.join(SHARED, 'reference/published-model-files.md');
const README = path.join(REPO, 'models/README.md');

/**
 * The table's rows: { id, repo, file (the name, or its tail after "…"), size, sha256, revision }
 * with size and sha256 null where the table gives none ("–"), revision the commit id written in
 * the last cell (`…40 hex…`) or null. "same repo" is the previous row's. Only 5-cell rows count.
 */
function publishedTable(markdown) {
  const rows = [];
  let repo = null;
  for (const line of markdown.split('\n')) {
    const cells = line.split('|').slice(1, -1).map((c) => c.trim());
    if (cells.length !== 5 || cells[0] === 'id' || /^-+$/.test(cells[0])) continue;
    const [id, where, bytes, sha, sources] = cells;
    const r = /(?:\*\*use\*\* )?([\w.-]+\/[\w.-]+) `([^`]+)`/.exec(where);
    const same = /^same repo, `([^`]+)`/.exec(where);
    if (r) repo = r[1];
    const file = (r ? r[2] : same ? same[1] : null);
    rows.push({
      id, repo: r || same ? repo : null, file,
      size: /^\d+$/.test(bytes) ? Number(bytes) : null,
      sha256: /^[0-9a-f]{64}$/.test(sha) ? sha : null,
      revision: /`([0-9a-f]{40})`/.exec(sources)?.[1] ?? null,
    });
  }
  return rows;
}

const sharedRows = publishedTable(fs.readFileSync(TABLE, 'utf8'));
const readmeRows = publishedTable(fs.readFileSync(README, 'utf8'));
/** models/README.md's rows of vision projectors: "<model id> mmproj", pinning that entry's mmproj. */
const mmprojRows = readmeRows.filter((r) => / mmproj$/.test(r.id));
const hybridRows = readmeRows.filter((r) => !/ mmproj$/.test(r.id));
const rows = [...sharedRows, ...hybridRows];
const sha256Of = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

test('the table parses: one row per published model, sizes and hashes where it has them', () => {
  assert.ok(sharedRows.length >= 20, `${sharedRows.length} rows`);
  const withHash = sharedRows.filter((r) => r.sha256 && r.size);
  assert.ok(withHash.length >= 20, `${withHash.length} rows with size and sha256`);
  assert.ok(sharedRows.some((r) => r.id === 'gpt2-q8_0' && r.sha256 === null), 'gpt2-q8_0 has no published hash');
});

test('models/README.md\'s tables parse: Qwen3.5 0.8B and 2B, LFM2.5 1.2B (Q4_K_M, Q8_0), the vision pairs', () => {
  // the hybrids, pinned; the rows without a published size or hash (SmolLM3, Gemma 4, the MoE
  // models, gpt-oss) are checked below and by the next test (their entries say why)
  assert.deepEqual(hybridRows.filter((r) => r.sha256).map((r) => r.id).sort(), [
    'gemma-3-4b-it-q4_k_m', 'lfm2.5-1.2b-instruct-q4_k_m', 'lfm2.5-1.2b-instruct-q8_0',
    'qwen3.5-0.8b-q4_k_m', 'qwen3.5-0.8b-q8_0', 'qwen3.5-2b-q4_k_m', 'qwen3.5-2b-q8_0',
    'smolvlm-256m-instruct-q8_0',
  ]);
  assert.deepEqual(hybridRows.filter((r) => !r.sha256).map((r) => r.id).sort(), [
    'gemma-4-e2b-it-q4_k_m', 'gemma-4-e2b-it-q8_0', 'gpt-oss-20b-mxfp4', 'lfm2-8b-a1b-q4_k_m',
    'qwen3-30b-a3b-q2_k', 'smollm3-3b-q4_k_m', 'smollm3-3b-q8_0',
  ]);
  for (const r of hybridRows.filter((x) => !x.sha256)) {
    assert.ok(r.repo && r.file && r.size === null && r.revision === null, `${r.id}: repository and file, no size, sha256 or revision`);
  }
  for (const r of hybridRows.filter((x) => x.sha256)) {
    // SmolVLM's sources name no revision (resolve/main); every other pinned row names one
    const revision = r.id === 'smolvlm-256m-instruct-q8_0' || r.revision;
    assert.ok(r.size && r.sha256 && revision && r.repo && r.file, `${r.id}: size, sha256, revision, repository, file`);
  }
  // no id twice across the two tables
  assert.equal(new Set(rows.map((r) => r.id)).size, rows.length);
});

test('every manifest entry has the table\'s size and sha256, or says why it has none', () => {
  for (const e of manifest.models) {
    const row = rows.find((r) => r.id === e.id);
    if (row && row.sha256) {
      assert.equal(e.size, row.size, `${e.id}: size`);
      assert.equal(e.sha256, row.sha256, `${e.id}: sha256`);
      assert.equal(e.verified, true, `${e.id}: verified`);
      assert.match(e.checksumSource, /^published: /, `${e.id}: checksumSource`);
    } else if (row) {
      assert.equal(e.sha256, null, `${e.id}: no published sha256, none in the manifest`);
      assert.equal(e.verified, false, `${e.id}`);
      assert.ok(typeof e.unverified === 'string' && e.unverified.length > 20, `${e.id}: unverified says why`);
    } else {
      // not in the table: the manifest's values are those of the copy in ../shared/models
      const file = path.join(MODELS, e.file);
      assert.ok(fs.existsSync(file), `${e.id}: neither a table row nor a copy in ../shared/models`);
      assert.equal(e.size, fs.statSync(file).size, `${e.id}: size of ${file}`);
      assert.equal(e.sha256, sha256Of(file), `${e.id}: sha256 of ${file}`);
      assert.match(e.checksumSource, /^checked: /, `${e.id}: checksumSource`);
    }
    if (e.sha256 !== null) {
      assert.match(e.sha256, /^[0-9a-f]{64}$/, e.id);
      assert.ok(Number.isSafeInteger(e.size) && e.size > 0, `${e.id}: size`);
    }
    if (e.tokenizer) {
      const file = path.join(MODELS, e.tokenizer.file);
      assert.equal(e.tokenizer.sha256, sha256Of(file), `${e.id}: tokenizer sha256 of ${file}`);
      assert.equal(e.tokenizer.size, fs.statSync(file).size, `${e.id}: tokenizer size`);
    }
  }
  // every row with a hash is in the manifest
  for (const r of rows.filter((x) => x.sha256 && !x.id.startsWith('('))) {
    assert.ok(manifest.models.some((e) => e.id === r.id), `${r.id}: in the table, not in the manifest`);
  }
});

test('every URL is the table\'s repository and file, at resolve/main or its pinned revision', () => {
  for (const e of manifest.models) {
    const row = rows.find((r) => r.id === e.id);
    const m = /^https:\/\/huggingface\.co\/([\w.-]+\/[\w.-]+)\/resolve\/([^/]+)\/(.+)$/.exec(e.url);
    assert.ok(m, `${e.id}: ${e.url} is a Hugging Face resolve URL`);
    const [, repo, rev, file] = m;
    if (row?.revision) assert.equal(e.revision, row.revision, `${e.id}: the revision the table names`);
    if (e.revision) {
      assert.match(e.revision, /^[0-9a-f]{40}$/, `${e.id}: revision is a commit id`);
      assert.equal(rev, e.revision, `${e.id}: the URL is pinned to the revision`);
    } else {
      assert.equal(rev, 'main', `${e.id}: no revision, resolve/main`);
    }
    assert.equal(path.posix.basename(file), e.file, `${e.id}: the URL names the file`);
    if (!row) continue;
    assert.equal(repo, row.repo, `${e.id}: repository`);
    if (row.file.startsWith('…')) assert.ok(file.endsWith(row.file.slice(1)), `${e.id}: ${file} ends like ${row.file}`);
    else assert.equal(file, row.file, `${e.id}: file`);
  }
  // the official HuggingFaceTB Q8_0 of SmolLM2 360M, not bartowski's (which has no published hash)
  assert.match(manifest.models.find((e) => e.id === 'smollm2-360m-instruct-q8_0').url,
    /\/HuggingFaceTB\/SmolLM2-360M-Instruct-GGUF\/resolve\/[0-9a-f]{40}\/smollm2-360m-instruct-q8_0\.gguf$/);
});

test('a tokenizer URL on GitHub is pinned to a commit', () => {
  for (const e of manifest.models.filter((x) => x.tokenizer?.url.includes('githubusercontent'))) {
    assert.match(e.tokenizer.url, /^https:\/\/raw\.githubusercontent\.com\/karpathy\/llama2\.c\/([0-9a-f]{40})\/tokenizer\.bin$/, e.id);
    assert.ok(e.tokenizer.url.includes(e.tokenizer.revision), e.id);
  }
});

test('an unverified entry may carry listedSize (the size it is shown with, never checked); the ones past wasm32 have one', async () => {
  const { WASM32_BYTES, WASM32_FIT } = await import('../../js/runtime/memory64.js');
  for (const e of manifest.models) {
    if (e.listedSize === undefined) continue;
    assert.equal(e.verified, false, `${e.id}: listedSize only on unverified entries (a verified one has size)`);
    assert.equal(e.size, null, `${e.id}: listedSize, not size: a size would be checked on download`);
    assert.ok(Number.isSafeInteger(e.listedSize) && e.listedSize > 0, `${e.id}: listedSize in bytes`);
  }
  // the memory64 models of issue 43, and Gemma 4 E2B, at the sizes their listings give
  const listed = Object.fromEntries(manifest.models.map((e) => [e.id, e.size ?? e.listedSize ?? null]));
  const past = (id) => listed[id] > WASM32_BYTES * WASM32_FIT;
  for (const id of ['gpt-oss-20b-mxfp4', 'qwen3-30b-a3b-q2_k', 'lfm2-8b-a1b-q4_k_m', 'gemma-4-e2b-it-q8_0']) {
    assert.ok(past(id), `${id}: ${listed[id]} bytes, past wasm32's 4 GB`);
  }
  assert.ok(!past('gemma-4-e2b-it-q4_k_m') && listed['gemma-4-e2b-it-q4_k_m'] > 2e9, 'Gemma 4 E2B Q4_K_M fits wasm32');
  // Qwen3-30B-A3B at a quantization whose file leaves room under 16 GiB (issue 43: about 11-14 GB)
  assert.ok(listed['qwen3-30b-a3b-q2_k'] >= 11e9 && listed['qwen3-30b-a3b-q2_k'] <= 14e9);
  assert.ok(Math.abs(listed['gpt-oss-20b-mxfp4'] - 12.1e9) < 0.1e9, 'gpt-oss-20b: 12.1 GB');
  for (const e of manifest.models.filter((x) => x.nCtx !== undefined)) {
    assert.ok(Number.isInteger(e.nCtx) && e.nCtx >= 256, `${e.id}: nCtx a context length`);
  }
  assert.equal(manifest.models.find((e) => e.id === 'gpt-oss-20b-mxfp4').nCtx, 32768);
});

/**
 * What is wrong with an entry's optional `mmproj` (a vision model's projector, loaded with the
 * model: web/sources.js planFromEntry, models/fetch.mjs), as a list of problems (empty: fine).
 * Pinned as a model is (size and sha256, verified), or unverified with the reason and at most
 * a listedSize (never a size, which would be checked); a GGUF entry only, its file a .gguf.
 */
function mmprojProblems(e) {
  const m = e.mmproj;
  if (m === undefined) return [];
  const bad = [];
  if (!m || typeof m !== 'object') return [`${e.id}: mmproj is an object`];
  const known = ['file', 'url', 'revision', 'size', 'sha256', 'verified', 'checksumSource', 'unverified', 'listedSize'];
  for (const k of Object.keys(m)) if (!known.includes(k)) bad.push(`${e.id}: mmproj.${k} is not a manifest key`);
  if (e.format !== 'gguf') bad.push(`${e.id}: an mmproj goes with a GGUF model`);
  if (typeof m.file !== 'string' || !/\.gguf$/.test(m.file)) bad.push(`${e.id}: mmproj.file is a .gguf name`);
  const u = typeof m.url === 'string' && /^https:\/\/huggingface\.co\/([\w.-]+\/[\w.-]+)\/resolve\/([^/]+)\/(.+)$/.exec(m.url);
  if (!u) bad.push(`${e.id}: mmproj.url is a Hugging Face resolve URL`);
  else if (path.posix.basename(u[3]) !== m.file) bad.push(`${e.id}: mmproj.url names mmproj.file`);
  if (m.verified === true) {
    if (!(Number.isSafeInteger(m.size) && m.size > 0)) bad.push(`${e.id}: a verified mmproj has a size`);
    if (!/^[0-9a-f]{64}$/.test(m.sha256 ?? '')) bad.push(`${e.id}: a verified mmproj has a sha256`);
    if (typeof m.checksumSource !== 'string' || !/^(published|checked): /.test(m.checksumSource)) bad.push(`${e.id}: mmproj.checksumSource`);
    if (m.listedSize !== undefined) bad.push(`${e.id}: listedSize only on an unverified mmproj`);
  } else if (m.verified === false) {
    if (m.sha256 !== null) bad.push(`${e.id}: an unverified mmproj has no sha256 (null)`);
    if (m.size !== null) bad.push(`${e.id}: an unverified mmproj has no size (null): listedSize, never checked`);
    if (!(typeof m.unverified === 'string' && m.unverified.length > 20)) bad.push(`${e.id}: an unverified mmproj says why`);
    if (m.listedSize !== undefined && !(Number.isSafeInteger(m.listedSize) && m.listedSize > 0)) bad.push(`${e.id}: mmproj.listedSize in bytes`);
  } else bad.push(`${e.id}: mmproj.verified is true or false`);
  return bad;
}

test('the vision pairs\' projectors are the table\'s files: repository, file, size, sha256, revision', () => {
  assert.deepEqual(mmprojRows.map((r) => r.id).sort(), ['gemma-3-4b-it-q4_k_m mmproj', 'smolvlm-256m-instruct-q8_0 mmproj']);
  for (const r of mmprojRows) {
    const id = r.id.replace(/ mmproj$/, '');
    const e = manifest.models.find((x) => x.id === id);
    assert.ok(e?.mmproj, `${id}: an entry with an mmproj`);
    const m = e.mmproj;
    assert.equal(m.size, r.size, `${id}: mmproj size`);
    assert.equal(m.sha256, r.sha256, `${id}: mmproj sha256`);
    assert.equal(m.verified, true, `${id}: mmproj verified`);
    assert.equal(m.revision, r.revision, `${id}: mmproj revision`);
    assert.equal(m.url, `https://huggingface.co/${r.repo}/resolve/${r.revision ?? 'main'}/${r.file}`, `${id}: mmproj url`);
    assert.equal(m.file, r.file, `${id}: mmproj file`);
    // the projector comes from the model's own repository and revision
    assert.equal(m.revision, e.revision, `${id}: the model's revision`);
  }
  // every entry with a verified mmproj has its row
  for (const e of manifest.models.filter((x) => x.mmproj?.verified)) {
    assert.ok(mmprojRows.some((r) => r.id === `${e.id} mmproj`), `${e.id}: its mmproj row in models/README.md`);
  }
});

test('an entry\'s optional mmproj (a vision model\'s projector) is pinned, or unverified with why; the checks refuse a bad one', () => {
  for (const e of manifest.models) assert.deepEqual(mmprojProblems(e), [], e.id);
  // the check itself, on entries made here
  const base = { id: 'x', format: 'gguf' };
  const url = (f) => `https://huggingface.co/ggml-org/x-GGUF/resolve/main/${f}`;
  const pinned = { file: 'mmproj-x.gguf', url: url('mmproj-x.gguf'), revision: null, size: 5, sha256: 'a'.repeat(64),
    verified: true, checksumSource: 'published: a table' };
  const listed = { file: 'mmproj-x.gguf', url: url('mmproj-x.gguf'), revision: null, size: null, sha256: null,
    verified: false, listedSize: 851000000, unverified: 'no public sha256 of this file was found' };
  assert.deepEqual(mmprojProblems({ ...base, mmproj: pinned }), []);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: listed }), []);
  assert.deepEqual(mmprojProblems({ ...base, format: 'llama2c', mmproj: pinned }), ['x: an mmproj goes with a GGUF model']);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: { ...listed, size: 851000000 } }),
    ['x: an unverified mmproj has no size (null): listedSize, never checked']);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: { ...listed, sha256: 'b'.repeat(64) } }), ['x: an unverified mmproj has no sha256 (null)']);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: { ...pinned, sha256: null } }), ['x: a verified mmproj has a sha256']);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: { ...pinned, url: url('other.gguf') } }), ['x: mmproj.url names mmproj.file']);
  assert.deepEqual(mmprojProblems({ ...base, mmproj: { ...pinned, sha: 1 } }), ['x: mmproj.sha is not a manifest key']);
});
