import { readdirSync, statSync, existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

// The client's tests run the package as it ships (client/dist, built by `npm run build`, which
// `npm test` runs first). Run alone, a test file refuses a build older than its sources rather than
// test yesterday's client.
const src = fileURLToPath(new URL('../../client/src/', import.meta.url))
const built = fileURLToPath(new URL('../../client/dist/index.js', import.meta.url))
const newestSource = Math.max(...readdirSync(src).map((f) => statSync(src + f).mtimeMs))
if (!existsSync(built) || statSync(built).mtimeMs < newestSource) {
  throw new Error('client/dist is missing or older than client/src: run `npm run build` first')
}
