import t from 'tap'
import { decimalNanos, nanosText, sumDecimals } from '../../src/domain/decimal.ts'

t.test('a decimal text in nano-units, whatever its places and sign', async (t) => {
  t.equal(decimalNanos('12.5'), 12_500_000_000n)
  t.equal(decimalNanos('0.000000001'), 1n)
  t.equal(decimalNanos('-0.000000001'), -1n)
  t.equal(decimalNanos('7'), 7_000_000_000n)
  t.equal(decimalNanos('1.1234567891'), 1_123_456_789n, 'places past the ninth are dropped, as Decimal(…, 9) has none')
})

t.test('nano-units as a decimal text with 9 places', async (t) => {
  t.equal(nanosText(0n), '0.000000000')
  t.equal(nanosText(1n), '0.000000001')
  t.equal(nanosText(-1n), '-0.000000001')
  t.equal(nanosText(12_500_000_000n), '12.500000000')
  for (const text of ['123456789.987654321', '-3.000000007']) t.equal(nanosText(decimalNanos(text)), text, `${text} round-trips`)
})

t.test('decimal sums are exact where doubles drift', async (t) => {
  t.equal(sumDecimals(['0.1', '0.2']), '0.300000000')
  t.not(0.1 + 0.2, 0.3, 'the doubles do drift')
  t.equal(sumDecimals(['90071992.547409910', '0.000000001']), '90071992.547409911', 'a nano-dollar apart, beyond a double')
  t.equal(sumDecimals([]), '0.000000000')
})
