import type { ErrorDetail } from '../validation.ts'

/**
 * Input rules every JSON body obeys before anything recursive touches it (hashing, serialising, the
 * store). They refuse what the stores cannot keep as sent: nesting deeper than MAX_DEPTH, text with
 * a lone UTF-16 surrogate (ClickHouse refuses the whole insert, other users' events included), and
 * numbers JSON.parse cannot hold as written (overflow to ±Infinity, underflow of a non-zero literal to
 * 0, integers beyond 2^53-1 silently rounded). NUL characters are allowed: ClickHouse stores them.
 */

/** Objects and arrays may nest at most this many levels below the root of a body or of one event. */
export const MAX_DEPTH = 32

type Path = (string | number)[]

export const TOO_DEEP = `nests objects or arrays more than ${MAX_DEPTH} levels deep`
export const LONE_SURROGATE = 'must be valid Unicode text (lone surrogate)'
export const NOT_FINITE = 'must be a finite number (the literal overflows a 64-bit float)'
export const UNDERFLOW = 'must be representable: the non-zero literal underflows to 0'
export const UNSAFE_INTEGER = 'must be an integer between -(2^53-1) and 2^53-1 to be kept exactly'

function tooDeep (maxDepth: number): string {
  return maxDepth === MAX_DEPTH ? TOO_DEEP : `nests objects or arrays more than ${maxDepth} levels deep`
}

/** Whether a string is well-formed Unicode (no lone surrogate). */
export const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed()

/**
 * The input-rule problems of one parsed JSON value: containers nested more than `maxDepth` levels
 * below the root (reported once, at the first container past the limit, which is not entered),
 * strings and object keys holding a lone surrogate (a key is reported at its object's path plus the
 * key), and numbers that are not finite. Iterative, so any depth is safe; paths are relative to
 * `value`.
 */
export function inputProblems (value: unknown, maxDepth: number = MAX_DEPTH): ErrorDetail[] {
  const problems: ErrorDetail[] = []
  if (value === null || typeof value !== 'object') {
    checkScalar(value, [], problems)
    return problems
  }
  // Containers still to visit. Paths are built only for a problem, from the chain of parents.
  const stack: Container[] = [{ node: value, parent: null, key: '', depth: 0 }]
  const children: Container[] = []
  let reportedDepth = false
  while (stack.length > 0) {
    const container = stack.pop()!
    const { node, depth } = container
    if (depth > maxDepth) {
      if (!reportedDepth) problems.push({ path: pathOf(container), message: tooDeep(maxDepth) })
      reportedDepth = true
      continue
    }
    const array = Array.isArray(node)
    const keys = array ? null : Object.keys(node)
    const length = array ? node.length : keys!.length
    for (let i = 0; i < length; i++) {
      const key = array ? i : keys![i]!
      // A bad key and a bad string under it share one path: the key is reported, once.
      const badKey = typeof key === 'string' && !isWellFormed(key)
      if (badKey) problems.push({ path: [...pathOf(container), key], message: LONE_SURROGATE })
      const child: unknown = (node as Record<string | number, unknown>)[key]
      if (typeof child === 'object') {
        if (child !== null) children.push({ node: child, parent: container, key, depth: depth + 1 })
      } else if (!badKey && (typeof child === 'string' ? !isWellFormed(child) : typeof child === 'number' && !Number.isFinite(child))) {
        checkScalar(child, [...pathOf(container), key], problems)
      }
    }
    // Pushed in reverse so containers are visited in document order.
    while (children.length > 0) stack.push(children.pop()!)
  }
  return problems
}

interface Container { node: object; parent: Container | null; key: string | number; depth: number }

function pathOf (container: Container): Path {
  const path: Path = []
  for (let c: Container | null = container; c !== null && c.parent !== null; c = c.parent) path.push(c.key)
  return path.reverse()
}

function checkScalar (value: unknown, path: Path, problems: ErrorDetail[]): void {
  if (typeof value === 'string' && !isWellFormed(value)) problems.push({ path, message: LONE_SURROGATE })
  else if (typeof value === 'number' && !Number.isFinite(value)) problems.push({ path, message: NOT_FINITE })
}

// Number literals that may not survive JSON.parse: a run of 16+ digits (integers past 2^53-1, long
// fractions that may underflow or overflow) or an exponent of 3+ digits. Strings can match too; the
// gate only decides whether the tokenizer runs. The digits are spelled out: V8 scans `\d\d…` several
// times faster than `\d{16}`.
const SUSPICIOUS_NUMBER = new RegExp(`${'\\d'.repeat(16)}|\\d[eE][+-]?\\d\\d\\d`)
// A lone surrogate can only arrive as a \uD800-\uDFFF escape: raw bytes that are not UTF-8 decode to U+FFFD.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/

/**
 * Whether `text`, a JSON body, can break an input rule, by cheap tests on the text alone: a
 * suspicious number literal, a surrogate escape, or more than `maxDepth` opening brackets. When this
 * is false, `inputProblems` and `numberLiteralProblems` of the body are certainly empty.
 */
export function mayBreakInputRules (text: string, maxDepth: number = MAX_DEPTH): boolean {
  return SUSPICIOUS_NUMBER.test(text) ||
    (text.includes('\\u') && SURROGATE_ESCAPE.test(text)) ||
    hasMoreBrackets(text, maxDepth + 1)
}

function hasMoreBrackets (text: string, limit: number): boolean {
  let n = 0
  for (const open of ['{', '[']) {
    for (let i = text.indexOf(open); i !== -1; i = text.indexOf(open, i + 1)) {
      if (++n > limit) return true
    }
  }
  return false
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y

/**
 * The number literals of `text` (a JSON document JSON.parse accepts) that JSON.parse cannot keep as
 * written: overflow to ±Infinity, a non-zero literal that underflows to 0, and integer literals (no
 * fraction, no exponent) beyond Number.MAX_SAFE_INTEGER. Paths are from the document's root. A
 * regex test rejects ordinary bodies; only a suspicious one is tokenized.
 */
export function numberLiteralProblems (text: string): ErrorDetail[] {
  if (!SUSPICIOUS_NUMBER.test(text)) return []
  const problems: ErrorDetail[] = []
  // The open containers: for an array the next index, for an object the last key read.
  const path: Path = []
  const inObject: boolean[] = []
  let expectKey = false
  let i = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i)
      if (expectKey) {
        path[path.length - 1] = JSON.parse(text.slice(i, end)) as string
        expectKey = false
      }
      i = end
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const object = c === 0x7b
      inObject.push(object)
      path.push(object ? '' : 0)
      expectKey = object
      i++
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      inObject.pop()
      path.pop()
      i++
    } else if (c === 0x2c /* , */) {
      if (inObject[inObject.length - 1]) expectKey = true
      else path[path.length - 1] = (path[path.length - 1] as number) + 1
      i++
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i
      const m = NUMBER.exec(text)!
      const problem = literalProblem(m[0], m[1] !== undefined, m[2] !== undefined)
      if (problem) problems.push({ path: [...path], message: problem })
      i = NUMBER.lastIndex
    } else {
      i++ // whitespace, ':', and the letters of true/false/null
    }
  }
  return problems
}

/** The index just past the closing quote of the string starting at `start`. */
function stringEnd (text: string, start: number): number {
  let q = text.indexOf('"', start + 1)
  for (;;) {
    let backslashes = 0
    while (text.charCodeAt(q - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return q + 1
    q = text.indexOf('"', q + 1)
  }
}

function literalProblem (literal: string, fraction: boolean, exponent: boolean): string | null {
  // Short literals are exact or harmlessly rounded; only the suspicious ones are converted.
  if (literal.length < 16 && !exponent) return null
  const value = Number(literal)
  if (!Number.isFinite(value)) return NOT_FINITE
  if (value === 0) return /[1-9]/.test(exponent ? literal.slice(0, literal.search(/[eE]/)) : literal) ? UNDERFLOW : null
  if (!fraction && !exponent && !Number.isSafeInteger(value)) return UNSAFE_INTEGER
  return null
}

/** Merges problem lists, keeping the first detail for each path (the raw scan and the walk both see overflow). */
export function mergeProblems (...lists: ErrorDetail[][]): ErrorDetail[] {
  const seen = new Set<string>()
  const merged: ErrorDetail[] = []
  for (const list of lists) {
    for (const p of list) {
      const key = JSON.stringify(p.path)
      if (seen.has(key)) continue
      seen.add(key)
      merged.push(p)
    }
  }
  return merged
}
