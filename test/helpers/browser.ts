import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'

/** Debian's chromium package; CI (.ci/run) installs it when it is missing. */
export const CHROMIUM = '/usr/bin/chromium'
export const hasChromium = () => existsSync(CHROMIUM)

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** A headless Chromium with a fresh profile, removed on close. */
export async function launchChromium (viewport = { width: 1280, height: 860 }): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'agent-telemetry-chromium-'))
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport })
  return {
    context,
    async close () {
      await context.close().catch(() => {})
      rmSync(profile, { recursive: true, force: true })
    },
  }
}
