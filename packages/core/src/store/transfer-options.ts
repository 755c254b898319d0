import { UsageError } from '../common/errors.js';
import type { QueryOptions } from './query-options.js';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from './retry.js';

/** Query options every cloud store understands: how uploads are cut up, and how long to wait. */
export const TRANSFER_OPTIONS = ['partSize', 'partsInFlight', 'timeout', 'retries'] as const;

export interface TransferOptions {
  /** Bytes per part (S3 part, Azure block, GCS resumable chunk). Memory ≈ partSize × (partsInFlight + 1). */
  partSize: number;
  partsInFlight: number;
  /** A request that sends or receives nothing for this long is given up (and retried). */
  timeoutMs: number;
}

export interface PartSizeRules {
  min: number;
  /** GCS chunks must be multiples of 256 KiB. */
  multipleOf?: number;
  /** When the URL gives none (default DEFAULT_PART_SIZE). */
  defaultSize?: number;
}

export const DEFAULT_PART_SIZE = 5 * 1024 * 1024;
export const DEFAULT_PARTS_IN_FLIGHT = 2;
export const DEFAULT_TIMEOUT_MS = 60_000;

export function transferOptions(query: QueryOptions, rules: PartSizeRules, where: string): TransferOptions {
  const partSize = query.size('partSize') ?? rules.defaultSize ?? DEFAULT_PART_SIZE;
  if (partSize < rules.min || (rules.multipleOf && partSize % rules.multipleOf !== 0)) {
    const multiple = rules.multipleOf ? ` and a multiple of ${rules.multipleOf / 1024} KiB` : '';
    const min = rules.min % (1024 * 1024) === 0 ? `${rules.min / 1024 / 1024} MiB` : `${rules.min / 1024} KiB`;
    throw new UsageError(`${where}: partSize must be at least ${min}${multiple}`);
  }
  return {
    partSize,
    partsInFlight: query.integer('partsInFlight', 1, 64) ?? DEFAULT_PARTS_IN_FLIGHT,
    timeoutMs: query.duration('timeout') ?? DEFAULT_TIMEOUT_MS,
  };
}

export function retryPolicy(query: QueryOptions, base: RetryPolicy = DEFAULT_RETRY_POLICY): RetryPolicy {
  const retries = query.integer('retries', 0, 100);
  return retries === undefined ? base : { ...base, attempts: retries + 1 };
}
