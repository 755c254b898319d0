import { UsageError } from '@etcd-steward/core';

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  ki: 1024,
  kib: 1024,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
};

/** A byte count: a plain number as ebr takes it, or with a unit ("10Mi", "1GiB", "500MB"). */
export function parseByteSize(value: string | number, flag: string): number {
  const match = /^(\d+)\s*([a-z]*)$/i.exec(String(value).trim());
  const unit = match ? SIZE_UNITS[match[2].toLowerCase()] : undefined;
  if (!match || unit === undefined || !Number.isSafeInteger(Number(match[1]) * unit)) {
    throw new UsageError(`--${flag} "${value}" is not a size in bytes: write e.g. 10485760, 10Mi or 1Gi`);
  }
  return Number(match[1]) * unit;
}
