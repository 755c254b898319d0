import { delimiter } from 'node:path';
import type { EtcdBinaries } from '@etcd-steward/core';

export type EtcdUnderTest = '3.4' | '3.5';

/**
 * The folder holding one version's etcd, etcdctl (and etcdutl from 3.5 on), for tests that need two versions at
 * once (an upgrade). scripts/test provides both and names them in TEST_ETCD_BIN_DIR_3_4 and _3_5.
 */
export function etcdBinDir(version: EtcdUnderTest): string {
  const variable = `TEST_ETCD_BIN_DIR_${version.replace('.', '_')}`;
  const dir = process.env[variable];
  if (!dir)
    throw new Error(`${variable} is not set: run the tests through scripts/test, which provides etcd 3.4 and 3.5`);
  return dir;
}

/** An environment for a program that should find this version's etcd tools first on PATH. */
export function withEtcdOnPath(version: EtcdUnderTest): NodeJS.ProcessEnv {
  return { PATH: `${etcdBinDir(version)}${delimiter}${process.env.PATH ?? ''}` };
}

/**
 * ETCD_VERSION (3.4 or 3.5) names the etcd the suite runs on, first on PATH; a test that found another one would
 * prove nothing about the version it claims to test.
 */
export function checkEtcdUnderTest(binaries: EtcdBinaries): void {
  const wanted = process.env.ETCD_VERSION;
  if (wanted && !binaries.version.startsWith(`${wanted}.`)) {
    throw new Error(`ETCD_VERSION=${wanted} but the etcd found is ${binaries.version} (${binaries.etcd})`);
  }
}
