import t from 'tap'
import { PipelineRunner, type Step, type Verdict } from '../../src/ingest/pipeline.ts'
import { deferred } from './steps/fixtures.ts'

/** A logger whose warnings the test can wait for. */
function warnings () {
  const seen: { details: Record<string, unknown>; message: string }[] = []
  let wake: (() => void) | null = null
  return {
    seen,
    warn: (details: object, message: string) => {
      seen.push({ details: details as Record<string, unknown>, message })
      wake?.()
    },
    /** Resolves at the next warning, or rejects after `ms`. */
    next: (ms: number) => new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no warning within ${ms} ms`)), ms)
      wake = () => { clearTimeout(timer); wake = null; resolve() }
    }),
  }
}

const accept: (items: string[]) => Verdict<string>[] = (items) => items.map((item) => ({ kind: 'accepted', ack: item }))

t.test('runner: a step waiting past the threshold is reported while it still waits, once', async (t) => {
  const log = warnings()
  const runner = new PipelineRunner(log, 20)
  const store = deferred<void>()
  let released = false
  const blocked: Step<null, string, string> = { name: 'resolve', run: async (_c, items) => { await store.promise; return accept(items) } }
  const done = runner.run([blocked], null, ['a', 'b', 'c'])
  await log.next(2000)
  t.notOk(released, 'reported before the step ends')
  t.match(log.seen, [{ message: 'ingest step resolve stalled', details: { step: 'resolve', events: 3, running: true } }])
  t.ok((log.seen[0]!.details.ms as number) >= 20, 'with the time it has run so far')
  released = true
  store.resolve()
  t.same((await done).map((o) => o.kind), ['accepted', 'accepted', 'accepted'])
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(log.seen.length, 1, 'not again when it ends')
})

t.test('runner: a step that holds the thread past the threshold is reported when it ends', async (t) => {
  const log = warnings()
  const runner = new PipelineRunner(log, 5)
  const busy: Step<null, string, string> = {
    name: 'row',
    run: (_c, items) => {
      const until = performance.now() + 15
      while (performance.now() < until) { /* holds the thread */ }
      return accept(items)
    },
  }
  await runner.run([busy], null, ['a'])
  t.match(log.seen, [{ message: 'ingest step row stalled', details: { step: 'row', events: 1, running: false } }])
})

t.test('runner: in an outage every request\'s step stalls; one line per step every 10 s says so, counting the rest', async (t) => {
  const log = warnings()
  const runner = new PipelineRunner(log, 1)
  const slow: Step<null, string, string> = { name: 'burst', run: async (_c, items) => { await new Promise((resolve) => setTimeout(resolve, 5)); return accept(items) } }
  const other: Step<null, string, string> = { name: 'log', run: async (_c, items) => { await new Promise((resolve) => setTimeout(resolve, 5)); return accept(items) } }
  await Promise.all(Array.from({ length: 20 }, () => runner.run([slow], null, ['a'])))
  await runner.run([other], null, ['a'])
  t.same(log.seen.map((l) => l.details.step), ['burst', 'log'], 'one line for the twenty stalls of one step, one for another step')
  t.match(log.seen[0]!.message, /at most every 10 s per step/)
})

t.test("runner: the key hook's wait is watched the same way", async (t) => {
  const log = warnings()
  const runner = new PipelineRunner(log, 20)
  const key = deferred<void>()
  const hook = runner.hook('key', () => key.promise)
  const answered = new Promise<unknown>((resolve) => hook({}, null, resolve))
  await log.next(2000)
  t.match(log.seen, [{ details: { step: 'key', events: 1, running: true } }])
  key.resolve()
  t.equal(await answered, undefined)
  t.equal(log.seen.length, 1)
})

t.test('runner: a step that waits less than the threshold is not reported', async (t) => {
  const log = warnings()
  const runner = new PipelineRunner(log, 200)
  const quick: Step<null, string, string> = { name: 'log', run: async (_c, items) => { await new Promise((resolve) => setTimeout(resolve, 5)); return accept(items) } }
  await runner.run([quick], null, ['a'])
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.same(log.seen, [])
})
