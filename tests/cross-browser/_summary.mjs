// _summary.mjs — a node --test reporter that writes one closing line counting the tests of the
// run: "N tests: N passed, N failed, N skipped (S s)". tools/test.sh adds it after the spec
// reporter for tests/cross-browser/, so the stage ends with its count.
//
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//     --test-reporter=./tests/cross-browser/_summary.mjs --test-reporter-destination=stdout tests/cross-browser/

export default async function* summary(source) {
  const t0 = Date.now();
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for await (const event of source) {
    // Top-level tests only; every file's tests are at nesting 0 when node --test runs files.
    if (event.data?.nesting !== 0) continue;
    if (event.type === 'test:pass') {
      if (event.data.skip || event.data.todo) skipped++;
      else passed++;
    } else if (event.type === 'test:fail') failed++;
  }
  const n = passed + failed + skipped;
  yield `${n} test${n === 1 ? '' : 's'}: ${passed} passed, ${failed} failed, ${skipped} skipped ` +
    `(${((Date.now() - t0) / 1000).toFixed(0)} s)\n`;
}
