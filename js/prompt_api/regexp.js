// regexp.js — a JavaScript RegExp as a GBNF grammar (src/wasmlm.h "Grammars"), for the Prompt
// API's responseConstraint: the whole response must be a string the pattern matches from its
// first character to its last (as if written /^(?:pattern)$/: a leading ^ and a trailing $ are
// accepted and change nothing). The grammar is our own; the syntax read is ECMAScript's
// (ECMA-262 §22.2, "Patterns"), the subset that describes a regular language:
//   literals and escapes (\n \r \t \v \f \0 \cX \xHH \uHHHH \u{H…} and identity escapes),
//   . (every character but line terminators; all with the s flag), character classes with
//   ranges, negation and \d \w \s (\D \W \S only outside a class), groups ( ) (?: ) (?<name> ),
//   alternation |, quantifiers * + ? {n} {n,} {n,m} (lazy forms alike: the same strings),
//   flags i (ASCII letters only), s, u, and g / y / d (no effect on which strings match).
// Anything else describes no regular language or needs more than a grammar holds — back
// references, lookaround, \b \B, ^ / $ inside the pattern, Unicode property escapes, the m and v
// flags, case folding beyond ASCII — and is refused with a NotSupportedError naming it.

const LINE_TERMINATORS = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];
const DIGIT = [[0x30, 0x39]];
const WORD = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
/** \s: WhiteSpace and LineTerminator (ECMA-262 §12.2, §12.3). */
const SPACE = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a],
  [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];
const CLASS_ESCAPES = { d: DIGIT, w: WORD, s: SPACE };

function unsupported(what) {
  return new DOMException(`responseConstraint: this RegExp uses ${what}, which the grammar ` +
    'cannot express (supported: literals, classes, groups, alternation, quantifiers; flags i s u)', 'NotSupportedError');
}

/** A code point as a GBNF character escape. */
function hex(cp) {
  if (cp <= 0xff) return `\\x${cp.toString(16).padStart(2, '0')}`;
  if (cp <= 0xffff) return `\\u${cp.toString(16).padStart(4, '0')}`;
  return `\\U${cp.toString(16).padStart(8, '0')}`;
}

/** A code point inside a GBNF character class: printable ASCII as itself, else escaped. */
function classChar(cp) {
  const safe = cp >= 0x21 && cp <= 0x7e && !'\\]-^['.includes(String.fromCodePoint(cp));
  return safe ? String.fromCodePoint(cp) : hex(cp);
}

/** A literal code point as a GBNF string literal. */
function literal(cp) {
  const safe = cp >= 0x20 && cp <= 0x7e && cp !== 0x22 && cp !== 0x5c;
  return `"${safe ? String.fromCodePoint(cp) : hex(cp)}"`;
}

function setText(ranges, negated) {
  const body = ranges.map(([a, b]) => (a === b ? classChar(a) : `${classChar(a)}-${classChar(b)}`)).join('');
  return `[${negated ? '^' : ''}${body}]`;
}

/** Adds the other ASCII case of the letters in `ranges` (flag i). */
function foldAscii(ranges) {
  const out = ranges.slice();
  for (const [a, b] of ranges) {
    for (const [lo, hi, shift] of [[0x41, 0x5a, 0x20], [0x61, 0x7a, -0x20]]) {
      const s = Math.max(a, lo), e = Math.min(b, hi);
      if (s <= e) out.push([s + shift, e + shift]);
    }
  }
  return out;
}

class Parser {
  constructor(source, flags) {
    this.src = source;
    this.i = 0;
    this.unicode = flags.includes('u');
    this.ignoreCase = flags.includes('i');
    this.dotAll = flags.includes('s');
  }

  peek() { return this.src[this.i]; }
  eof() { return this.i >= this.src.length; }

  /** The next code point (a surrogate pair as one in u mode, or when it is one anyway). */
  next() {
    const cp = this.src.codePointAt(this.i);
    this.i += cp > 0xffff ? 2 : 1;
    return cp;
  }

  /** Disjunction; `top`: the whole pattern, where a leading ^ / trailing $ may stand. */
  disjunction(top) {
    const alts = [this.alternative(top)];
    while (this.peek() === '|') {
      this.i++;
      alts.push(this.alternative(top));
    }
    return alts.length === 1 ? alts[0] : `(${alts.join(' | ')})`;
  }

  alternative(top) {
    const items = [];
    const start = this.i;
    while (!this.eof() && this.peek() !== '|' && this.peek() !== ')') {
      const c = this.peek();
      if (c === '^') {
        if (!top || this.i !== start) throw unsupported('^ inside the pattern');
        this.i++;
        continue;
      }
      if (c === '$') {
        this.i++;
        if (!top || !(this.eof() || this.peek() === '|')) throw unsupported('$ inside the pattern');
        continue;
      }
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    return items.length === 0 ? '""' : items.length === 1 ? items[0] : `(${items.join(' ')})`;
  }

  /** A quantifier after `atom`, if any. */
  quantified(atom) {
    const c = this.peek();
    let q = null;
    if (c === '*' || c === '+' || c === '?') {
      this.i++;
      q = c;
    } else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i));
      if (!m) {
        if (this.unicode) throw new SyntaxError('responseConstraint: a lone { in a u-flag RegExp');
        return atom; // Annex B: a literal brace, already taken as an atom by the caller's next turn
      }
      this.i += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? null : Number(m[3]);
      if (max !== null && max < min) throw new SyntaxError('responseConstraint: numbers out of order in {} quantifier');
      if (min > 10000 || (max ?? 0) > 10000) throw unsupported('a repetition count above 10000');
      q = max === null ? `{${min},}` : min === max ? `{${min}}` : `{${min},${max}}`;
    }
    if (q === null) return atom;
    if (this.peek() === '?') this.i++; // lazy: the same strings
    if (this.peek() === '*' || this.peek() === '+' || this.peek() === '?' ||
        (this.peek() === '{' && /^\{\d+(,\d*)?\}/.test(this.src.slice(this.i)))) {
      throw new SyntaxError('responseConstraint: nothing to repeat');
    }
    return `${atom}${q}`;
  }

  atom() {
    const c = this.peek();
    if (c === '(') return this.group();
    if (c === '[') return this.characterClass();
    if (c === '.') {
      this.i++;
      return this.dotAll ? (this.unicode ? '[\\x00-\\U0010ffff]' : '[\\x00-\\uffff]') : this.negated(LINE_TERMINATORS);
    }
    if (c === '\\') return this.atomEscape();
    if (c === '*' || c === '+' || c === '?') throw new SyntaxError('responseConstraint: nothing to repeat');
    if (c === '{' && /^\{\d+(,\d*)?\}/.test(this.src.slice(this.i))) throw new SyntaxError('responseConstraint: nothing to repeat');
    if ((c === ']' || c === '{' || c === '}') && this.unicode) throw new SyntaxError(`responseConstraint: a lone ${c} in a u-flag RegExp`);
    const cp = this.next();
    if (cp > 0xffff && !this.unicode && /^[*+?{]/.test(this.src.slice(this.i))) {
      throw unsupported('a quantifier after a character outside the BMP without the u flag (it repeats half of it)');
    }
    return this.char(cp);
  }

  /** A negated set: without the u flag a class or . matches one UTF-16 unit, so characters
   *  outside the BMP (two units) are excluded too. */
  negated(ranges) {
    return setText(this.unicode ? ranges : [...ranges, [0x10000, 0x10ffff]], true);
  }

  /** One literal code point (both ASCII cases with flag i). */
  char(cp) {
    if (this.ignoreCase && ((cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a))) {
      return setText(foldAscii([[cp, cp]]), false);
    }
    if (this.ignoreCase && cp > 0x7f && String.fromCodePoint(cp).toLowerCase() !== String.fromCodePoint(cp).toUpperCase()) {
      throw unsupported('the i flag on a non-ASCII letter');
    }
    return literal(cp);
  }

  group() {
    this.i++; // (
    if (this.src.startsWith('?:', this.i)) this.i += 2;
    else if (this.src.startsWith('?=', this.i) || this.src.startsWith('?!', this.i)) throw unsupported('a lookahead');
    else if (this.src.startsWith('?<=', this.i) || this.src.startsWith('?<!', this.i)) throw unsupported('a lookbehind');
    else if (this.src.startsWith('?<', this.i)) {
      const end = this.src.indexOf('>', this.i);
      if (end < 0) throw new SyntaxError('responseConstraint: an unterminated group name');
      this.i = end + 1;
    } else if (this.peek() === '?') throw unsupported('a group modifier (?…)');
    const inner = this.disjunction(false);
    if (this.peek() !== ')') throw new SyntaxError('responseConstraint: unterminated group');
    this.i++;
    return `(${inner})`;
  }

  /** An escape outside a class: a class escape, or one code point. */
  atomEscape() {
    this.i++; // backslash
    const c = this.peek();
    if (c === undefined) throw new SyntaxError('responseConstraint: \\ at end of pattern');
    if (c === 'b' || c === 'B') throw unsupported(`\\${c} (a word boundary)`);
    if (/[1-9]/.test(c)) throw unsupported('a back reference');
    if (c === 'k' && (this.unicode || this.src.includes('(?<'))) throw unsupported('a named back reference');
    const lower = c.toLowerCase();
    if (CLASS_ESCAPES[lower]) {
      this.i++;
      return c !== lower ? this.negated(CLASS_ESCAPES[lower]) : setText(CLASS_ESCAPES[lower], false);
    }
    if ((c === 'p' || c === 'P') && this.unicode) throw unsupported('a Unicode property escape');
    return this.char(this.characterEscape());
  }

  /** The code point of a character escape (after the backslash). */
  characterEscape() {
    const c = this.src[this.i++];
    const simple = { n: 0x0a, r: 0x0d, t: 0x09, v: 0x0b, f: 0x0c };
    if (simple[c] !== undefined) return simple[c];
    if (c === '0' && !/[0-9]/.test(this.peek() ?? '')) return 0;
    if (c === 'c' && /[A-Za-z]/.test(this.peek() ?? '')) return this.src.charCodeAt(this.i++) % 32;
    if (c === 'x') {
      const m = /^[0-9a-fA-F]{2}/.exec(this.src.slice(this.i));
      if (m) {
        this.i += 2;
        return parseInt(m[0], 16);
      }
      return 0x78;
    }
    if (c === 'u') {
      const braces = /^\{([0-9a-fA-F]+)\}/.exec(this.src.slice(this.i));
      if (braces && this.unicode) {
        this.i += braces[0].length;
        const cp = parseInt(braces[1], 16);
        if (cp > 0x10ffff) throw new SyntaxError('responseConstraint: \\u{…} above U+10FFFF');
        return cp;
      }
      const m = /^[0-9a-fA-F]{4}/.exec(this.src.slice(this.i));
      if (m) {
        this.i += 4;
        let cp = parseInt(m[0], 16);
        const low = /^\\u([dD][c-fC-F][0-9a-fA-F]{2})/.exec(this.src.slice(this.i));
        if (cp >= 0xd800 && cp <= 0xdbff && low) { // a surrogate pair written as two escapes
          this.i += 6;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (parseInt(low[1], 16) - 0xdc00);
        }
        return cp;
      }
      return 0x75;
    }
    if (/[0-9]/.test(c)) throw unsupported('an octal escape');
    this.i--; // an identity escape: the character itself (a surrogate pair whole)
    return this.next();
  }

  /** [ … ]: ranges of code points, maybe negated. */
  characterClass() {
    this.i++; // [
    let negated = false;
    if (this.peek() === '^') {
      negated = true;
      this.i++;
    }
    const ranges = [];
    const atom = () => { // a code point, or a set (\d \w \s) as an array of ranges
      if (this.peek() === '\\') {
        this.i++;
        const c = this.peek();
        if (c === undefined) throw new SyntaxError('responseConstraint: \\ at end of pattern');
        const lower = c.toLowerCase();
        if (CLASS_ESCAPES[lower]) {
          this.i++;
          if (c !== lower) throw unsupported(`\\${c} inside a character class`);
          return CLASS_ESCAPES[lower];
        }
        if (c === 'b') { this.i++; return 0x08; }
        if (c === '-') { this.i++; return 0x2d; }
        if ((c === 'p' || c === 'P') && this.unicode) throw unsupported('a Unicode property escape');
        return this.characterEscape();
      }
      return this.next();
    };
    for (;;) {
      if (this.eof()) throw new SyntaxError('responseConstraint: unterminated character class');
      if (this.peek() === ']') {
        this.i++;
        break;
      }
      const a = atom();
      if (this.peek() === '-' && this.src[this.i + 1] !== ']' && this.i + 1 < this.src.length) {
        this.i++; // -
        const b = atom();
        if (Array.isArray(a) || Array.isArray(b)) {
          if (this.unicode) throw new SyntaxError('responseConstraint: a class escape in a range');
          for (const x of [a, 0x2d, b]) Array.isArray(x) ? ranges.push(...x) : ranges.push([x, x]);
          continue;
        }
        if (b < a) throw new SyntaxError('responseConstraint: range out of order in character class');
        ranges.push([a, b]);
      } else if (Array.isArray(a)) {
        ranges.push(...a);
      } else {
        ranges.push([a, a]);
      }
    }
    let set = ranges;
    if (!this.unicode && set.some(([, b]) => b > 0xffff)) {
      throw unsupported('a character outside the BMP in a class without the u flag (the class holds its halves)');
    }
    if (this.ignoreCase) {
      if (set.some(([a, b]) => b > 0x7f && hasCasedLetters(a, b))) throw unsupported('the i flag on non-ASCII letters');
      set = foldAscii(set);
    }
    if (set.length === 0) {
      if (!negated) throw unsupported('an empty character class (it matches nothing)');
      return this.unicode ? '[\\x00-\\U0010ffff]' : '[\\x00-\\uffff]'; // [^]: any character
    }
    return negated ? this.negated(set) : setText(set, false);
  }
}

/** Whether code points a..b hold a letter with another case (checked up to 4096 of them). */
function hasCasedLetters(a, b) {
  for (let cp = Math.max(a, 0x80); cp <= Math.min(b, a + 4096); cp++) {
    const s = String.fromCodePoint(cp);
    if (s.toLowerCase() !== s.toUpperCase()) return true;
  }
  return b - a > 4096;
}

/**
 * The GBNF grammar of the strings `re` matches whole.
 * @param {RegExp} re
 * @returns {string} `root ::= …`
 * @throws {DOMException} NotSupportedError for the features listed above
 * @throws {SyntaxError} for a pattern the grammar reader finds malformed (one RegExp accepted
 *   only thanks to Annex B's leniency)
 */
export function regExpToGrammar(re) {
  const flags = re.flags;
  if (flags.includes('m') && /(^|[^\\])[\^$]/.test(re.source)) throw unsupported('the m flag with ^ or $');
  if (flags.includes('v')) throw unsupported('the v flag');
  const p = new Parser(re.source, flags);
  const body = p.disjunction(true);
  if (!p.eof()) throw new SyntaxError(`responseConstraint: unmatched ) at ${p.i}`);
  return `root ::= ${body}\n`;
}
