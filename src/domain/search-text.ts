/**
 * The full-text search language of `q` (docs/api.md#full-text-search-q). Pure: no I/O.
 *
 * - Terms are separated by whitespace and all must match (AND); there is no OR and no negation.
 * - `"a quoted phrase"` is one term, whitespace inside it collapsed to single spaces; a quote left
 *   open runs to the end of `q`.
 * - A term matches when it is a substring of a searched field, ignoring case (so `pay` finds
 *   `Payment`, and `支付失败` finds `订单支付失败了`: scripts without spaces need no word breaks).
 * - Accents count (`cafe` does not find `café`). A term is looked for in Unicode NFC and in NFD
 *   (`termForms`): text stored with its accents composed or decomposed is found either way, however
 *   the query spells them.
 */

export const MAX_Q_CHARS = 500
export const MAX_TERMS = 10

/** One term: the text to find (NFC, never empty, no line breaks). */
export interface SearchTerm { text: string; phrase: boolean }

export type ParsedText = { ok: true; terms: SearchTerm[] } | { ok: false; message: string }

/**
 * What is wrong with a filter's text (`q`, a metadata path or value), or null: a lone surrogate
 * cannot be matched (and the store holds none), and control characters other than tab and line
 * breaks are refused rather than silently matching nothing.
 */
export function textProblem (s: string): string | null {
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)) return 'must be valid text'
  if (/\p{Cc}/u.test(s.replace(/[\t\n\r]/g, ' '))) return 'must not contain control characters'
  return null
}

/**
 * How long a text is in characters: Unicode code points, as the schemas' lengths count (an emoji is
 * one character, not its two UTF-16 code units).
 */
export function characters (s: string): number {
  return [...s].length
}

/** Splits `q` into its terms; an empty or blank `q` has none (no filter). */
export function parseSearchText (q: string): ParsedText {
  if (characters(q) > MAX_Q_CHARS) return { ok: false, message: `must be at most ${MAX_Q_CHARS} characters` }
  const problem = textProblem(q)
  if (problem) return { ok: false, message: problem }
  const text = q.normalize('NFC')
  const terms: SearchTerm[] = []
  const seen = new Set<string>()
  const add = (raw: string, phrase: boolean) => {
    const t = raw.trim().replace(/\s+/gu, ' ')
    if (t === '' || seen.has(t)) return
    seen.add(t)
    terms.push({ text: t, phrase: phrase && t.includes(' ') })
  }
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    if (/\s/u.test(c)) {
      i++
      continue
    }
    if (c === '"') {
      const end = text.indexOf('"', i + 1)
      add(text.slice(i + 1, end === -1 ? text.length : end), true)
      i = end === -1 ? text.length : end + 1
      continue
    }
    let j = i
    while (j < text.length && !/\s/u.test(text[j]!) && text[j] !== '"') j++
    add(text.slice(i, j), false)
    i = j
  }
  if (terms.length > MAX_TERMS) return { ok: false, message: `must have at most ${MAX_TERMS} terms` }
  return { ok: true, terms }
}

/**
 * The spellings a term is looked for in, any of which matches: its NFC text and, when it differs,
 * its NFD text (`é` composed, and `e` followed by U+0301). Text keeps the form it was sent in.
 */
export function termForms (term: SearchTerm): string[] {
  const decomposed = term.text.normalize('NFD')
  return decomposed === term.text ? [term.text] : [term.text, decomposed]
}

/** A LIKE pattern matching `term` anywhere: `%`, `_` and `\` in it are escaped. */
export function likePattern (term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}
