import { parseDuration, requirePositive } from '@etcd-steward/core/common';
import type { Argv } from 'yargs';

export interface LeadershipArgs {
  'reelection-period': string;
}

/** The leadership's flag: the one part no flag switches off, since every other part asks it who leads. */
export function leadershipOptions(y: Argv): Argv {
  return y.option('reelection-period', {
    type: 'string',
    default: '5s',
    describe: "How often to ask etcd whether this sidecar's member leads (only the leader's sidecar snapshots)",
  });
}

export function reelectionPeriodMs(args: LeadershipArgs): number {
  return requirePositive(parseDuration(args['reelection-period'], 'reelection-period'), 'reelection-period');
}
