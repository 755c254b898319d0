import { recoveredLine } from '../backup/stored-versions.js';
import { resultStyle } from '../common/terminal-style.js';
import { formatProofReport } from '../proof/proof-summary.js';
import type { StoreProofResult } from './store-proof.js';

/** What a restore drill did, for a person: the chain restored, then the proof. */
export function formatStoreProof(result: StoreProofResult): string {
  const lines: string[] = [];
  if (result.snapshot) {
    lines.push(
      `restored ${result.store} into scratch at revision ${result.revision} (${result.keys} keys) from ${result.snapshot} and ${result.deltas} delta(s) in ${((result.restoreMs ?? 0) / 1000).toFixed(1)} s`,
    );
  }
  if (result.proof) lines.push(...formatProofReport(result.proof));
  else if (result.outcome !== 'proven')
    lines.push(`${resultStyle.red.bold(result.outcome.toUpperCase())}: ${result.reason}`);
  for (const r of result.recovered ?? []) lines.push(recoveredLine(r, resultStyle.red.bold('RECOVERED')));
  return `${lines.join('\n')}\n`;
}
