import t, { type Test } from 'tap'
import { join } from 'node:path'
import { logRows, rowBytes } from '../../../src/ingest/log/entry-codec.ts'
import type { IngestLog } from '../../../src/ingest/log/ingest-log.ts'
import { DiskIngestLog } from '../../../src/ingest/log/disk-ingest-log.ts'
import { MemoryIngestLog } from '../../helpers/memory-ingest-log.ts'
import { TEST_DATA_DIR, randomId } from '../../helpers/env.ts'

// The shipper's tests run over MemoryIngestLog: it must answer every call as the LMDB log does.

function bothLogs (t: Test): [string, IngestLog][] {
  const lmdb = DiskIngestLog.open({ dir: join(TEST_DATA_DIR, randomId('log-')), maxBytes: 1 << 30 })
  const memory = new MemoryIngestLog()
  t.teardown(() => lmdb.close())
  return [['lmdb', lmdb], ['memory', memory]]
}

/** Appends of 1 to 5 rows of varied sizes (multi-byte characters included), all started at once. */
function appendAll (log: IngestLog, appends: string[][]): Promise<number[]> {
  return Promise.all(appends.map((lines) => log.append(rowBytes(lines))))
}

const sent = Array.from({ length: 20 }, (_, i) => Array.from({ length: 1 + (i % 5) }, (_, j) => `["${i}.${j}","${'é'.repeat((i * 7 + j * 13) % 40)}"]`))
const total = sent.flat().length

t.test('concurrent appends get positions in call order, and every read cut by rows and bytes reads the same rows', async (t) => {
  const logs = bothLogs(t)
  const lasts = await Promise.all(logs.map(([, log]) => appendAll(log, sent)))
  let position = 0
  t.same(lasts[1], lasts[0], 'each append is told the same last position')
  t.same(lasts[0], sent.map((lines) => (position += lines.length)), 'in call order')
  for (const [name, log] of logs) {
    t.equal(log.lastPosition, total, `${name}: the last position`)
    t.equal(log.stats().rows, total, `${name}: every row waits`)
  }
  for (const after of [0, 1, 4, 23, total - 1, total]) {
    for (const maxRows of [1, 3, 1000]) {
      for (const maxBytes of [1, 200, 1 << 20]) {
        const [lmdb, memory] = await Promise.all(logs.map(([, log]) => log.read(after, maxRows, maxBytes)))
        t.same(logRows(memory!), logRows(lmdb!), `after ${after}, ${maxRows} rows, ${maxBytes} bytes`)
      }
    }
  }
})

t.test('a recorded range is inflight until marked shipped, reads back exactly, and shipped rows are trimmed', async (t) => {
  for (const [name, log] of bothLogs(t)) {
    await appendAll(log, sent.slice(0, 4))
    await log.beginInsert({ from: 2, to: 7 })
    t.same(log.inflight, { from: 2, to: 7 }, `${name}: recorded`)
    await appendAll(log, sent.slice(4))
    t.same(logRows(await log.readRange({ from: 2, to: 7 })).map((r) => r.position), [2, 3, 4, 5, 6, 7], `${name}: the range alone, though more rows came`)
    await log.markShipped(7)
    t.equal(log.inflight, null, `${name}: no longer inflight`)
    t.equal(log.shipped, 7)
    t.equal(log.stats().rows, total - 7)
    await log.markShipped(3)
    t.equal(log.shipped, 7, `${name}: shipped never goes back`)
    t.same(logRows(await log.read(log.shipped, 2, 1 << 20)).map((r) => r.position), [8, 9], `${name}: reading goes on after it`)
    await log.markShipped(total)
    t.match(log.stats(), { rows: 0, bytes: 0, oldestAppendedAt: null }, `${name}: everything trimmed`)
  }
})

t.test('an empty append keeps no position; a closed log refuses appends with a 503', async (t) => {
  for (const [name, log] of bothLogs(t)) {
    t.equal(await log.append(rowBytes(['["a"]'])), 1)
    t.equal(await log.append(rowBytes([])), 1, `${name}: the last position so far`)
    t.equal(await log.append(rowBytes(['["b"]'])), 2)
    await log.quarantineRows([{ position: 1, line: '["a"]' }], 'refused')
    t.equal(log.stats().quarantined, 1, `${name}: counted in the stats`)
    await log.close()
    await t.rejects(log.append(rowBytes(['["c"]'])), { name: 'IngestLogRefused', reason: 'ingest_log_full' }, `${name}: refused`)
  }
})

t.test('a closed log refuses appends with 503 and every other write or read with IngestLogClosed, writing nothing', async (t) => {
  for (const [name, log] of bothLogs(t)) {
    await log.append(rowBytes(['["a"]', '["b"]']))
    await log.beginInsert({ from: 1, to: 2 })
    await log.close()
    await t.rejects(log.append(rowBytes(['["c"]'])), { name: 'IngestLogRefused' }, `${name}: append`)
    await t.rejects(log.markShipped(2), { name: 'IngestLogClosed' }, `${name}: markShipped`)
    await t.rejects(log.beginInsert({ from: 3, to: 3 }), { name: 'IngestLogClosed' }, `${name}: beginInsert`)
    await t.rejects(log.quarantineRows([{ position: 1, line: '["a"]' }], 'refused'), { name: 'IngestLogClosed' }, `${name}: quarantineRows`)
    await t.rejects(log.read(0, 10, 1 << 20), { name: 'IngestLogClosed' }, `${name}: read`)
    t.same([log.shipped, log.inflight], [0, { from: 1, to: 2 }], `${name}: the recorded range is as it was`)
    t.match(log.stats(), { rows: 2, quarantined: 0 }, `${name}: stats still answer`)
  }
})
