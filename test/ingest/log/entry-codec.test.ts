import t from 'tap'
import { encodeLines, logRows, splitSpans, type LogSpan } from '../../../src/ingest/log/entry-codec.ts'

t.test('lines are encoded as joining them and encoding the text would, each result in memory of its own size', async (t) => {
  const cases: [string, string[]][] = [
    ['no lines', []],
    ['one empty line', ['']],
    ['empty lines between', ['a', '', '', 'b']],
    ['multi-byte text', ['["café ✈"]', '["\u{1F600} 日本"]', '["\\ud800 escaped"]']],
    ['lines past the kept scratch buffer (4 MiB)', Array.from({ length: 3 }, (_, i) => `["${'é✈'.repeat(700_000)}${i}"]`)],
    ['small lines after large ones', ['["x"]', '["y"]']],
  ]
  const results: [Uint8Array, Buffer][] = []
  for (const [name, lines] of cases) {
    const bytes = encodeLines(lines)
    const expected = Buffer.from(lines.join('\n'), 'utf8')
    t.ok(Buffer.from(bytes).equals(expected), `${name}: the same bytes`)
    t.equal(bytes.buffer.byteLength, expected.length, `${name}: memory of exactly their size`)
    results.push([bytes, expected])
  }
  t.ok(results.every(([bytes, expected]) => Buffer.from(bytes).equals(expected)), 'no result changed by the encodings after it')
})

t.test('spans split after any row hold the rows before and after the cut', async (t) => {
  const lines = Array.from({ length: 9 }, (_, i) => `["row ${i}", "${'ü'.repeat(i)}"]`)
  const spanOf = (position: number, rows: string[]): LogSpan => ({ position, rows: rows.length, bytes: Buffer.from(rows.join('\n')) })
  const spans = [spanOf(1, lines.slice(0, 4)), spanOf(5, lines.slice(4, 5)), spanOf(8, lines.slice(5))]
  const positions = [1, 2, 3, 4, 5, 8, 9, 10, 11]
  for (let cut = 1; cut < lines.length; cut++) {
    const [head, rest] = splitSpans(spans, cut)
    t.same(logRows(head), lines.slice(0, cut).map((line, i) => ({ position: positions[i], line })), `the first ${cut} rows`)
    t.same(logRows(rest), lines.slice(cut).map((line, i) => ({ position: positions[cut + i], line })), `the rows after ${cut}`)
  }
})
