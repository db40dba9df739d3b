/**
 * ClickHouse's Decimal(…, 9) sums as exact integers of nano-units: a double cannot tell two sums a
 * nano-dollar apart, and adding doubles drifts where adding the decimals does not. No I/O.
 */

/** A Decimal(…, 9) as ClickHouse writes it ('12.5', '-0.000000001') in nano-units. */
export function decimalNanos (text: string): bigint {
  const negative = text.startsWith('-')
  const [whole = '0', fraction = ''] = (negative ? text.slice(1) : text).split('.')
  const n = BigInt(whole) * 1_000_000_000n + BigInt((fraction + '000000000').slice(0, 9))
  return negative ? -n : n
}

/** Nano-units as a decimal text with 9 places, as ClickHouse would write the sum. */
export function nanosText (nanos: bigint): string {
  const negative = nanos < 0n
  const digits = (negative ? -nanos : nanos).toString().padStart(10, '0')
  return `${negative ? '-' : ''}${digits.slice(0, -9)}.${digits.slice(-9)}`
}

/** The exact sum of decimal texts, as a decimal text with 9 places ('0.000000000' for none). */
export function sumDecimals (texts: Iterable<string>): string {
  let nanos = 0n
  for (const text of texts) nanos += decimalNanos(text)
  return nanosText(nanos)
}
