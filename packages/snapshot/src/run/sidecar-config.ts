import { checkLocalStore, type EtcdArgs, etcdConnection, etcdOptions, storeOption } from '@etcd-steward/core/cli';
import { parseDuration } from '@etcd-steward/core/common';
import { parseStoreUrl } from '@etcd-steward/core/store';
import yargs, { type Argv } from 'yargs';
import { type LeadershipArgs, leadershipOptions, reelectionPeriodMs } from './leadership/leadership-options.js';
import { type PartArgs, SIDECAR_PARTS } from './parts.js';
import type { PartBuild, SidecarBase } from './sidecar-part.js';

/** The parsed flags of `etcd-snapshot run`: the sidecar's own and every part's. */
export interface SidecarArgs extends EtcdArgs, LeadershipArgs, PartArgs {
  store: string;
  'encryption-key-file'?: string;
  'incomplete-upload-max-age': string;
}

/** Everything `etcd-snapshot run` needs, checked: building it is where bad input stops the program (exit 2). */
export interface SidecarConfig {
  base: SidecarBase;
  /** The parts switched on, in SIDECAR_PARTS's order. */
  parts: { name: string; build: PartBuild; startsEarly?: true }[];
}

/** `run`'s flags, each part's under its own heading in --help. */
export function sidecarOptions<T>(y: Argv<T>): Argv<SidecarArgs> {
  let all = grouped(y as Argv, 'etcd and store', (g) =>
    leadershipOptions(storeOption(etcdOptions(g))).option('incomplete-upload-max-age', {
      type: 'string',
      default: '24h',
      describe:
        'On becoming leader, abort the multipart uploads (S3) begun longer ago than this: what killed writers left',
    }),
  );
  for (const part of SIDECAR_PARTS) all = grouped(all, part.heading, (g) => part.options(g));
  return all as unknown as Argv<SidecarArgs>;
}

/** Adds options under a heading of --help, whichever function declares them. */
function grouped(y: Argv, heading: string, add: (y: Argv) => Argv): Argv {
  const before = new Set(optionNames(y));
  const after = add(y);
  return after.group(
    optionNames(after).filter((key) => !before.has(key)),
    `${heading}:`,
  );
}

/** The flags an options function declares (a part's, say), by their names. */
export function flagsOf(options: (y: Argv) => Argv): string[] {
  const bare = optionNames(yargs([]));
  return optionNames(options(yargs([]))).filter((name) => !bare.includes(name));
}

/** The flags declared so far, by their names (not aliases); yargs keeps them in getOptions(), which its types leave out. */
export function optionNames(y: Argv): string[] {
  const { key, alias } = (
    y as unknown as { getOptions(): { key: Record<string, unknown>; alias: Record<string, string[]> } }
  ).getOptions();
  const aliases = new Set(Object.values(alias).flat());
  return Object.keys(key).filter((name) => !aliases.has(name));
}

export async function sidecarConfig(args: SidecarArgs): Promise<SidecarConfig> {
  const all = await etcdConnection(args);
  const base: SidecarBase = {
    connection: { ...all, endpoints: [all.endpoints[0]] },
    storeUrl: args.store,
    encryptionKeyFile: args['encryption-key-file'],
    storePrefix: parseStoreUrl(args.store).prefix,
    incompleteUploadMaxAgeMs: parseDuration(args['incomplete-upload-max-age'], 'incomplete-upload-max-age'),
    reelectionPeriodMs: reelectionPeriodMs(args),
  };
  // Before the sidecar touches it (a mkdir under /proc never returns).
  await checkLocalStore(args.store);
  const parts: SidecarConfig['parts'] = [];
  for (const part of SIDECAR_PARTS) {
    const build = await part.configure(args, base);
    if (build) parts.push({ name: part.name, build, startsEarly: part.startsEarly });
  }
  return { base, parts };
}
