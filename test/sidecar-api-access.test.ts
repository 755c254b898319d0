import { readFile, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request } from 'node:https';
import { makeTestCertificates, startCluster, type TestCertificates } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-api-access-');

async function sidecarWith(name: string, args: string[], https?: (url: string) => Promise<unknown>) {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${at(`${name}-store`)}`,
    dir: at(name),
    args,
    https,
  });
  onTestFinished(() => sidecar.kill());
  return sidecar;
}

/** The answer once the sidecar has started taking snapshots (503 while it leads but is still starting). */
function untilStarted<T extends number | Response>(ask: () => Promise<T>): Promise<T> {
  return waitFor('the sidecar to take snapshots', async () => {
    const answer = await ask();
    return (typeof answer === 'number' ? answer : answer.status) !== 503 && answer;
  });
}

/** A request from another loopback address than the pod's own (127.0.0.1), as from outside the pod. */
function statusFrom(localAddress: string, url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'GET', localAddress, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

it('with --server-token-file, snapshots need the bearer token, initialization and /config too unless asked from 127.0.0.1; /healthz, /metrics and /snapshot/latest stay open', async () => {
  const token = 'k7Qd0-test-token-9fz';
  await writeFile(at('token-file'), `${token}\n`);
  const sidecar = await sidecarWith('token', ['--server-token-file', at('token-file')]);
  const { url } = sidecar;
  const as = (value?: string): RequestInit => ({
    method: 'POST',
    headers: value ? { authorization: value } : undefined,
  });

  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  expect((await fetch(`${url}/metrics`)).status).toBe(200);
  expect((await fetch(`${url}/snapshot/latest`)).status).toBe(200);
  for (const path of ['/snapshot/full', '/snapshot/delta']) {
    const refused = await fetch(`${url}${path}`, as());
    expect(refused.status, path).toBe(401);
    expect(await refused.json()).toEqual({ error: expect.stringMatching(/--server-token-file/) });
  }
  // etcd-wrapper's routes: open to the pod's own loopback address, which it sends no token from
  expect((await fetch(`${url}/initialization/status`)).status).toBe(200);
  for (const path of ['/initialization/start', '/initialization/status', '/config']) {
    expect(await statusFrom('127.0.0.2', `${url}${path}`), path).toBe(401);
  }
  expect(await statusFrom('127.0.0.2', `${url}/initialization/status`, { authorization: `Bearer ${token}` })).toBe(200);
  expect((await fetch(`${url}/snapshot/full`, as(`Bearer ${token}x`))).status).toBe(401);
  expect((await fetch(`${url}/snapshot/full`, as('Bearer k7Qd0'))).status).toBe(401);
  expect((await fetch(`${url}/snapshot/full`, as(token))).status).toBe(401);
  const full = await untilStarted(async () => fetch(`${url}/snapshot/full`, as(`Bearer ${token}`)));
  expect(full.status).toBe(200);
  expect(await full.json()).toMatchObject({ kind: 'Full' });
  expect((await fetch(`${url}/initialization/start`, as(`Bearer ${token}`))).status).toBe(200);
  expect(await sidecar.stop()).toBe(0);
  expect(await sidecar.log()).not.toContain(token);
});

/** A request over HTTPS that trusts the test CA, with or without a client certificate; resolves with the status. */
function httpsStatus(
  url: string,
  certs: TestCertificates,
  client?: 'client',
  method = 'POST',
  localAddress?: string,
): Promise<number> {
  return Promise.all([
    readFile(certs.ca),
    client && readFile(certs.clientCert),
    client && readFile(certs.clientKey),
  ]).then(
    ([ca, cert, key]) =>
      new Promise((resolve, reject) => {
        const req = request(url, { method, ca, cert, key, agent: false, localAddress }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      }),
  );
}

it('with --server-tls-client-ca, snapshots need a client certificate that CA signed, initialization too unless asked from 127.0.0.1', async () => {
  const certs = await makeTestCertificates(at());
  const sidecar = await sidecarWith(
    'mtls',
    ['--server-tls-cert', certs.serverCert, '--server-tls-key', certs.serverKey, '--server-tls-client-ca', certs.ca],
    (url) => httpsStatus(`${url}/healthz`, certs, undefined, 'GET'),
  );
  const { url } = sidecar;
  expect(await httpsStatus(`${url}/healthz`, certs, undefined, 'GET')).toBe(200);
  expect(await httpsStatus(`${url}/metrics`, certs, undefined, 'GET')).toBe(200);
  expect(await httpsStatus(`${url}/snapshot/delta`, certs)).toBe(401);
  expect(await httpsStatus(`${url}/initialization/start`, certs, undefined, 'GET', '127.0.0.2')).toBe(401);
  expect(await httpsStatus(`${url}/initialization/status`, certs, undefined, 'GET')).toBe(200);
  expect(await untilStarted(() => httpsStatus(`${url}/snapshot/delta`, certs, 'client'))).toBe(200);
  expect(await httpsStatus(`${url}/initialization/start`, certs, 'client', 'GET', '127.0.0.2')).toBe(200);
  expect(await sidecar.stop()).toBe(0);
});
