import t from 'tap'
import { burstLimit, TIER_BURST_PER_MINUTE } from '../../src/domain/tiers.ts'

t.test("burst limit: the tier's, unless the user has one of their own", async (t) => {
  t.same(TIER_BURST_PER_MINUTE, { free: 60, pro: 600, enterprise: 6000 })
  t.equal(burstLimit({ tier: 'free', burstPerMinute: null }), 60)
  t.equal(burstLimit({ tier: 'enterprise', burstPerMinute: null }), 6000)
  t.equal(burstLimit({ tier: 'free', burstPerMinute: 5000 }), 5000)
  t.equal(burstLimit({ tier: 'pro', burstPerMinute: 0 }), 0, 'an override of 0 is kept, not taken as unset')
})
