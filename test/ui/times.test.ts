import t from 'tap'
// @ts-expect-error the dashboard is plain JavaScript without types
const { when } = await import('../../ui/js/ui.js')

t.test('a time shows its year unless it is of this year, its day unless it is today', async (t) => {
  const now = new Date()
  const year = now.getFullYear()
  const lastYear = new Date(now)
  lastYear.setFullYear(year - 1)
  t.match(when(lastYear.toISOString()), String(year - 1), 'a time of last year says so')
  t.match(when('1970-01-01T00:00:01.000Z'), /19(69|70)/, 'the epoch is not read as this January')
  t.match(when('2299-12-30T22:26:40.000Z'), /2299|2300/)
  const today = when(now.toISOString())
  t.notMatch(today, String(year), 'today: the time alone')
  t.notMatch(today, now.toLocaleString(undefined, { month: 'short' }))
  const earlier = new Date(now)
  earlier.setDate(now.getDate() === 1 ? 2 : 1)
  if (earlier.toDateString() !== now.toDateString()) {
    t.notMatch(when(earlier.toISOString()), String(year), 'another day of this year: its day, not its year')
    t.match(when(earlier.toISOString()), earlier.toLocaleString(undefined, { month: 'short' }))
  }
  t.equal(when(null), '—')
})
