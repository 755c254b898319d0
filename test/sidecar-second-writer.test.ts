// One etcd version: two writers on one store, told apart by the store, not by etcd.
import { startCluster } from '@etcd-steward/testing';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
import { firstDelta, metric, type SidecarProcess, startSidecar, startWriter, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/**
 * Two sidecars on one store, as when an old pod is not yet gone: both find their member leading (they ask the same
 * etcd) and both write snapshots. Each must see the other and say so: an error line, the gauge
 * etcd_snapshot_second_writer and its counter, and /healthz failing. One sidecar alone says nothing of the kind.
 */
describe('a second sidecar writing to the same store', () => {
  const at = tempDir('sidecar-second-writer-');

  async function twoWriters(name: string, store: string, env?: NodeJS.ProcessEnv) {
    const cluster = await startCluster();
    onTestFinished(() => cluster.stop());
    const client = cluster.client();
    const sidecars: SidecarProcess[] = [];
    onTestFinished(async () => {
      for (const s of sidecars) await s.kill();
    });
    const start = async (which: string) => {
      const sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store, dir: at(name, which), env });
      sidecars.push(sidecar);
      return sidecar;
    };
    const writer = startWriter(client, { concurrency: 4 });
    onTestFinished(async () => void (await writer.stop()));
    const old = await start('old');
    await firstDelta(old.url);
    // alone on its store for a while: nothing to report
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect(await metric(old.url, 'etcd_snapshot_second_writer')).toBe(0);
    expect(await metric(old.url, 'etcd_snapshot_second_writer_detections_total')).toBe(0);
    expect((await fetch(`${old.url}/healthz`)).status).toBe(200);

    const replacement = await start('new');
    for (const sidecar of [old, replacement]) {
      await waitFor(
        'the other sidecar to be seen',
        async () => (await metric(sidecar.url, 'etcd_snapshot_second_writer')) === 1,
        60_000,
      );
      expect(await metric(sidecar.url, 'etcd_snapshot_second_writer_detections_total')).toBeGreaterThan(0);
      const health = await fetch(`${sidecar.url}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ health: false });
      expect(await sidecar.log()).toMatch(
        /"level":"error","msg":"another sidecar writes snapshots to this store: two writers interleave their chains; stop the old pod/,
      );
    }
  }

  it('on a local store, both sidecars report the other (log, metric, /healthz)', async () => {
    await twoWriters('local', `file://${at('local', 'store')}`);
  });

  it('on an S3 store, both sidecars report the other', async () => {
    const server = await startS3Server({ buckets: ['backups'] });
    onTestFinished(() => server.stop());
    const credentials = at('credentials.json');
    await writeS3Credentials(credentials, server);
    await twoWriters('s3', `s3://backups/etcd?endpoint=${encodeURIComponent(server.endpoint)}`, {
      ...process.env,
      AWS_APPLICATION_CREDENTIALS_JSON: credentials,
      AWS_EC2_METADATA_DISABLED: 'true',
    });
  });
});
