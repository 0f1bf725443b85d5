// tool_calls/json_scan.js — validating, iterative JSON scanning for the streaming parsers: a
// value or an object's members scanned from a position with a checkpoint to resume from when
// more text arrives (complete, partial or an error at a position), never recursing on nesting
// depth and linear in the text held; and the white-space helpers both parsers share.

export const WS = new Set([' ', '\t', '\n', '\r']);
const PARTIAL = Object.freeze({ state: 'partial' });
const err = (at, why) => ({ state: 'error', at, why });

/** White space dropped before a call (or after the last one), at most: a bound, so that text
 *  held while it may precede a call stays short (and streaming linear). */
export const MAX_HELD_WS = 64;

/** `s` without its trailing JSON white space, MAX_HELD_WS characters of it at most. */
export function trimWs(s) {
  let e = s.length;
  while (e > 0 && s.length - e < MAX_HELD_WS && WS.has(s[e - 1])) e--;
  return s.slice(0, e);
}

export function skipWs(s, i) {
  while (i < s.length && WS.has(s[i])) i++;
  return i;
}

/** A JSON string at s[i] === '"': complete (end after the quote), partial or error. `from`
 *  resumes a partial scan (its result's `from`: where the characters not yet checked begin). */
export function scanString(s, i, from = i + 1) {
  const n = s.length;
  for (let j = from; j < n; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x22) return { state: 'complete', end: j + 1 };
    if (c < 0x20) return err(j, 'a control character in a string');
    if (c === 0x5c) {
      if (j + 1 >= n) return { state: 'partial', from: j };
      const e = s[j + 1];
      if (e === 'u') {
        for (let k = 2; k < 6; k++) {
          if (j + k >= n) return { state: 'partial', from: j };
          if (!/[0-9a-fA-F]/.test(s[j + k])) return err(j + k, 'a bad \\u escape');
        }
        j += 5;
      } else if ('"\\/bfnrt'.includes(e)) {
        j += 1;
      } else {
        return err(j + 1, 'a bad escape');
      }
    }
  }
  return { state: 'partial', from: n };
}

/** A JSON number at s[i]: complete once a character follows it (at the end: partial). */
export function scanNumber(s, i) {
  const n = s.length;
  let j = i;
  if (s[j] === '-') j++;
  if (j >= n) return PARTIAL;
  if (s[j] === '0') j++;
  else if (s[j] >= '1' && s[j] <= '9') while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  else return err(j, 'a bad number');
  if (j < n && s[j] === '.') {
    j++;
    if (j >= n) return PARTIAL;
    if (!(s[j] >= '0' && s[j] <= '9')) return err(j, 'a bad number');
    while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  }
  if (j < n && (s[j] === 'e' || s[j] === 'E')) {
    j++;
    if (j < n && (s[j] === '+' || s[j] === '-')) j++;
    if (j >= n) return PARTIAL;
    if (!(s[j] >= '0' && s[j] <= '9')) return err(j, 'a bad number');
    while (j < n && s[j] >= '0' && s[j] <= '9') j++;
  }
  return j >= n ? PARTIAL : { state: 'complete', end: j };
}

function scanScalar(s, i, from) {
  const c = s[i];
  if (c === '"') return scanString(s, i, from);
  if (c === '-' || (c >= '0' && c <= '9')) return scanNumber(s, i);
  for (const lit of ['true', 'false', 'null']) {
    if (c !== lit[0]) continue;
    const have = s.slice(i, i + lit.length);
    if (lit.startsWith(have)) return have.length < lit.length ? PARTIAL : { state: 'complete', end: i + lit.length };
    let k = 0;
    while (have[k] === lit[k]) k++;
    return err(i + k, 'a bad literal'); // at the first wrong character: never inside a partial
  }
  return err(i, `unexpected ${JSON.stringify(c)}`);
}

/**
 * One JSON value starting at s[i] (no whitespace before it): {state: 'complete', end} |
 * {state: 'partial', ck} (every character so far belongs to it) | {state: 'error', at, why}. A
 * number at the very end is partial (more digits may follow). `ck`, a partial result's
 * checkpoint, resumes the scan when more text has been appended to `s` (then `i` is ignored):
 * streaming scans each character about once instead of re-reading the value from its start.
 * The checkpoint is owned by the scan that gets it (do not resume from one twice).
 */
export function scanValue(s, i, ck = null) {
  const n = s.length;
  const stack = ck ? ck.stack : [];
  let expect = ck ? ck.expect : 'value';
  let from = ck ? ck.from : undefined; // inside a string at ck.i: its characters checked so far
  if (ck) i = ck.i;
  for (;;) {
    if (stack.length) i = skipWs(s, i);
    const at = i; // the state here is the checkpoint of any partial result of this iteration
    const strFrom = from;
    from = undefined;
    const partial = (r) => ({ state: 'partial', ck: { i: at, stack, expect, from: r?.from } });
    if (i >= n) return partial();
    const c = s[i];
    if (expect === 'value' || expect === 'value-or-close') {
      if (expect === 'value-or-close' && c === ']') {
        stack.pop();
        i++;
      } else if (c === '{') {
        stack.push('{');
        i++;
        expect = 'key-or-close';
        continue;
      } else if (c === '[') {
        stack.push('[');
        i++;
        expect = 'value-or-close';
        continue;
      } else {
        const r = scanScalar(s, i, strFrom);
        if (r.state === 'partial') return partial(r);
        if (r.state !== 'complete') return r;
        i = r.end;
      }
      if (!stack.length) return { state: 'complete', end: i };
      expect = 'comma-or-close';
    } else if (expect === 'key-or-close' || expect === 'key') {
      if (expect === 'key-or-close' && c === '}') {
        stack.pop();
        i++;
        if (!stack.length) return { state: 'complete', end: i };
        expect = 'comma-or-close';
        continue;
      }
      if (c !== '"') return err(i, 'expected a key');
      const r = scanString(s, i, strFrom);
      if (r.state === 'partial') return partial(r);
      if (r.state !== 'complete') return r;
      i = skipWs(s, r.end);
      if (i >= n) return partial();
      if (s[i] !== ':') return err(i, "expected ':'");
      i++;
      i = skipWs(s, i);
      expect = 'value';
    } else { // comma-or-close
      const top = stack[stack.length - 1];
      if (c === ',') {
        i++;
        expect = top === '{' ? 'key' : 'value';
      } else if (c === (top === '{' ? '}' : ']')) {
        stack.pop();
        i++;
        if (!stack.length) return { state: 'complete', end: i };
      } else {
        return err(i, `expected ',' or '${top === '{' ? '}' : ']'}'`);
      }
    }
  }
}

/**
 * The top-level members of a JSON object at s[i] === '{': {state, end?, members: [{key,
 * start, end}], ck?} where a member's end is null while its value is partial. `ck` (a partial
 * result's checkpoint) resumes the scan on a longer `s`, as scanValue's; the members array is
 * carried along (the same array, members appended and completed in place).
 */
export function scanMembers(s, i, ck = null) {
  const n = s.length;
  const st = ck ?? { i: i + 1, members: [], first: true, m: null, vck: null };
  const { members } = st;
  i = st.i;
  for (;;) {
    if (st.m) { // a member's value in progress
      const v = scanValue(s, st.m.start, st.vck);
      if (v.state === 'partial') { st.vck = v.ck; return { state: 'partial', members, ck: st }; }
      if (v.state !== 'complete') return { ...v, members };
      st.m.end = v.end;
      i = v.end;
      st.m = null;
      st.vck = null;
      st.first = false;
    }
    i = skipWs(s, i);
    const at = i;
    const partial = () => { st.i = at; return { state: 'partial', members, ck: st }; };
    if (i >= n) return partial();
    if (s[i] === '}') return { state: 'complete', end: i + 1, members }; // {} or after a member (a ',' is read with its key)
    if (!st.first) {
      if (s[i] !== ',') return { ...err(i, "expected ',' or '}'"), members };
      i = skipWs(s, i + 1);
      if (i >= n) return partial();
    }
    if (s[i] !== '"') return { ...err(i, 'expected a key'), members };
    const k = scanString(s, i, st.key === i ? st.kfrom : undefined);
    if (k.state === 'partial') { st.key = i; st.kfrom = k.from; return partial(); }
    if (k.state !== 'complete') return { ...k, members };
    const key = JSON.parse(s.slice(i, k.end));
    i = skipWs(s, k.end);
    if (i >= n) return partial();
    if (s[i] !== ':') return { ...err(i, "expected ':'"), members };
    i = skipWs(s, i + 1);
    if (i >= n) return partial(); // (the key is read again when the value begins)
    st.m = { key, start: i, end: null };
    members.push(st.m);
    st.vck = null;
  }
}
