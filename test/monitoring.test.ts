import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import {
  alertRules,
  dashboardExpressions,
  metricNames,
  prometheusRuleFile,
  rules,
  rulesFile,
  unitTestsFile,
} from './monitoring-kit.js';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);
const at = tempDir('monitoring-');
const operatorDoc = readFileSync(new URL('../docs/operator.md', import.meta.url), 'utf8');

interface UnitTests {
  rule_files: string[];
  tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
}

/** promtool's answer: its exit code and what it printed. */
async function promtool(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args);
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, output: e.stdout + e.stderr };
  }
}

/** The rules with `change` applied, and the unit tests pointed at them, in a folder of their own. */
async function unitTestsOn(name: string, change: (text: string) => string): Promise<string> {
  await mkdir(at(name));
  await writeFile(at(name, 'rules.yaml'), change(readFileSync(rulesFile, 'utf8')));
  const tests = parse(readFileSync(unitTestsFile, 'utf8')) as UnitTests;
  tests.rule_files = ['rules.yaml'];
  await writeFile(at(name, 'tests.yaml'), stringify(tests));
  return at(name, 'tests.yaml');
}

describe('deploy/monitoring/ rules', () => {
  it('the PrometheusRule holds the same groups as the plain rules file, and promtool accepts both', async () => {
    const resource = parse(readFileSync(prometheusRuleFile, 'utf8')) as { spec: unknown };
    expect(resource.spec).toEqual(rules());
    await writeFile(at('from-prometheusrule.yaml'), stringify(resource.spec));
    const check = await promtool('check', 'rules', rulesFile, at('from-prometheusrule.yaml'));
    expect(check.output).not.toMatch(/FAILED/);
    expect(check.code).toBe(0);
    // the test copy that test/monitoring-prometheus.test.ts loads keeps every expression; here all of them parse
    expect(check.output).toMatch(new RegExp(`SUCCESS: ${rules().groups.flatMap((g) => g.rules).length} rules found`));
  });

  it("promtool's unit tests pass, with a case where each alert fires and one where it stays quiet", async () => {
    const result = await promtool('test', 'rules', unitTestsFile);
    expect(result.output).toMatch(/SUCCESS/);
    expect(result.code).toBe(0);
    const cases = (parse(readFileSync(unitTestsFile, 'utf8')) as UnitTests).tests.flatMap(
      (t) => t.alert_rule_test ?? [],
    );
    for (const { alert } of alertRules()) {
      const of = cases.filter((c) => c.alertname === alert);
      expect(
        of.some((c) => c.exp_alerts.length > 0),
        `${alert} fires in a unit test`,
      ).toBe(true);
      expect(
        of.some((c) => c.exp_alerts.length === 0),
        `${alert} stays quiet in a unit test`,
      ).toBe(true);
    }
  });

  it('the unit tests fail on a rule that no longer fires, or fires too early', async () => {
    const never = await promtool(
      'test',
      'rules',
      await unitTestsOn('never', (t) =>
        t.replace('etcd_snapshot_store_reachable == 0', 'etcd_snapshot_store_reachable == 2'),
      ),
    );
    expect(never.code).not.toBe(0);
    expect(never.output).toMatch(/alertname: EtcdBackupStoreUnreachable/);
    const early = await promtool(
      'test',
      'rules',
      await unitTestsOn('early', (t) =>
        t.replace(
          'expr: etcd_snapshot_store_reachable == 0\n        for: 5m\n',
          'expr: etcd_snapshot_store_reachable == 0\n',
        ),
      ),
    );
    expect(early.code).not.toBe(0);
    expect(early.output).toMatch(/alertname: EtcdBackupStoreUnreachable, time: 5m/);
    const noSchedule = await promtool(
      'test',
      'rules',
      await unitTestsOn('fixed-hour', (t) =>
        t.replace(
          'expr: etcd_steward:full_snapshot_age_seconds > etcd_steward:full_snapshot_allowed_age_seconds',
          'expr: etcd_steward:full_snapshot_age_seconds > 3600',
        ),
      ),
    );
    expect(noSchedule.code).not.toBe(0);
    expect(noSchedule.output).toMatch(/alertname: EtcdBackupFullSnapshotOverdue/);
  });

  it('each alert has a severity, a summary, a description and a runbook section in docs/operator.md', () => {
    const anchors = new Set(
      [...operatorDoc.matchAll(/^#{2,4} (.+)$/gm)].map(([, title]) =>
        title
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const rule of alertRules()) {
      expect(['critical', 'warning', 'info'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toContain(`docs/operator.md, ${rule.alert}`);
      expect(rule.annotations?.runbook_url, rule.alert).toBe(`docs/operator.md#${rule.alert.toLowerCase()}`);
      expect(anchors, rule.alert).toContain(rule.alert.toLowerCase());
    }
  });

  it('every recorded series a rule or a panel reads is recorded by the rules', () => {
    const recorded = new Set(rules().groups.flatMap((g) => g.rules.flatMap((r) => r.record ?? [])));
    const read = [...rules().groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExpressions()].flatMap(
      metricNames,
    );
    expect(read.length).toBeGreaterThan(40);
    expect(read.filter((n) => n.includes(':') && !recorded.has(n))).toEqual([]);
    expect(metricNames('sum by (le) (rate(a_bucket{x="y"}[5m])) / on (job) b > 3 * c:d and time() - e')).toEqual([
      'a',
      'b',
      'c:d',
      'e',
    ]);
  });
});
