import type { JsonText } from './event-row.ts'

// The scalar leaves of an event's metadata and input, as the search columns hold them
// (clickhouse/018, 023, 025): sent with each row so that the engine need not parse the JSON again.
// The rules are clickhouse/023's, over the object the row's JSON text is written from:
// - every key of the object, and of objects in it down to three levels, by dotted path
//   ({"git":{"branch":"main"}} gives 'git.branch'); an object at the third level is left out;
// - a string is its text; a number its JSON text as the engine writes it; a boolean 'true' or 'false'; null, arrays and values JSON leaves out (undefined) are left out;
// - in the order JSON.stringify writes the keys, and a path met twice ('a.b' as a key, and b in a)
//   is kept twice;
// - nothing at all of an object holding, anywhere, a number the engine cannot read (below).
// The live tail matches events by the same leaves (live-events.ts).
// test/storage/search-insert-cost.test.ts compares what the engine makes of them with its own
// flattening of the same JSON.

type Pairs = [string, string][]

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function leaf (pairs: Pairs, path: string, value: unknown): void {
  if (typeof value === 'string') pairs.push([path, value])
  else if (typeof value === 'number') {
    // The engine writes a number's exponent without '+' (1e21 where JSON.stringify writes 1e+21); the
    // two agree otherwise (6,864 numbers of every magnitude compared). NaN and ±Infinity are JSON's null.
    if (Number.isFinite(value)) pairs.push([path, numberText(value)])
  } else if (typeof value === 'boolean') pairs.push([path, value ? 'true' : 'false'])
}

/**
 * A number's text as the engine writes it again from the JSON text JSON.stringify wrote (the shortest
 * digits that give the number back), with no `+` in the exponent: `1e21`, `1.7976931348623157e308`,
 * `5e-324`, `-1.5`, `100000` (for `1e5`).
 */
export function numberText (value: number): string {
  const text = JSON.stringify(value)
  return text.includes('e+') ? text.replace('e+', 'e') : text
}

/**
 * Whether the engine cannot read a JSON text holding this number: an integer JSON.stringify writes
 * in plain digits (below 1e21) that fits neither Int64 nor UInt64. Such a text is not read at all,
 * so none of its leaves is searchable (the whole object counts as empty).
 */
const unreadable = (n: number) => Number.isInteger(n) && Math.abs(n) < 1e21 && (n >= 2 ** 64 || n <= -(2 ** 63)) // -2^63 is written -9223372036854776000

function hasUnreadable (v: unknown): boolean {
  if (typeof v === 'number') return unreadable(v)
  if (v === null || typeof v !== 'object') return false
  return (Array.isArray(v) ? v : Object.values(v as Record<string, unknown>)).some(hasUnreadable)
}

/** The (path, value) pairs of an object's scalar leaves, three levels deep (none for text or an array). */
export function scalarLeaves (value: JsonText | unknown): Pairs {
  const pairs: Pairs = []
  if (!isObject(value) || hasUnreadable(value)) return pairs
  for (const k1 of Object.keys(value)) {
    const v1 = value[k1]
    if (!isObject(v1)) {
      leaf(pairs, k1, v1)
      continue
    }
    for (const k2 of Object.keys(v1)) {
      const v2 = v1[k2]
      if (!isObject(v2)) {
        leaf(pairs, `${k1}.${k2}`, v2)
        continue
      }
      for (const k3 of Object.keys(v2)) {
        const v3 = v2[k3]
        if (!isObject(v3)) leaf(pairs, `${k1}.${k2}.${k3}`, v3)
      }
    }
  }
  return pairs
}

/** The values of an object's scalar leaves, in order (what the search text takes of `input`). */
export function leafValues (value: JsonText | unknown): string[] {
  return scalarLeaves(value).map((pair) => pair[1])
}

const NONE: [0, [], []] = [0, [], []]

/** Whether a string holds no lone surrogate (String.prototype.isWellFormed, Node 20; not in TypeScript's ES2022 lib). */
const wellFormed = (text: string): boolean => (text as string & { isWellFormed: () => boolean }).isWellFormed()

/**
 * The values of a line's search leaf columns (event-line.ts): 1, the metadata's pairs and the input's
 * leaf values; or 0 and nothing, so that the engine flattens the JSON itself, when a path or value
 * holds a lone UTF-16 surrogate: the engine refuses one in a JSON string of a column it parses (the
 * whole insert would fail), while it keeps one inside the JSON text of `metadata` or `input`.
 */
export function searchLeaves (metadata: JsonText, input: JsonText): [1, [string, string][], string[]] | typeof NONE {
  const pairs = scalarLeaves(metadata)
  const values = leafValues(input)
  for (const [path, value] of pairs) if (!wellFormed(path) || !wellFormed(value)) return NONE
  for (const value of values) if (!wellFormed(value)) return NONE
  return [1, pairs, values]
}
