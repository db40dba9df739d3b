import t from 'tap'
// @ts-expect-error the dashboard is plain JavaScript without types
const { when, duration, percent } = await import('../../ui/js/ui.js')

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

t.test('a duration is rounded once, never to 60 of a unit', async (t) => {
  t.equal(duration(999.4), '999 ms')
  t.equal(duration(999.6), '1.00 s')
  t.equal(duration(9_996), '10.0 s')
  t.equal(duration(59_960), '1 min 0 s', 'not "60.0 s"')
  t.equal(duration(479_600), '8 min 0 s', 'not "7 min 60 s"')
  t.equal(duration(7 * 60_000 + 29_400), '7 min 29 s')
  t.equal(duration(3_599_600), '1 h 0 min', 'not "60 min 0 s"')
  t.equal(duration(2 * 3_600_000 - 20_000), '2 h 0 min', 'not "1 h 60 min"')
  t.equal(duration(null), '—')
})

t.test('a share too small to show is not written as 0', async (t) => {
  t.equal(percent(0), '0.0 %')
  t.equal(percent(0.00004), '< 0.01 %', 'not "0.00 %" beside a zero share\'s "0.0 %"')
  t.equal(percent(0.004), '0.40 %')
  t.equal(percent(0.25), '25.0 %')
  t.equal(percent(null), '—')
})
