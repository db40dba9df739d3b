import fp from 'fastify-plugin'
import { UsersRepository } from '../storage/users-repository.ts'
import { KeysRepository } from '../storage/keys-repository.ts'
import { AgentsRepository } from '../storage/agents-repository.ts'
import { EventsRepository, PublicEventsRepository } from '../storage/events-repository.ts'
import { RegistryRepository } from '../storage/registry-repository.ts'
import { DashboardRepository } from '../storage/dashboard-repository.ts'
import { ErrorClustersRepository } from '../storage/error-clusters-repository.ts'
import { AlertsRepository } from '../storage/alerts-repository.ts'
import { AnomalyRepository } from '../storage/anomaly-repository.ts'
import { ChannelsRepository } from '../storage/channels-repository.ts'
import { ModelPricesRepository } from '../storage/model-prices-repository.ts'
import { SearchRepository } from '../storage/search-repository.ts'
import { ScoreConfigsRepository } from '../storage/score-configs-repository.ts'
import { ScoresRepository } from '../storage/scores-repository.ts'

declare module 'fastify' {
  interface FastifyInstance {
    users: UsersRepository
    keys: KeysRepository
    agents: AgentsRepository
    events: EventsRepository
    publicEvents: PublicEventsRepository
    registry: RegistryRepository
    dashboard: DashboardRepository
    /** Events, sessions and traces under the search filters, and their facets. */
    eventSearch: SearchRepository
    errorClusters: ErrorClustersRepository
    alerts: AlertsRepository
    anomalyReads: AnomalyRepository
    channels: ChannelsRepository
    modelPrices: ModelPricesRepository
    /** The score configs users set (Postgres); a change is dropped from ingestion's cache on every instance. */
    scoreConfigs: ScoreConfigsRepository
    /** Scores in ClickHouse: the shipper's inserts into `scores`, and their reads. */
    scores: ScoresRepository
  }
}

/** Every repository, built once here over the store clients; services and routes take them from the instance. */
export default fp(async function repositories (app) {
  app.decorate('users', new UsersRepository(app.db))
  app.decorate('keys', new KeysRepository(app.db))
  app.decorate('agents', new AgentsRepository(app.db))
  app.decorate('registry', new RegistryRepository(app.db))
  app.decorate('errorClusters', new ErrorClustersRepository(app.db))
  app.decorate('alerts', new AlertsRepository(app.db))
  app.decorate('channels', new ChannelsRepository(app.db, app.secrets))
  app.decorate('modelPrices', new ModelPricesRepository(app.db))
  app.decorate('scoreConfigs', new ScoreConfigsRepository(app.db))
  app.decorate('scores', new ScoresRepository(app.clickhouse))
  app.decorate('events', new EventsRepository(app.clickhouse))
  app.decorate('publicEvents', new PublicEventsRepository(app.clickhouse))
  app.decorate('dashboard', new DashboardRepository(app.clickhouse))
  app.decorate('eventSearch', new SearchRepository(app.clickhouse))
  app.decorate('anomalyReads', new AnomalyRepository(app.clickhouse))
}, { name: 'repositories', dependencies: ['postgres', 'clickhouse', 'secrets'] })
