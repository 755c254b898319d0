import { execFile } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  compressor,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  METADATA_DB_SIZE,
  METADATA_DECOMPRESSED_SIZE,
} from '@etcd-steward/core';
import {
  buildChainStore,
  type ChainStore,
  fingerprintRestored,
  startCluster,
  type TestCluster,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startS3Target } from '../packages/core/test/store/s3-target.js';
import { restoreArgs } from './restore-program.js';
import { runProgram, startProgram } from './run-program.js';
import { startFaultProxy } from './servers/fault-proxy.js';

const execFileAsync = promisify(execFile);

/** What must happen when parts of the store are damaged, missing or unreachable, or the restore is killed. */
describe('etcd-restore when things go wrong (programs as processes, real etcd)', () => {
  let cluster: TestCluster;
  let dir: string;
  let chain: ChainStore;
  const source = new Map<number, KeyspaceFingerprint>();

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'restore-faults-'));
    const client = cluster.client();
    chain = await buildChainStore(client, cluster.endpoints, new LocalStore(join(dir, 'store')), {
      tempDir: dir,
      keys: 600,
      compression: 'none',
    });
    for (const d of chain.deltas) source.set(d.lastRevision, await keyspaceFingerprint(client, d.lastRevision));
    source.set(chain.fulls[1].revision, await keyspaceFingerprint(client, chain.fulls[1].revision));
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  /** A copy of the good store to damage. */
  async function storeCopy(name: string): Promise<string> {
    const copy = join(dir, name);
    await cp(join(dir, 'store'), copy, { recursive: true });
    return copy;
  }

  async function restore(store: string, name: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}) {
    const peerPort = await freePort();
    const dataDir = join(dir, name);
    const args = [...restoreArgs(store.includes('://') ? store : `file://${store}`, dataDir, peerPort, name), ...extra];
    const res = await runProgram('etcd-restore', args, env);
    return { ...res, dataDir, peerPort, args };
  }

  async function fingerprintOf(r: { dataDir: string; peerPort: number }, token: string) {
    const [fp] = await fingerprintRestored([{ name: 'r0', dataDir: r.dataDir, peerPort: r.peerPort }], {
      initialCluster: `r0=http://127.0.0.1:${r.peerPort}`,
      clusterToken: token,
    });
    return fp;
  }

  const exists = (path: string) =>
    stat(path).then(
      () => true,
      () => false,
    );

  /** A killed process may linger as a zombie until its (re)parent reaps it: that counts as gone. */
  async function runningState(pid: number): Promise<'running' | 'gone'> {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    return /^State:\s+[RSD]/m.test(status) ? 'running' : 'gone';
  }

  it('falls back from a bit-flipped newest full snapshot to the previous one and its longer chain', async () => {
    const store = await storeCopy('store-flipped');
    const file = join(store, chain.fulls[1].name);
    const bytes = await readFile(file);
    bytes[Math.floor(bytes.length / 2)] ^= 0x10;
    await writeFile(file, bytes);
    const res = await restore(store, 'flipped');
    expect(res.code).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.snapshot).toBe(chain.fulls[0].name);
    expect(result.deltas).toEqual(chain.deltas.map((d) => d.name));
    expect(result.skipped).toEqual([{ name: chain.fulls[1].name, reason: expect.stringMatching(/sha256/) }]);
    expect(await fingerprintOf(res, 'flipped')).toEqual(source.get(chain.lastRevision));
  });

  it('fails on a truncated delta without touching the target, or restores up to it with --allow-partial', async () => {
    const store = await storeCopy('store-truncated');
    const damaged = chain.deltas[2];
    await truncate(join(store, damaged.name), (await stat(join(store, damaged.name))).size - 100);

    const failed = await restore(store, 'truncated');
    expect(failed.code).toBe(1);
    expect(
      failed.stderr
        .trim()
        .split('\n')
        .filter((l) => l.includes('"level":"error"')),
    ).toHaveLength(1);
    expect(failed.stderr).toContain(damaged.name);
    expect(failed.stderr).toMatch(/truncated|incomplete/);
    expect(await exists(failed.dataDir)).toBe(false);

    const partial = await restore(store, 'truncated', ['--allow-partial']);
    expect(partial.code).toBe(0);
    const result = JSON.parse(partial.stdout);
    expect(result.revision).toBe(damaged.startRevision - 1);
    expect(result.lost).toEqual({
      fromRevision: damaged.startRevision,
      toRevision: chain.lastRevision,
      delta: damaged.name,
      reason: expect.stringMatching(/truncated|incomplete/),
    });
    expect(await fingerprintOf(partial, 'truncated')).toEqual(source.get(damaged.startRevision - 1));
  });

  it('stops a decompression bomb (a full snapshot, a delta) at a bound, with a clear error and the target untouched', async () => {
    const store = await storeCopy('store-bomb');
    const last = chain.lastRevision;
    const pad = (n: number) => String(n).padStart(8, '0');
    const at = (revision: number) => Math.floor(chain.timeOf(revision).getTime() / 1000);
    // 512 MiB of zeros: a few KiB of zstd each; the full snapshot's start is a real db, which it must pass
    // for. The newest full snapshot is one, so the restore falls back to the previous chain, which ends with
    // the other.
    const fullBomb = `v2/Full-00000000-${pad(last + 10)}-${at(last + 10)}.zst`;
    const deltaBomb = `v2/Incr-${pad(last + 1)}-${pad(last + 10)}-${at(last + 10) - 1}.zst`;
    await writeBomb(join(store, fullBomb), await readFile(join(store, chain.fulls[1].name)), 512 << 20);
    await writeBomb(join(store, deltaBomb), Buffer.from('['), 512 << 20);
    const target = join(dir, 'bomb');
    await mkdir(target);
    await writeFile(join(target, 'keep'), 'mine');

    let peak = 0;
    let watching = true;
    const workDir = join(dir, '.bomb.restoring');
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, await bytesUnder(workDir));
        await sleep(20);
      }
    })();
    const res = await restore(store, 'bomb', ['--force']);
    watching = false;
    await watcher;

    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(new RegExp(`${fullBomb}.*decompresses to more than 64\\.0 MiB`));
    expect(res.stderr).toMatch(
      new RegExp(`"level":"error".*${deltaBomb} is damaged or hostile: it decompresses to more than 64\\.0 MiB`),
    );
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(160 << 20); // the previous full snapshot and one capped delta, never 512 MiB
    expect(await readdir(target)).toEqual(['keep']);
    expect(await exists(workDir)).toBe(false);
  });

  it("stops a delta at the decompressed size recorded when it was stored: a bomb under a delta's name and metadata writes no more than that", async () => {
    const store = await storeCopy('store-recorded-bomb');
    const last = chain.lastRevision;
    const pad = (n: number) => String(n).padStart(8, '0');
    const name = `v2/Incr-${pad(last + 1)}-${pad(last + 10)}-${Math.floor(chain.timeOf(last + 10).getTime() / 1000)}.zst`;
    // 512 MiB of zeros in a few KiB, whose metadata says 64 KiB, as the sidecar records a delta's size
    const bomb = join(dir, 'recorded-bomb.zst');
    await writeBomb(bomb, Buffer.from('['), 512 << 20);
    await new LocalStore(store).put(name, createReadStream(bomb), {
      metadata: { [METADATA_DECOMPRESSED_SIZE]: String(64 << 10) },
    });

    let peak = 0;
    let watching = true;
    const workDir = join(dir, '.recorded-bomb.restoring');
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, await bytesUnder(join(workDir)));
        await sleep(20);
      }
    })();
    const res = await restore(store, 'recorded-bomb');
    watching = false;
    await watcher;

    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      new RegExp(
        `"level":"error".*${name} is damaged or hostile: it decompresses to more than 64\\.0 KiB \\(the size recorded when it was stored\\)`,
      ),
    );
    expect(peak).toBeLessThan(32 << 20); // the full snapshot, its deltas and 64 KiB of this one, never 64 MiB
    expect(await exists(join(dir, 'recorded-bomb'))).toBe(false);
  });

  it("does not trust a full snapshot's recorded db size past the compression-ratio bound: a bomb claiming 1 TiB is stopped at 64 MiB", async () => {
    const store = await storeCopy('store-claimed-bomb');
    const last = chain.lastRevision;
    const pad = (n: number) => String(n).padStart(8, '0');
    // the newest full, at the chain's last revision: passed over, the chain before it reaches the same revision
    const name = `v2/Full-00000000-${pad(last)}-${Math.floor(chain.timeOf(last).getTime() / 1000) + 1}.zst`;
    // 512 MiB of zeros after a real db's start, in a few KiB, whose db-size metadata claims a terabyte
    const bomb = join(dir, 'claimed-bomb.zst');
    await writeBomb(bomb, await readFile(join(store, chain.fulls[1].name)), 512 << 20);
    await new LocalStore(store).put(name, createReadStream(bomb), {
      metadata: { [METADATA_DB_SIZE]: String(2 ** 40) },
    });

    let peak = 0;
    let watching = true;
    const workDir = join(dir, '.claimed-bomb.restoring');
    const watcher = (async () => {
      while (watching) {
        peak = Math.max(peak, await bytesUnder(workDir));
        await sleep(20);
      }
    })();
    const res = await restore(store, 'claimed-bomb');
    watching = false;
    await watcher;

    // passed over as damaged: the previous full's chain restores
    expect(res.stderr).toMatch(
      new RegExp(
        `${name} is damaged or hostile: it decompresses to more than 64\\.0 MiB \\(1000 times its stored size`,
      ),
    );
    expect(res.code).toBe(0);
    expect(peak).toBeLessThan(160 << 20); // the bound and the previous chain, never 512 MiB
  });

  it('says plainly when the disk is full (ENOSPC), removes its scratch dir and leaves the target as it was', async (ctx) => {
    // A file system smaller than the snapshot: a tmpfs, which only root may mount.
    const volume = join(dir, 'small-volume');
    await mkdir(volume);
    const mounted = await execFileAsync('mount', ['-t', 'tmpfs', '-o', 'size=128k', 'tmpfs', volume]).then(
      () => true,
      () => false,
    );
    if (!mounted) return ctx.skip();
    try {
      const target = join(volume, 'etcd');
      await mkdir(target);
      await writeFile(join(target, 'keep'), 'mine');
      const res = await runProgram('etcd-restore', [
        '--store',
        `file://${join(dir, 'store')}`,
        '--data-dir',
        target,
        '--force',
      ]);
      expect(res.code).toBe(1);
      // the folder, the space the restore needs (its full snapshot recorded its db size) and what is free there
      expect(res.stderr).toMatch(
        /"level":"error".*no space left on the device of .*small-volume \(ENOSPC\), where the restore works beside --data-dir: it needs about \d[\d.]* [KMG]iB there \(twice the db of \d[\d.]* [KMG]iB\); \d[\d.]* (KiB|bytes|B) is free\. Free space there, or restore into a larger volume; the target was left as it was/,
      );
      expect(await readdir(volume)).toEqual(['etcd']);
      expect(await readdir(target)).toEqual(['keep']);
    } finally {
      await execFileAsync('umount', [volume]);
    }
  });

  it('names the missing revisions when a delta is gone, and restores what is left with --allow-partial', async () => {
    const store = await storeCopy('store-missing');
    const gone = chain.deltas[1];
    await rm(join(store, gone.name));
    const failed = await restore(store, 'missing');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(`revisions ${gone.startRevision}..${chain.lastRevision} are in no delta`);
    expect(await exists(failed.dataDir)).toBe(false);

    const partial = await restore(store, 'missing', ['--allow-partial']);
    expect(partial.code).toBe(0);
    expect(JSON.parse(partial.stdout)).toMatchObject({
      revision: chain.fulls[1].revision,
      lost: { fromRevision: gone.startRevision, toRevision: chain.lastRevision },
    });
    expect(await fingerprintOf(partial, 'missing')).toEqual(source.get(chain.fulls[1].revision));
  });

  it('--dry-run exits as the run does when a delta is missing: 1, the plan printed, 0 with --allow-partial', async () => {
    const store = await storeCopy('store-missing-plan');
    const gone = chain.deltas[1];
    await rm(join(store, gone.name));
    const planned = await restore(store, 'missing-plan', ['--dry-run']);
    expect(planned.code).toBe(1);
    expect(JSON.parse(planned.stdout).chains[0].missing).toBe(
      `revisions ${gone.startRevision}..${chain.lastRevision} are in no delta`,
    );
    expect(planned.stderr).toMatch(/"level":"error".*are in no delta.*Pass --allow-partial/);
    expect(await exists(planned.dataDir)).toBe(false);
    expect((await restore(store, 'missing-plan', ['--dry-run', '--allow-partial'])).code).toBe(0);
  });

  it('after a SIGKILL midway, a rerun clears what was left (the private etcd too) and restores correctly', async () => {
    const store = join(dir, 'store');
    const first = await restore(store, 'killed', ['--dry-run']); // only to get the arguments
    // --verify etcd: killed while it runs an etcd of its own (the one that checks the result), which then outlives it
    const child = startProgram('etcd-restore', [...first.args.filter((a) => a !== '--dry-run'), '--verify', 'etcd']);
    const scratch = join(dir, `.${basename(first.dataDir)}.restoring`);
    let orphan: number | undefined;
    for (let i = 0; i < 500 && orphan === undefined; i++) {
      const pidFile = (await readdir(scratch).catch(() => [] as string[])).find((f) => f.endsWith('-etcd.pid'));
      const pid = pidFile && (await readFile(join(scratch, pidFile), 'utf8').catch(() => ''));
      if (pid) orphan = Number(pid);
      else await sleep(20);
    }
    expect(orphan).toBeDefined();
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    expect(await exists(first.dataDir)).toBe(false);

    const rerun = await runProgram(
      'etcd-restore',
      first.args.filter((a) => a !== '--dry-run'),
    );
    expect(rerun.code).toBe(0);
    expect(JSON.parse(rerun.stdout).revision).toBe(chain.lastRevision);
    expect(await runningState(orphan!)).toBe('gone'); // the crashed run's etcd was stopped
    expect(await exists(scratch)).toBe(false);
    expect(await fingerprintOf(first, 'killed')).toEqual(source.get(chain.lastRevision));
  });

  it('retries a flaky store, and gives a clear error when it stays unreachable', async () => {
    const s3 = await startS3Target();
    const proxy = await startFaultProxy({ target: s3.server.endpoint, seed: 3, stallMs: 100 });
    try {
      const upload = await s3.open('etcd');
      const local = new LocalStore(join(dir, 'store'));
      for (const object of await local.list('v2/')) await upload.put(object.name, await local.get(object.name));
      const env = { AWS_APPLICATION_CREDENTIALS_JSON: s3.credentialsFile, AWS_EC2_METADATA_DISABLED: 'true' };

      proxy.failureRate = 0.25;
      const flaky = await restore(s3.url('etcd', { endpoint: proxy.endpoint }), 'flaky', [], env);
      expect(flaky.stderr).not.toMatch(/"level":"error"/);
      expect(flaky.code).toBe(0);
      expect(JSON.parse(flaky.stdout).revision).toBe(chain.lastRevision);
      expect(Object.values(proxy.stats.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

      proxy.failureRate = 1;
      proxy.stats.requests = 0;
      const down = await restore(s3.url('etcd', { endpoint: proxy.endpoint, retries: '2' }), 'down', [], env);
      expect(down.code).toBe(1);
      const errors = down.stderr
        .trim()
        .split('\n')
        .filter((l) => l.includes('"level":"error"'));
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/s3:\/\/backups\/etcd/);
      expect(proxy.stats.requests).toBeGreaterThanOrEqual(3); // tried, then retried twice
      expect(await exists(down.dataDir)).toBe(false);
    } finally {
      await proxy.stop();
      await s3.stop();
    }
  });

  it('plans again from a fresh listing when a snapshot it planned with is gone as it reads it (gc or compaction meanwhile)', async () => {
    const s3 = await startS3Target();
    const gone = chain.deltas.at(-1)!.name;
    let answered = 0;
    // the first read of the newest delta finds it gone, as S3 answers once gc deleted it
    const proxy = await startFaultProxy({
      target: s3.server.endpoint,
      answer: (req) =>
        req.method === 'GET' && req.url?.split('?')[0].endsWith(`/${gone}`) && answered++ === 0
          ? {
              status: 404,
              headers: { 'content-type': 'application/xml' },
              body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>etcd/${gone}</Key></Error>`,
            }
          : undefined,
    });
    try {
      const upload = await s3.open('etcd');
      const local = new LocalStore(join(dir, 'store'));
      for (const object of await local.list('v2/')) await upload.put(object.name, await local.get(object.name));
      const env = { AWS_APPLICATION_CREDENTIALS_JSON: s3.credentialsFile, AWS_EC2_METADATA_DISABLED: 'true' };
      const res = await restore(s3.url('etcd', { endpoint: proxy.endpoint }), 'replanned', [], env);
      expect(res.code).toBe(0);
      expect(answered).toBe(2);
      expect(res.stderr).toMatch(/the store changed while restoring[^\n]*planning again/);
      expect(JSON.parse(res.stdout).revision).toBe(chain.lastRevision);
      expect(await fingerprintOf(res, 'replanned')).toEqual(source.get(chain.lastRevision));
    } finally {
      await proxy.stop();
      await s3.stop();
    }
  });

  it('says so when a gs:// store has no credentials, and where they were looked for (exit 2, nothing touched)', async () => {
    const home = join(dir, 'empty-home');
    await mkdir(home, { recursive: true });
    const target = join(dir, 'gcs-target');
    const res = await runProgram('etcd-restore', ['--store', 'gs://backups/etcd', '--data-dir', target], {
      GOOGLE_APPLICATION_CREDENTIALS: '',
      STORAGE_EMULATOR_HOST: '',
      HOME: home, // no gcloud application-default credentials
      GCE_METADATA_HOST: `127.0.0.1:${await freePort()}`, // a metadata server that does not answer
    });
    expect(res.code).toBe(2);
    expect(res.stderr.trim().split('\n')).toHaveLength(1);
    expect(res.stderr).toMatch(
      /gs:\/\/backups\/etcd: no Google credentials found: GOOGLE_APPLICATION_CREDENTIALS is not set, .*gcloud.*metadata server/,
    );
    expect(res.stderr).not.toMatch(/Warning|ENOTFOUND|ECONNREFUSED/);
    expect(await exists(target)).toBe(false);
  });

  it('refuses every misuse with exit 2 and one line, touching nothing', async () => {
    const store = `file://${join(dir, 'store')}`;
    const target = join(dir, 'misuse');
    const occupied = join(dir, 'occupied');
    await mkdir(occupied, { recursive: true });
    await writeFile(join(occupied, 'keep'), 'mine');
    const cases: Array<[string[], RegExp]> = [
      [['--data-dir', target], /store/],
      [['--store', store], /data-dir/],
      [['--store', store, '--data-dir', target, '--bogus'], /Unknown argument/i],
      [['--store', 'ftp://x/y', '--data-dir', target], /unknown store scheme/],
      [['--store', store, '--data-dir', occupied], /is not empty: pass --force/],
      [['--store', store, '--data-dir', target, '--to-revision', '0'], /--to-revision/],
      [
        ['--store', store, '--data-dir', target, '--to-revision', String(chain.lastRevision + 1)],
        /past the newest revision/,
      ],
      [['--store', store, '--data-dir', target, '--to-revision', '2'], /before the oldest full snapshot/],
      // a dry run fails where the run would
      [['--store', store, '--data-dir', occupied, '--dry-run'], /is not empty: pass --force/],
      // a time after the newest snapshot is past what the store holds, as a revision past the newest is
      [
        ['--store', store, '--data-dir', target, '--to-time', '2099-01-01T00:00:00.123456789Z'],
        /--to-time 2099-01-01T00:00:00\.123456789Z is past the newest snapshot/,
      ],
      [['--store', store, '--data-dir', target, '--to-time', 'yesterday'], /not an RFC 3339 time/],
      [['--store', store, '--data-dir', target, '--to-time', '2026-01-01T00:00:00Z', '--to-revision', '5'], /give one/],
      [['--store', store, '--data-dir', target, '--max-fetchers', '0'], /--max-fetchers/],
      [['--store', store, '--data-dir', target, '--replay', 'magic'], /replay/],
      [['--store', store, '--data-dir', target, '--snapshot', 'Full-00000000-00000001-1'], /no such full snapshot/],
      [
        ['--store', store, '--data-dir', target, '--name', 'a', '--initial-cluster', 'b=http://127.0.0.1:1'],
        /does not name this member/,
      ],
    ];
    for (const [args, reason] of cases) {
      const res = await runProgram('etcd-restore', args);
      expect({ args, code: res.code }).toEqual({ args, code: 2 });
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
      expect(res.stderr).toMatch(reason);
    }
    expect(await exists(target)).toBe(false);
    expect(await readFile(join(occupied, 'keep'), 'utf8')).toBe('mine');
    expect((await readdir(dir)).filter((f) => f.startsWith('.'))).toEqual([]);
  });
});

/** `start`, then `size` zero bytes, zstd-compressed, into `file`. */
async function writeBomb(file: string, start: Buffer, size: number): Promise<void> {
  const zeros = Buffer.alloc(1 << 20);
  await pipeline(
    Readable.from(
      (function* () {
        yield start;
        for (let n = 0; n < size; n += zeros.length) yield zeros;
      })(),
    ),
    compressor('zstd'),
    createWriteStream(file),
  );
}

/** Bytes in the files under `dir` (0 when it is not there). */
async function bytesUnder(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  let total = 0;
  for (const e of entries)
    if (e.isFile()) total += (await stat(join(e.parentPath, e.name)).catch(() => undefined))?.size ?? 0;
  return total;
}
