import { SCORE_LINE_START } from '../../domain/score-row.ts'
import { splitSpans, type LogSpan } from './entry-codec.ts'

/** What a row of the ingest log is: an event (into `events`) or a score (into `scores`). */
export type RowKind = 'events' | 'scores'

const SCORE_START = Buffer.from(SCORE_LINE_START)

/** The kind of the line starting at `at` in `bytes`. */
function kindAt (bytes: Buffer, at: number): RowKind {
  if (at + SCORE_START.length > bytes.length) return 'events'
  return bytes.compare(SCORE_START, 0, SCORE_START.length, at, at + SCORE_START.length) === 0 ? 'scores' : 'events'
}

/**
 * Spans cut into runs of rows of one kind, in position order. A line is a score's when it starts
 * `["scr_` (its row id), an event's otherwise (`["evt_`, its event id). Spans that do not hold the
 * text `["scr_` anywhere (the usual case, found by one search per span) are one run of events
 * without looking at each line.
 */
export function kindRuns (spans: LogSpan[]): { kind: RowKind; spans: LogSpan[] }[] {
  if (!spans.some((span) => span.bytes.includes(SCORE_START))) return [{ kind: 'events', spans }]
  const runs: { kind: RowKind; spans: LogSpan[] }[] = []
  let rest = spans
  while (rest.length > 0) {
    const kind = kindAt(rest[0]!.bytes, 0)
    let rows = 0
    let cut = false
    for (const span of rest) {
      let at = 0
      for (let i = 0; i < span.rows; i++) {
        if (kindAt(span.bytes, at) !== kind) {
          cut = true
          break
        }
        rows++
        at = span.bytes.indexOf(10, at) + 1
      }
      if (cut) break
    }
    if (!cut) {
      runs.push({ kind, spans: rest })
      break
    }
    const [head, tail] = splitSpans(rest, rows)
    runs.push({ kind, spans: head })
    rest = tail
  }
  return runs
}
