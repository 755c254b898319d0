import type { Finding, Verdict } from './verdict.js';

/** Stops the checks with a verdict other than valid. */
export class Decided extends Error {
  constructor(
    readonly verdict: Exclude<Verdict, 'valid'>,
    readonly finding: Finding,
  ) {
    super(finding.message);
  }
}
