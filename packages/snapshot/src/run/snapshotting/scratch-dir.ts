import { createHash } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { UsageError } from '@etcd-steward/core/common';

/**
 * The sidecar's scratch space: a folder of its own inside --temp-dir, which may be shared (the system's /tmp).
 * Only that folder is ever cleared. Its name comes from the spool dir, which belongs to one sidecar: a
 * restarted sidecar finds (and clears) what its killed predecessor left, and another sidecar sharing the temp
 * dir never touches it.
 */
export function scratchDir(tempDir: string, spoolDir: string): string {
  const spool = resolve(spoolDir);
  const fromTemp = relative(resolve(tempDir), spool);
  if (fromTemp !== '..' && !fromTemp.startsWith('../')) {
    throw new UsageError(
      `--temp-dir ${tempDir} holds the spool dir ${spoolDir}: give the sidecar scratch space apart from the spool, e.g. ${join(spoolDir, 'tmp')} (the default)`,
    );
  }
  const id = createHash('sha256').update(spool).digest('hex').slice(0, 12);
  return join(tempDir, `etcd-snapshot-run-${id}`);
}

/** Empties the scratch folder: what a killed predecessor left there (a half-written full snapshot) is of no use. */
export async function clearScratchDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
}
