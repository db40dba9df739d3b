import t from 'tap'
import { open } from 'lmdb'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { QuarantineStore } from '../../../src/ingest/log/quarantine-store.ts'

const dir = mkdtempSync(join(tmpdir(), 'quarantine-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

t.test('rows kept with their reason, counted, listed by position, and readable beside the owner', async (t) => {
  const env = open({ path: dir, maxDbs: 4 })
  const store = QuarantineStore.in(env)
  t.equal(store.size, 0)
  await store.put([{ position: 7, line: '[7]' }, { position: 3, line: '[3]' }], 'refused by the engine')
  t.equal(store.size, 2)
  t.match(store.list(10), [{ position: 3, line: '[3]', reason: 'refused by the engine', at: /^\d{4}-/ }, { position: 7 }])
  t.same(store.list(1).map((r) => r.position), [3])
  t.same(QuarantineStore.read(dir, 10).map((r) => r.position), [3, 7], 'read without taking the log')
  t.equal(QuarantineStore.in(env).size, 2, 'counted again when opened')
  await store.put([{ position: 3, line: '[3]' }, { position: 9, line: '[9]' }], 'quarantined again after a replay')
  t.equal(store.size, 3, 'a position quarantined again is counted once')
  t.equal(store.list(1)[0]!.reason, 'quarantined again after a replay', 'and replaced')
  await env.close()
})
