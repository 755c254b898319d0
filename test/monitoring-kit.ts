import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** deploy/monitoring/ as the tests read it: the rules (plain file and PrometheusRule) and the dashboard. */
export const monitoring = fileURLToPath(new URL('../deploy/monitoring/', import.meta.url));
export const rulesFile = `${monitoring}etcd-steward.rules.yaml`;
export const prometheusRuleFile = `${monitoring}prometheusrule.yaml`;
export const dashboardFile = `${monitoring}etcd-steward-dashboard.json`;
export const unitTestsFile = fileURLToPath(new URL('monitoring/rules.test.yaml', import.meta.url));

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleGroups {
  groups: { name: string; rules: Rule[] }[];
}

export function rules(): RuleGroups {
  return parse(readFileSync(rulesFile, 'utf8'));
}

export function alertRules(): (Rule & { alert: string })[] {
  return rules().groups.flatMap((g) => g.rules.filter((r): r is Rule & { alert: string } => r.alert !== undefined));
}

/** Every PromQL expression of the dashboard: its panels' queries and its variables'. */
export function dashboardExpressions(): string[] {
  const dashboard = JSON.parse(readFileSync(dashboardFile, 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { query?: string | { query: string } }[] };
  };
  const variables = dashboard.templating.list.map((v) => (typeof v.query === 'object' ? v.query.query : undefined));
  return [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ...variables
      .filter((q): q is string => q?.startsWith('label_values(') ?? false) // label_values(series, label): the series
      .map((q) => q.slice(13, q.lastIndexOf(','))),
  ];
}

const NOT_METRICS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
]);

/**
 * The metric (and recorded series) names an expression reads: identifiers that are not functions, keywords, label
 * names or strings. Histograms' _bucket/_sum/_count series are named by their histogram.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names = [...bare.matchAll(/(?<![\w:.])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()/g)].map(([, name]) => name);
  return [...new Set(names.filter((n) => !NOT_METRICS.has(n)).map((n) => n.replace(/_(bucket|sum|count)$/, '')))];
}
