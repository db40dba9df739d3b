import { pathArray, type PathNode, type Problem } from './validate.js'

/** Objects and arrays may nest at most this many levels below an event (the service's input rule). */
export const MAX_DEPTH = 32

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const isWellFormed: (s: string) => boolean = typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
  ? (s) => (s as unknown as { isWellFormed(): boolean }).isWellFormed()
  : (s) => !LONE_SURROGATE.test(s)

/** The service's JSON parser refuses a whole body holding either key (prototype poisoning). */
const POISONED = 'is a key the service refuses (__proto__ or constructor.prototype, as prototype poisoning)'

/**
 * A plain JSON copy of `value` as JSON.stringify would write it (toJSON called, undefined and
 * functions left out of objects and null in arrays), checked against the service's input rules on
 * the way: at most MAX_DEPTH levels of nesting (which also stops cycles), no lone surrogate in a
 * string or key, finite numbers, integers within ±(2^53-1), no bigint, no `__proto__` key and no
 * `constructor` object holding a `prototype` key (one such event would cost its whole batch). Problems are pushed to
 * `problems`; the copy is then not to be sent. The caller's object is never changed.
 *
 * `budget.left` (when given) is lowered by the length of every string and key on the way, a lower
 * bound of the JSON's size; below 0 the walk stops, so an event too large to send is refused before
 * anything scrubs or serialises it (a multi-megabyte prompt would otherwise block the caller).
 */
export function plainJson (value: unknown, problems: Problem[], at?: PathNode, depth = 0, budget?: { left: number }): unknown {
  if (budget !== undefined && budget.left < 0) return undefined
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    try {
      value = (value as { toJSON(key: string): unknown }).toJSON(String(at?.key ?? ''))
    } catch (err) {
      problems.push({ path: pathArray(at), message: `toJSON threw: ${String(err)}` })
      return undefined
    }
  }
  switch (typeof value) {
    case 'string':
      if (budget !== undefined) budget.left -= value.length + 2
      if (!isWellFormed(value)) problems.push({ path: pathArray(at), message: 'must be valid Unicode text (lone surrogate)' })
      return value
    case 'number':
      if (!Number.isFinite(value)) problems.push({ path: pathArray(at), message: 'must be a finite number' })
      else if (Number.isInteger(value) && Math.abs(value) > Number.MAX_SAFE_INTEGER && !String(value).includes('e')) {
        problems.push({ path: pathArray(at), message: 'must be an integer between -(2^53-1) and 2^53-1 to be kept exactly' })
      }
      return value
    case 'boolean':
      return value
    case 'bigint':
      problems.push({ path: pathArray(at), message: 'must not be a bigint (JSON has no such type)' })
      return undefined
    case 'object': {
      if (value === null) return null
      if (depth > MAX_DEPTH) {
        problems.push({ path: pathArray(at), message: `nests objects or arrays more than ${MAX_DEPTH} levels deep` })
        return undefined
      }
      if (Array.isArray(value)) {
        return value.map((item, i) => {
          const v = plainJson(item, problems, { parent: at, key: i }, depth + 1, budget)
          return v === undefined ? null : v
        })
      }
      const out: Record<string, unknown> = {}
      for (const key of Object.keys(value)) {
        if (budget !== undefined) budget.left -= key.length + 4
        if (!isWellFormed(key)) problems.push({ path: pathArray({ parent: at, key }), message: 'must be valid Unicode text (lone surrogate)' })
        if (key === '__proto__') {
          problems.push({ path: pathArray({ parent: at, key }), message: POISONED })
          continue
        }
        const v = plainJson((value as Record<string, unknown>)[key], problems, { parent: at, key }, depth + 1, budget)
        if (key === 'constructor' && v !== null && typeof v === 'object' && Object.prototype.hasOwnProperty.call(v, 'prototype')) {
          problems.push({ path: pathArray({ parent: { parent: at, key }, key: 'prototype' }), message: POISONED })
        }
        if (v !== undefined) out[key] = v
      }
      return out
    }
    default:
      return undefined
  }
}

/** UTF-8 length of `text` without encoding it. */
export function utf8Length (text: string): number {
  let n = text.length
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) continue
    if (c < 0x800) n += 1
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 2 // a surrogate pair: 4 bytes for 2 units
      i++
    } else n += 2
  }
  return n
}
