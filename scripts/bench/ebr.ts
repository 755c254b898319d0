// ebr's `etcdbrctl`, the reference the benchmarks measure beside ours when EBR_BIN names it. Its command lines per
// task, for file:// stores (ebr's Local provider: the container is a directory, the prefix a folder inside it);
// EBR_<TASK>_ARGS (EBR_RESTORE_ARGS …) overrides one, with the same {placeholders}.
import { basename, dirname } from 'node:path';

const COMMANDS = {
  restore:
    'restore --storage-provider=Local --store-container={container} --store-prefix={prefix} --data-dir={dataDir} --embedded-etcd-quota-bytes=8589934592',
  compact:
    'compact --storage-provider=Local --store-container={container} --store-prefix={prefix} --data-dir={dir}/data --restoration-temp-snapshots-dir={dir}/tmp --snapstore-temp-directory={dir}/tmp --embedded-etcd-quota-bytes=8589934592',
  copy: 'copy --storage-provider=Local --store-container={to} --source-storage-provider=Local --source-store-container={from} --snapstore-temp-directory={dir}/tmp',
  copy_to_s3:
    'copy --storage-provider=S3 --store-container={to} --store-prefix={toPrefix} --source-storage-provider=Local --source-store-container={container} --source-store-prefix={prefix} --snapstore-temp-directory={dir}/tmp --source-snapstore-temp-directory={dir}/tmp',
  copy_from_s3:
    'copy --storage-provider=Local --store-container={container} --store-prefix={prefix} --source-storage-provider=S3 --source-store-container={from} --source-store-prefix={fromPrefix} --snapstore-temp-directory={dir}/tmp --source-snapstore-temp-directory={dir}/tmp',
  copy_s3:
    'copy --storage-provider=S3 --store-container={to} --store-prefix={toPrefix} --source-storage-provider=S3 --source-store-container={from} --source-store-prefix={fromPrefix} --snapstore-temp-directory={dir}/tmp --source-snapstore-temp-directory={dir}/tmp',
  snapshot:
    'snapshot --endpoints={endpoint} --storage-provider=Local --store-container={container} --store-prefix={prefix} --delta-snapshot-period=5s --schedule=0 0 1 1 * --garbage-collection-period=0s',
};
export type EbrTask = keyof typeof COMMANDS;

/** ebr's command line for `task` on the store folder `storeDir`, or undefined when EBR_BIN is not set. */
export function ebrCommand(
  task: EbrTask,
  storeDir: string,
  fill: Record<string, string> = {},
): { bin: string; args: string[] } | undefined {
  const bin = process.env.EBR_BIN;
  if (!bin) return undefined;
  const template = process.env[`EBR_${task.toUpperCase()}_ARGS`] ?? COMMANDS[task];
  const values: Record<string, string> = { container: dirname(storeDir), prefix: basename(storeDir), ...fill };
  // One argument a space, except inside a cron schedule (the only value with spaces): split on ' --'.
  const args = template
    .split(/ (?=--)/)
    .flatMap((part, i) => (i === 0 ? part.split(' ') : [part]))
    .map((arg) => arg.replaceAll(/\{(\w+)\}/g, (_, key: string) => values[key] ?? `{${key}}`));
  return { bin, args };
}
