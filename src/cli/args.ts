import { parseArgs, type ParseArgsConfig } from 'node:util'
import { checkDataDirFree, StartupError } from '../startup-failure.ts'

/**
 * A command-line tool's arguments, parsed as `node:util` parseArgs does, with `--help` (`-h`) for every
 * tool: it prints what the tool does and its usage on stdout and exits 0. An option the tool does not
 * know, or a value it cannot take, prints the parser's message and the usage on stderr and exits 2,
 * never a stack trace.
 */
export function cliArgs<T extends ParseArgsConfig> (config: T, help: { usage: string; about: string }): ReturnType<typeof parseArgs<T>> {
  const argv = config.args ?? process.argv.slice(2)
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${help.about}\n\n${help.usage}\n`)
    process.exit(0)
  }
  try {
    return parseArgs(config)
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${help.usage}\n`)
    process.exit(2)
  }
}

/** Stops a tool with its usage on stderr, exit 2 (a missing or malformed argument the parser let through). */
export function usageError (usage: string, problem?: string): never {
  process.stderr.write(`${problem ? `${problem}\n` : ''}${usage}\n`)
  process.exit(2)
}

/**
 * Stops a tool that opens the embedded engine when a running service holds DATA_DIR (the engine
 * belongs to one process), with the service's own one-line message, exit 1, rather than the engine's.
 */
export function exitIfDataDirInUse (dataDir: string): void {
  try {
    checkDataDirFree(dataDir)
  } catch (err) {
    if (!(err instanceof StartupError)) throw err
    process.stderr.write(`${err.message}\n`)
    process.exit(1)
  }
}
