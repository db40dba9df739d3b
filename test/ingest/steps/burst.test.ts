import t from 'tap'
import { burstStep, type BurstLimiter } from '../../../src/ingest/steps/burst.ts'
import type { Admission } from '../../../src/storage/rate-limiter.ts'
import { HttpError } from '../../../src/http-error.ts'
import { deferred, event, items, run, unbound, word } from './fixtures.ts'

/** A limiter that records what it is asked and answers what the test says. */
function limiter (answer: { held?: Admission; taken?: Promise<Admission> }) {
  const asked: { how: string; bucket: string; limit: number; n: number }[] = []
  const fake: BurstLimiter = {
    tryTake: (bucket, limit, n) => { asked.push({ how: 'tryTake', bucket, limit, n }); return answer.held },
    take: (bucket, limit, n) => { asked.push({ how: 'take', bucket, limit, n }); return answer.taken ?? Promise.reject(new Error('not expected')) },
  }
  return { fake, asked }
}

t.test("burst: tokens this instance holds admit the request without a promise, at the tier's limit", async (t) => {
  const { fake, asked } = limiter({ held: { admitted: 2, retryAfterMs: 0 } })
  const verdicts = burstStep({ limiter: fake }).run(run(), items(event('a'), event('a')))
  t.notOk(verdicts instanceof Promise)
  t.same(verdicts, [undefined, undefined])
  t.same(asked, [{ how: 'tryTake', bucket: 'user:user-1', limit: 60, n: 2 }], 'free tier: 60 a minute')
})

t.test("burst: a user's own limit overrides the tier's; the ones over it are refused with Retry-After", async (t) => {
  const taken = deferred<Admission>()
  const { fake, asked } = limiter({ taken: taken.promise })
  const pending = burstStep({ limiter: fake }).run(run({ caller: { ...unbound, tier: 'pro', burstPerMinute: 5 } }), items(event('a'), event('a'), event('a')))
  t.ok(pending instanceof Promise, 'waits for the limiter when it holds too few tokens')
  taken.resolve({ admitted: 1, retryAfterMs: 2500 })
  const verdicts = await pending
  t.same(verdicts.map(word), ['pass', '429 rate_limited', '429 rate_limited'])
  t.match((verdicts[1] as { error: HttpError }).error.headers, { 'retry-after': '3' })
  t.match((verdicts[2] as { error: HttpError }).error.headers, { 'retry-after': '15' }, 'the next refused fits an interval (12 s at 5 a minute) later')
  t.same(asked.map((a) => [a.how, a.limit]), [['tryTake', 5], ['take', 5]])
})

t.test('burst: a limiter without tryTake is asked with take', async (t) => {
  const verdicts = await burstStep({ limiter: { take: async (_b, limit, n) => ({ admitted: Math.min(n, limit), retryAfterMs: 1000 }) } })
    .run(run({ caller: { ...unbound, burstPerMinute: 1 } }), items(event('a'), event('a')))
  t.same(verdicts.map(word), ['pass', '429 rate_limited'])
})
