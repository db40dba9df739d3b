import t from 'tap'
// @ts-expect-error the dashboard is plain JavaScript without types
const { fig } = await import('../../ui/js/scores.js')

t.test('score figures fit their tiles: plain up to a million million, scientific beyond and for tiny ones', async (t) => {
  t.equal(fig(0.75), '0.75')
  t.equal(fig(1234.5678), '1,234.568')
  t.equal(fig(0), '0')
  t.equal(fig(null), '—')
  t.equal(fig(7.9999e307), '8E307', 'not 308 digits')
  t.equal(fig(-2.5e15), '-2.5E15')
  t.equal(fig(0.0004), '4E-4', 'not 0')
})
