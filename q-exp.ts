// usage: DATA_DIR=dir node --import tsx /tmp/exp/q.ts file.sql [runs]   (statements separated by ;; ; params via {u:String} from env U)
import { readFileSync } from 'node:fs'
import { openClickHouse } from './src/storage/clickhouse-client.ts'
const h = openClickHouse({ dataDir: process.env.DATA_DIR! })
const sqls = readFileSync(process.argv[2]!, 'utf8').split(';;').map((s) => s.trim()).filter(Boolean)
const runs = Number(process.argv[3] ?? 5)
const params = JSON.parse(process.env.P ?? '{}')
for (const sql of sqls) {
  if (/^(EXPLAIN|SHOW|DESCRIBE)/i.test(sql) || sql.startsWith('--show')) {
    const rs = await h.client.query({ query: sql.replace(/^--show/, ''), query_params: params, format: 'TabSeparatedRaw' })
    console.log(await rs.text()); continue
  }
  const times: number[] = []
  let out = ''
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    const rs = await h.client.query({ query: sql, query_params: params, format: 'JSONEachRow' })
    const rows = await rs.json()
    times.push(performance.now() - t0)
    out = `${rows.length} rows; first ${JSON.stringify(rows[0])?.slice(0, 200)}`
  }
  times.sort((a, b) => a - b)
  console.log(`${sql.replace(/\s+/g, ' ').slice(0, 110)}\n   median ${times[Math.floor(runs / 2)]!.toFixed(1)} ms min ${times[0]!.toFixed(1)}  ${out}`)
}
await h.release()
