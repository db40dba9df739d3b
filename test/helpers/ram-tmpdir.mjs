import { accessSync, constants, mkdirSync, statSync } from 'node:fs'

/**
 * Loaded before every test file (package.json, tap's `node-arg`): the file's temporary directories
 * (its DATA_DIR, the embedded engine's store, the ingest log, the template copy) go to `/dev/shm`
 * when the machine has it and TMPDIR is not set, and every process the file starts inherits the
 * choice. On an ext4 file system without a journal (this project's CI machines) every file the
 * embedded engine creates scans the inodes deleted in the last minutes, and a test suite deletes
 * stores all the time: a 10-row insert cost 218-266 ms of CPU there against 75-85 ms on tmpfs
 * (bench/README.md, "The data directory's file system"). Set TMPDIR to choose another place.
 * Plain JavaScript: worker threads inherit this preload without the TypeScript loader.
 */
const RAM = '/dev/shm'

if (process.env.TMPDIR === undefined) {
  try {
    if (statSync(RAM).isDirectory()) {
      accessSync(RAM, constants.W_OK)
      const dir = `${RAM}/agent-telemetry-tests`
      mkdirSync(dir, { recursive: true })
      process.env.TMPDIR = dir
    }
  } catch {
    // No /dev/shm here, or not writable: the system's temporary directory serves.
  }
}
