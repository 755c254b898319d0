import { once } from 'node:events';
import { connect, createServer, type Server } from 'node:net';
import { freePort, openStore } from '@etcd-steward/core';
import { onTestFinished } from 'vitest';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';

/** A TCP port that refuses connections until `open()` forwards it to `target` (the store comes up). */
async function laterPort(target: URL) {
  const port = await freePort();
  let server: Server | undefined;
  return {
    port,
    async open() {
      server = createServer((socket) => {
        const upstream = connect(Number(target.port), target.hostname);
        socket.pipe(upstream).pipe(socket);
        socket.on('error', () => upstream.destroy());
        upstream.on('error', () => socket.destroy());
      });
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    async close() {
      if (!server) return;
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * An S3 store that a program reaches through a gate (`storeUrl`), down until `gate.open()`; `direct` is the store
 * as the test reaches it, always up, and `directUrl` its URL. The credentials go into this process's environment,
 * which programs started from it inherit. Everything stops when the test ends, however it ends.
 */
export async function gatedS3Store(at: (...names: string[]) => string, name: string) {
  const s3 = await startS3Server({ buckets: ['backups'] });
  onTestFinished(() => s3.stop());
  const credentials = at(`${name}-s3-credentials.json`);
  await writeS3Credentials(credentials, s3);
  process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  const gate = await laterPort(new URL(s3.endpoint));
  onTestFinished(() => gate.close());
  const storeUrl = `s3://backups/etcd?endpoint=${encodeURIComponent(`http://127.0.0.1:${gate.port}`)}`;
  const directUrl = `s3://backups/etcd?endpoint=${encodeURIComponent(s3.endpoint)}`;
  const direct = await openStore(directUrl);
  onTestFinished(() => direct.close?.());
  return { storeUrl, directUrl, direct, gate };
}
