import { Agent as HttpsAgent } from 'node:https';
import { S3Client } from '@aws-sdk/client-s3';
import { UsageError } from '../../common/errors.js';
import { http } from '../../common/node-http.js';
import { RotatingCredentials, readCredentials } from '../credential-files.js';
import type { S3Config } from './config.js';

/**
 * The SDK client for a store. It makes each request once (`maxAttempts: 1`): retries are RetryingStore's.
 * Keys from ebr's credential files are re-read when the files change, through the SDK's credential provider
 * function: an expiration a second away makes the SDK ask again on every request, and each ask is a stat.
 * Keys given as variables (ECS) are used as they are. Without either, the SDK's own default chain applies (env,
 * profile, web identity, container, instance).
 */
export function createS3Client(config: S3Config, env: NodeJS.ProcessEnv = process.env): S3Client {
  const agentOptions = { keepAlive: true, maxSockets: Math.max(16, config.transfer.partsInFlight * 2) };
  return new S3Client({
    region: config.region,
    endpoint: config.endpoint,
    forcePathStyle: config.forcePathStyle,
    maxAttempts: 1,
    requestChecksumCalculation: config.requestChecksum,
    responseChecksumValidation: config.responseChecksum,
    credentials:
      config.staticKeys ?? (config.credentials && config.credentialNames ? rotatingKeys(config, env) : undefined),
    requestHandler: {
      connectionTimeout: Math.min(10_000, config.transfer.timeoutMs),
      requestTimeout: config.transfer.timeoutMs,
      throwOnRequestTimeout: true, // without it, the SDK only warns and keeps waiting
      httpAgent: new http.Agent(agentOptions),
      httpsAgent: new HttpsAgent({
        ...agentOptions,
        ...(config.tls.ca && { ca: config.tls.ca }),
        rejectUnauthorized: !config.tls.insecureSkipVerify,
      }),
    },
  });
}

function rotatingKeys(config: S3Config, env: NodeJS.ProcessEnv) {
  const { env: names, fields } = config.credentialNames!;
  const rotating = new RotatingCredentials(() => readCredentials(names, fields, env));
  return async () => {
    const source = await rotating.current();
    const accessKeyId = source?.values.accessKeyID;
    const secretAccessKey = source?.values.secretAccessKey;
    if (!accessKeyId || !secretAccessKey) {
      throw new UsageError(
        `${config.location}: ${source?.origin ?? 'the credentials files'} lack accessKeyID or secretAccessKey`,
      );
    }
    return { accessKeyId, secretAccessKey, expiration: new Date(Date.now() + 1000) };
  };
}
