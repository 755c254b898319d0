import { expect, it } from 'vitest';
import { describeFault, faultSchedule, runFaultRun } from './fault-run.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('fault-run-');

/**
 * The randomized fault run (fault-run.ts, docs/proof.md §5), bounded for CI: FAULT_RUN_SEED replays a run,
 * FAULT_RUN_STEPS makes it longer. The seed and the schedule are printed first, and again with a failure.
 */
const seed = Number(process.env.FAULT_RUN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const steps = Number(process.env.FAULT_RUN_STEPS ?? 8);

it(
  'a random schedule of faults leaves a store that restores and proves against etcd',
  async () => {
    const lines: string[] = [];
    const log = (line: string) => {
      lines.push(line);
      console.log(`[fault run ${seed}] ${line}`);
    };
    log(
      `seed ${seed}, ${steps} steps: ${faultSchedule(seed, steps)
        .filter((f) => f.kind !== 'writes')
        .map(describeFault)
        .join('; ')}`,
    );
    const result = await runFaultRun({ seed, steps, at, log });
    const replay = `replay: FAULT_RUN_SEED=${seed} FAULT_RUN_STEPS=${steps} scripts/test test/fault-run.test.ts\n${lines.join('\n')}`;
    const end = result.checkpoints.find((c) => c.at === 'end');
    expect(end?.code, replay).toBe(0);
    // Midway the sidecar may lag behind a compaction etcd just made: not provable yet is an answer, a wrong one is not.
    for (const c of result.checkpoints) expect([0, 5], `${c.at}: ${c.summary}\n${replay}`).toContain(c.code);
    expect(result.writes, replay).toBeGreaterThan(0);
    // 8 steps take about 30 s; a longer run gets time in proportion
  },
  Math.max(180_000, steps * 20_000),
);
