import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTestCertificates, type TestCertificates } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { takeFullSnapshot } from '../src/backup/take-full-snapshot.js';
import { findEtcdBinaries } from '../src/etcd/etcd-binaries.js';
import { createEtcdClient } from '../src/etcd/etcd-client.js';
import { memberStatus } from '../src/etcd/etcd-status.js';
import { EtcdProcess } from '../src/etcd/spawned-etcd.js';
import { LocalStore } from '../src/store/local.js';

describe('etcd over TLS with client certificates', () => {
  let dir: string;
  let certs: TestCertificates;
  let etcd: EtcdProcess;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'etcd-tls-'));
    certs = await makeTestCertificates(dir);
    etcd = await EtcdProcess.start({
      binaries: await findEtcdBinaries(),
      name: 'tls',
      dataDir: join(dir, 'data'),
      logFile: join(dir, 'etcd.log'),
      clientTls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.ca },
      throwaway: true,
    });
    await etcd.waitHealthy();
  });

  afterAll(async () => {
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('takes a verified snapshot and writes through the client with --cacert/--cert/--key', async () => {
    const connection = { endpoints: [etcd.clientUrl], cacert: certs.ca, cert: certs.clientCert, key: certs.clientKey };
    const client = createEtcdClient(connection);
    try {
      await client.put('/tls/key').value('secret-ish');
      expect(await client.get('/tls/key').string()).toBe('secret-ish');
    } finally {
      client.close();
    }
    const saved = await takeFullSnapshot({
      connection,
      store: new LocalStore(join(dir, 'store')),
      compression: 'zstd',
      tempDir: dir,
    });
    expect(saved.revision).toBe(2);
  });

  it('fails clearly without a client certificate or with an unknown CA', async () => {
    await expect(memberStatus({ endpoints: [etcd.clientUrl], cacert: certs.ca }, { timeoutMs: 5000 })).rejects.toThrow(
      /cannot reach etcd at https:\/\/127\.0\.0\.1:\d+/,
    );
    await expect(memberStatus({ endpoints: [etcd.clientUrl] }, { timeoutMs: 5000 })).rejects.toThrow(/certificate/);
  });
});
