/** The per-event privacy chip shown in the dashboard, from metadata.privacyLevel. */
export type PrivacyChip = 'MIN' | 'STD' | 'FULL'

const CHIPS: Record<string, PrivacyChip> = { minimal: 'MIN', standard: 'STD', full: 'FULL' }

export function privacyChip (level: string | null | undefined): PrivacyChip | null {
  return (level && CHIPS[level]) || null
}
