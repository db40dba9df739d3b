import t from 'tap'
import { GroupCommit, groupUpTo } from '../../../src/ingest/log/group-commit.ts'
import { deferred } from '../steps/fixtures.ts'

t.test('appends arriving during a commit share the next one; alone, an append is committed at once', async (t) => {
  const commits: { batch: string[]; done: ReturnType<typeof deferred<void>> }[] = []
  const group = new GroupCommit<string>((batch) => {
    const done = deferred<void>()
    commits.push({ batch, done })
    return done.promise
  })
  const first = group.add('a', 10)
  t.same(commits.map((c) => c.batch), [['a']], 'committed at once')
  t.ok(group.committing)
  const later = [group.add('b', 5), group.add('c', 7)]
  t.equal(group.waitingSize, 12, 'what waits for the next commit')
  commits[0]!.done.resolve()
  await first
  t.same(commits.map((c) => c.batch), [['a'], ['b', 'c']], 'one commit for both')
  t.equal(group.waitingSize, 0)
  commits[1]!.done.resolve()
  await Promise.all(later)
  await new Promise((resolve) => setImmediate(resolve))
  t.notOk(group.committing)
})

t.test('a commit that throws refuses every append it was given, and the next commit goes on', async (t) => {
  const failure = new Error('disk full')
  const first = deferred<void>()
  const batches: string[][] = []
  const group = new GroupCommit<string>(async (batch) => {
    batches.push(batch)
    if (batches.length === 1) return first.promise
    if (batches.length === 2) throw failure
  })
  const x = group.add('x', 1)
  const refused = [group.add('a', 1), group.add('b', 1)]
  first.resolve()
  await x
  const results = await Promise.allSettled(refused)
  t.same(results.map((r) => r.status), ['rejected', 'rejected'])
  t.equal((results[0] as PromiseRejectedResult).reason, failure)
  await group.add('c', 1)
  t.same(batches, [['x'], ['a', 'b'], ['c']])
})

t.test('groupUpTo: in order, each group within the size, a larger item alone', async (t) => {
  const size = (n: number) => n
  t.same(groupUpTo([3, 3, 3, 9, 1, 1], size, 6), [[3, 3], [3], [9], [1, 1]])
  t.same(groupUpTo([], size, 6), [])
})

t.test('idle resolves once no commit is under way or waiting, at once when none is', async (t) => {
  const commits: ReturnType<typeof deferred<void>>[] = []
  const group = new GroupCommit<string>(() => {
    const done = deferred<void>()
    commits.push(done)
    return done.promise
  })
  await group.idle()
  void group.add('a', 1)
  void group.add('b', 1) // waits for the second commit
  let idle = false
  void group.idle().then(() => { idle = true })
  commits[0]!.resolve()
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(commits.length, 2, 'the waiting append is being committed')
  t.notOk(idle, 'not idle while it is')
  commits[1]!.resolve()
  await new Promise((resolve) => setImmediate(resolve))
  t.ok(idle)
})
