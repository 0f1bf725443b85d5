#!/usr/bin/env node
// cli_user_defined.mjs — CTest (cli_tokenize_user_defined): `wasmlm tokenize` against llama.cpp's
// own tokenization of texts holding user-defined tokens (token type 4: split out of raw text even
// without special-token parsing) and control tokens written as text, for every vocabulary of
// ../shared/models/vocab that has user-defined tokens and for the Qwen3 and Gemma 3 vocabularies
// built from the npm packages. The expected ids are tests/reference/tokenize/user_defined.json,
// recorded from llama.cpp b11364 (@wllama/wllama) by tools/oracle_tokenize.mjs; they are sorted
// (the recording sees ids and counts, not their order), so ours are sorted before comparing.
// Also checks that the record covers every such vocabulary and that each vocabulary file is the
// one llama.cpp read (size and sha256).
// With RECORD (a file of tests/reference/tokenize/ written by `tools/oracle_tokenize.mjs --set`,
// e.g. pretok.json: the qwen35 and lfm2 pre-tokenizers and the gemma4 tokenizer model, from
// llama.cpp b12211) it checks that
// record's vocabularies and texts the same way, without the coverage check.
//
//   node tests/c/cli_user_defined.mjs CLI SHARED WORK [RECORD]
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readGguf, vocabGguf } from '../../tools/vocab_gguf.mjs';
import { NPM_VOCABS, userDefinedIds } from '../../tools/oracle_tokenize.mjs';

const [cli, shared, work, recordArg] = process.argv.slice(2);
if (!cli || !shared || !work) throw new Error('usage: node tests/c/cli_user_defined.mjs CLI SHARED WORK [RECORD]');
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const recordFile = recordArg ?? path.join(REPO, 'tests/reference/tokenize/user_defined.json');
const record = JSON.parse(fs.readFileSync(recordFile, 'utf8'));
const vocabDir = path.join(shared, 'models/vocab');
fs.mkdirSync(work, { recursive: true });

let passed = 0, failed = 0;
const check = (ok, what) => {
  if (ok) passed++;
  else { failed++; console.error(`FAIL: ${what}`); }
};

// Every vocabulary file with user-defined tokens has texts in the record.
const recorded = new Set(record.vocabs.map((v) => v.file));
for (const f of recordArg ? [] : fs.readdirSync(vocabDir).filter((x) => x.endsWith('.gguf'))) {
  const n = userDefinedIds(readGguf(path.join(vocabDir, f)).kv).length;
  if (n) check(recorded.has(f), `${f} has ${n} user-defined tokens but no texts in the record (tools/oracle_tokenize.mjs)`);
}

for (const v of record.vocabs) {
  let file = path.join(vocabDir, v.file);
  if (v.built) {
    if (!NPM_VOCABS[v.file]) { check(false, `${v.file}: not a vocabulary tools/oracle_tokenize.mjs builds`); continue; }
    file = path.join(work, `${v.file}.gguf`);
    fs.writeFileSync(file, vocabGguf(NPM_VOCABS[v.file]));
  }
  const bytes = fs.readFileSync(file);
  const sha = crypto.createHash('sha256').update(bytes).digest('hex');
  check(bytes.length === v.size && sha === v.sha256,
    `${v.file}: ${bytes.length} bytes, sha256 ${sha}; llama.cpp read ${v.size} bytes, ${v.sha256} (regenerate with tools/oracle_tokenize.mjs)`);
  for (const c of v.cases) {
    const r = spawnSync(cli, ['tokenize', file], { input: c.text, encoding: 'utf8' });
    const ours = r.status === 0 ? r.stdout.trim().split(/\s+/).filter(Boolean).map(Number) : null;
    const sorted = ours && [...ours].sort((a, b) => a - b);
    check(sorted && JSON.stringify(sorted) === JSON.stringify(c.ids),
      `${v.file} ${JSON.stringify(c.text)}: ours ${ours ? ours.join(' ') : `exit ${r.status} ${r.stderr}`}, ` +
      `llama.cpp (sorted) ${c.ids.join(' ')}`);
  }
}
if (!failed) fs.rmSync(work, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
