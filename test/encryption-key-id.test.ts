// One etcd version: an encryption header's key id, which does not change with etcd's version.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  EncryptedStore,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  parseKeyFile,
} from '@etcd-steward/core';
import { buildChainStore, type ChainStore, startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import { errorMessages as errors, programJson, runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

/*
 * The key id in an encrypted snapshot's header changed in place to one the key file lacks: damage, told from a key
 * missing from the file by the store's other snapshots, which name the key the file holds (docs/encryption.md §2).
 */
describe('a changed key id in an encrypted full snapshot (real etcd, processes)', () => {
  const at = tempDir('encryption-key-id-');
  let cluster: TestCluster;
  let chain: ChainStore;
  let keys: string;
  let source: KeyspaceFingerprint;
  const older = () => chain.fulls[0].name;
  const newer = () => chain.fulls[1].name;

  /** A copy of the store whose newer full names key "k9" where it was written with "k1". */
  const damagedCopy = async (name: string) => {
    await cp(at('origin'), at(name), { recursive: true });
    const path = join(at(name), newer());
    const bytes = await readFile(path);
    // magic (8), version (1), key id length (1), key id
    expect(bytes.subarray(10, 10 + bytes[9]).toString()).toBe('k1');
    bytes.write('k9', 10);
    await writeFile(path, bytes);
    return { dir: at(name), url: `file://${at(name)}` };
  };

  beforeAll(async () => {
    cluster = await startCluster();
    keys = at('keys');
    await writeFile(keys, `k1 ${randomBytes(32).toString('hex')}\n`, { mode: 0o400 });
    await writeFile(at('wrong-keys'), `k2 ${randomBytes(32).toString('hex')}\n`, { mode: 0o400 });
    const client = cluster.client();
    const store = new EncryptedStore(new LocalStore(at('origin')), parseKeyFile(await readFile(keys, 'utf8'), keys));
    chain = await buildChainStore(client, cluster.endpoints, store, { tempDir: at(), keys: 600, compression: 'zstd' });
    source = await keyspaceFingerprint(client, chain.lastRevision);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('is damage: the restore falls back to the older full, restores exactly, and names the one it skipped', async () => {
    const { url } = await damagedCopy('restore');
    const { result, fingerprint } = await restoreAndFingerprint(url, at(), 'restored', ['--encryption-key-file', keys]);
    expect(result.snapshot).toContain(older());
    expect(fingerprint).toEqual(source);
    expect((result as unknown as { skipped: unknown }).skipped).toEqual([
      {
        name: newer(),
        reason: expect.stringContaining(
          `${url}/${newer()} is damaged: its encryption header names key "k9", which ${keys} does not hold and no other snapshot of the store names`,
        ),
      },
    ]);
  });

  it('etcd-gc with the key does not take it for the start of the newest chain: the older full and its deltas stay, and restore exactly', async () => {
    const { dir, url } = await damagedCopy('gc');
    const report = await programJson('etcd-gc', [
      ...['--store', url, '--keep-last', '1', '--lock-settle', '1s', '--encryption-key-file', keys],
    ]);
    expect(report.restorableFull).toBe(older());
    expect(report.warnings).toEqual([
      expect.stringContaining(
        `${newer()} does not verify, so it cannot start the newest chain: ${url}/${newer()} is damaged`,
      ),
    ]);
    for (const name of [older(), ...chain.deltas.map((d) => d.name)])
      expect(existsSync(join(dir, name)), name).toBe(true);
    const after = await restoreAndFingerprint(url, at(), 'after-gc', ['--encryption-key-file', keys]);
    expect(after.result.snapshot).toContain(older());
    expect(after.fingerprint).toEqual(source);
  });

  it('with a wrong key file, naming no id of the store: the restore fails asking for the key, and gc deletes nothing', async () => {
    const { dir, url } = await damagedCopy('wrong-file');
    const wrong = at('wrong-keys');
    const restore = await runProgram('etcd-restore', [
      ...['--store', url, '--data-dir', at('wrong-restored'), '--encryption-key-file', wrong],
    ]);
    expect(restore.code).toBe(1);
    const error = errors(restore.stderr);
    expect(error).toMatch(
      new RegExp(`is encrypted with key "k\\d", which ${wrong} does not hold: add that key to the file`),
    );
    expect(error).not.toMatch(/damaged/);
    expect(existsSync(at('wrong-restored'))).toBe(false);

    const gc = await runProgram('etcd-gc', [
      ...['--store', url, '--keep-last', '1', '--lock-settle', '1s', '--encryption-key-file', wrong],
    ]);
    expect(gc.code).toBe(1);
    expect(gc.stderr).toMatch(
      /none of its 2 full snapshots verifies, so no restore is possible from it; gc deletes nothing/,
    );
    for (const name of [older(), newer(), ...chain.deltas.map((d) => d.name)]) {
      expect(existsSync(join(dir, name)), name).toBe(true);
    }
  });
});
