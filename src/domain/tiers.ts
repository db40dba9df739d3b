import type { Tier } from '../storage/users-repository.ts'

/** Ingestion burst limits per minute by tier; a user's burst_per_minute overrides them. */
export const TIER_BURST_PER_MINUTE: Readonly<Record<Tier, number>> = { free: 60, pro: 600, enterprise: 6000 }

/** The events per minute a user may send in a burst: their own override, else their tier's. */
export function burstLimit (user: { tier: Tier; burstPerMinute: number | null }): number {
  return user.burstPerMinute ?? TIER_BURST_PER_MINUTE[user.tier]
}
