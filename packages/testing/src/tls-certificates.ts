import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCertificates {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A throwaway CA with a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
export async function makeTestCertificates(dir: string): Promise<TestCertificates> {
  const path = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args);
  await openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=test-ca',
    '-keyout',
    path('ca.key'),
    '-out',
    path('ca.crt'),
  );
  for (const [name, ext] of [
    ['server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth'],
    ['client', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    await writeFile(path(`${name}.ext`), `${ext}\n`);
    await openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      path(`${name}.key`),
      '-out',
      path(`${name}.csr`),
    );
    await openssl(
      'x509',
      '-req',
      '-in',
      path(`${name}.csr`),
      '-CA',
      path('ca.crt'),
      '-CAkey',
      path('ca.key'),
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      path(`${name}.ext`),
      '-out',
      path(`${name}.crt`),
    );
  }
  return {
    ca: path('ca.crt'),
    serverCert: path('server.crt'),
    serverKey: path('server.key'),
    clientCert: path('client.crt'),
    clientKey: path('client.key'),
  };
}
