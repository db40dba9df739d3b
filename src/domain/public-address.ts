import ipaddr from 'ipaddr.js'

// IPv6 global unicast: anything outside it (and not IPv4-mapped) is not reachable on the internet.
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3')

/**
 * The kind of an IP address as ipaddr.js names its special ranges (`loopback`, `private`,
 * `linkLocal`, `uniqueLocal`, `carrierGradeNat`, `reserved`, `6to4`, `teredo`…), or `unicast` for
 * an address on the public internet. IPv4-mapped IPv6 addresses are judged as the IPv4 address they
 * carry, so `::ffff:127.0.0.1` is loopback. Not an IP address: `invalid`.
 */
export function addressKind (address: string): string {
  if (!ipaddr.isValid(address)) return 'invalid'
  const ip = ipaddr.process(address)
  const range = ip.range()
  if (ip.kind() === 'ipv6' && range === 'unicast' && !ip.match(GLOBAL_UNICAST_V6)) return 'reserved'
  return range
}

/**
 * True for an address on the public internet. Loopback, private, link-local (where cloud metadata
 * services answer), carrier-grade NAT, multicast, reserved and tunnelling ranges (6to4, Teredo,
 * NAT64, which can embed a private IPv4 address) are not.
 */
export function isPublicAddress (address: string): boolean {
  return addressKind(address) === 'unicast'
}
