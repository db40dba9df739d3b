import type { FromSchema } from 'json-schema-to-ts'
import type { dashboardEvent } from '../../schemas/dashboard.ts'

/**
 * The event's response schema, closed: the schema leaves `additionalProperties` open to clients,
 * which would give the derived type an index signature that swallows every named member.
 */
type ClosedEventSchema = Omit<typeof dashboardEvent, 'additionalProperties'> & { readonly additionalProperties: false }

/**
 * An event as the dashboard reads it back, derived from its response schema (schemas/dashboard.ts
 * `dashboardEvent`), the one place its members are written. Every member is always present (the
 * schema requires fewer of clients); `agent` is left out: the service adds it from the reader's names.
 */
export type DashboardEvent = Required<Omit<FromSchema<ClosedEventSchema>, 'agent'>>

/** Token counts as every read reports them (`total` is the sum of the four). */
export type TokenTotals = DashboardEvent['tokens']
