// The suite's copies through an S3 test server (run.ts), ours beside ebr's `copy` (when EBR_BIN names it), each
// checked by the objects that landed:
// - local → S3 and S3 → local: every byte passes through the program; beside the time, its CPU (user + system)
//   against ebr's for the same bytes (issue 42: no more CPU per byte than ebr's);
// - S3 → S3 between two buckets of the one server: ours has the server copy what a recorded sha256 proves
//   (docs/copy-backups.md), ebr streams every object through itself.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { listSnapshots, openStore } from '@etcd-steward/core';
import { ebrCommand } from './ebr.ts';
import { type Measurement, measure } from './measure.ts';
import { failure } from './restore-run.ts';
import { startTarget } from './store-targets.ts';

const root = new URL('../..', import.meta.url).pathname;
const copyBin = join(root, 'packages/copy-backups/bin/etcd-copy-backups.js');

export interface CopyRow {
  program: string;
  ours: Measurement;
  reference?: string;
  theirs?: Measurement;
  result: string;
}

/** The rows of the three copies of the `chain` objects in the local store `storeDir`, and what went wrong. */
export async function measureS3Copies(
  storeDir: string,
  work: string,
  chain: number,
): Promise<{ rows: CopyRow[]; wrong: string[] }> {
  const rows: CopyRow[] = [];
  const wrong: string[] = [];
  const s3 = await startTarget('s3', join(work, 's3'), '5MiB', '2', ['copies']);
  const dir = join(work, 'ebr-copy-work');
  await mkdir(join(dir, 'tmp'), { recursive: true });
  const env = { ...s3.env, SOURCE_AWS_APPLICATION_CREDENTIALS_JSON: s3.env.AWS_APPLICATION_CREDENTIALS_JSON };
  Object.assign(process.env, s3.env); // for this process's look at what landed
  const held = async (url: string) =>
    (await openStore(url, { allowMissingFolder: true }).then(listSnapshots, () => [])).length;

  /** Ours from `from` to `to`, then ebr's to `theirTo` (given EBR_BIN); the objects that landed counted. */
  async function copy(label: string, from: string, to: string, ebr: ReturnType<typeof ebrCommand>, theirTo: string) {
    const ours = await measure(process.execPath, [copyBin, '--from', from, '--to', to, '--output', 'json'], { env });
    const landed = await held(to);
    if (ours.code !== 0 || landed !== chain) wrong.push(`etcd-copy-backups ${label}: ${landed} of ${chain} objects`);
    const theirs = ebr && (await measure(ebr.bin, ebr.args, { env }));
    const theirsLanded = theirs && (await held(theirTo));
    const row: CopyRow = {
      program: `etcd-copy-backups ${label}`,
      ours,
      reference: theirs ? 'ebr copy' : undefined,
      theirs,
      result: ours.code === 0 ? `${landed} of ${chain} objects` : failure(ours),
    };
    if (theirs && (theirs.code !== 0 || theirsLanded !== chain)) {
      row.result += `; ebr: exit ${theirs.code}, ${theirsLanded} of ${chain} objects`;
    }
    rows.push(row);
    return row;
  }
  /** The CPU of a copy that passes every byte through the program, beside ebr's. */
  const cpu = (row: CopyRow) => {
    const { ours, theirs } = row;
    row.result += `; CPU ${ours.cpuSeconds.toFixed(2)} s`;
    if (theirs)
      row.result += ` (ebr's ${theirs.cpuSeconds.toFixed(2)} s: ${(ours.cpuSeconds / theirs.cpuSeconds).toFixed(2)}×)`;
  };
  try {
    const ebrFrom = { from: 'bench', fromPrefix: 'etcd', dir };
    // (ebr lists a prefix without its slash: none of its destinations may begin with another's name)
    cpu(
      await copy(
        'local → S3',
        `file://${storeDir}`,
        s3.url,
        ebrCommand('copy_to_s3', storeDir, { to: 'copies', toPrefix: 'up-ebr', dir }),
        s3.urlIn!('copies', 'up-ebr'),
      ),
    );
    const down = join(work, 's3-down');
    cpu(
      await copy(
        'S3 → local',
        s3.url,
        `file://${join(down, 'ours')}`,
        ebrCommand('copy_from_s3', join(down, 'ebr'), ebrFrom),
        `file://${join(down, 'ebr')}`,
      ),
    );
    const s3s3 = await copy(
      'S3 → S3 (two buckets, one server)',
      s3.url,
      s3.urlIn!('copies', 'ours'),
      ebrCommand('copy_s3', '', { ...ebrFrom, to: 'copies', toPrefix: 'ebr' }),
      s3.urlIn!('copies', 'ebr'),
    );
    if (s3s3.ours.code === 0) s3s3.result += `, ${JSON.parse(s3s3.ours.stdout).ways.server} copied by the server`;
  } finally {
    await s3.stop();
  }
  return { rows, wrong };
}
