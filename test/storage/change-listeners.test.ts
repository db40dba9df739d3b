import t from 'tap'
import { ChangeListeners } from '../../src/storage/change-listeners.ts'

t.test('listeners are told in order, each awaited before the next and before emit settles', async (t) => {
  const changes = new ChangeListeners<string>()
  const seen: string[] = []
  changes.add(async (c) => {
    await new Promise((resolve) => setTimeout(resolve, 20))
    seen.push(`slow ${c}`)
  })
  changes.add((c) => { seen.push(`quick ${c}`) })
  await changes.emit('x')
  t.same(seen, ['slow x', 'quick x'])
})

t.test('an unsubscribed listener is no longer told', async (t) => {
  const changes = new ChangeListeners<number>()
  const seen: number[] = []
  const off = changes.add((n) => { seen.push(n) })
  await changes.emit(1)
  off()
  off()
  await changes.emit(2)
  t.same(seen, [1])
})

t.test('a listener that fails fails the emit', async (t) => {
  const changes = new ChangeListeners<number>()
  changes.add(() => { throw new Error('redis down') })
  await t.rejects(changes.emit(1), /redis down/)
})
