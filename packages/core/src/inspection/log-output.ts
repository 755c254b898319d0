import { ResultStream } from '../common/result-stream.js';
import { StreamedTable } from '../common/streamed-table.js';
import type { SnapStore } from '../store/snapstore.js';
import { describeFilter, type KeyFilter, keyText, printableKey } from './key-filter.js';
import { kubernetesKey } from './kubernetes-key.js';
import { type LogRow, leaseHex, logRowJson } from './log-rows.js';
import { type LogItem, type LogPlan, planLog, type StoreLogOptions, storeLog } from './store-log.js';

/** Digits of a value's sha256 a table shows: enough to tell values apart at a glance; JSON has all 64. */
const SHA256_DIGITS = 12;

/**
 * Writes a log's items as they come: one JSON object a line (`--output json`: rows as logRowJson, and
 * `{"passedOver": …}` / `{"missing": …}` where revisions could not be shown), or an aligned table with a note line
 * where revisions could not be shown and, at the end, what was read and what the times mean. Keys under
 * `/registry/` are shown as Kubernetes objects (resource, namespace, name) when the filter is under it.
 */
export class LogOutput {
  private readonly table?: StreamedTable;
  private readonly kubernetes: boolean;
  private rows = 0;
  private readonly kinds = new Set<LogRow['timeKind']>();

  constructor(
    private readonly out: ResultStream,
    private readonly json: boolean,
    private readonly filter: KeyFilter,
  ) {
    const asked = filter.key ?? filter.prefix;
    this.kubernetes = asked?.toString('latin1').startsWith('/registry/') ?? false;
    if (!json) {
      const names = this.kubernetes ? ['RESOURCE', 'NAMESPACE', 'NAME'] : ['KEY'];
      this.table = new StreamedTable(
        out,
        ['REVISION', 'TIME (UTC)', 'TYPE', 'SIZE', 'SHA256', 'LEASE', ...names],
        [true, false, false, true],
      );
    }
  }

  async item(item: LogItem): Promise<void> {
    if (item.kind === 'row') {
      this.rows++;
      this.kinds.add(item.row.timeKind);
      if (this.json) await this.out.write(`${JSON.stringify(logRowJson(item.row))}\n`);
      else await this.table?.row(this.cells(item.row));
      return;
    }
    if (this.json) {
      const { kind, ...rest } = item;
      await this.out.write(`${JSON.stringify(kind === 'missing' ? { missing: rest } : { passedOver: rest })}\n`);
      return;
    }
    await this.table?.note(
      item.kind === 'missing'
        ? `! revisions ${item.fromRevision}..${item.toRevision} are in no delta of the store (one is missing): their writes are not shown`
        : `! revisions ${item.fromRevision}..${item.toRevision} not shown: ${item.object} could not be read (${item.reason})`,
    );
  }

  /** The text's last lines: what was read, whether the limit ended it, and what the times mean. */
  async end(plan: LogPlan, limited: boolean): Promise<void> {
    if (this.json || !this.table) return;
    await this.table.end();
    const { chain } = plan;
    const chainText = `${plan.deltas.length} delta(s)${plan.readsFull ? ` and ${chain.full.name}` : ''} of ${plan.store}, up to revision ${chain.lastRevision}`;
    const lines = [
      this.rows === 0
        ? `no writes to ${describeFilter(this.filter)} in ${chainText}`
        : `${this.rows} row(s) for ${describeFilter(this.filter)}${limited ? ' (--limit reached)' : ''} from ${chainText}`,
    ];
    if (this.kinds.has('read-back') || this.kinds.has('snapshot')) {
      lines.push(
        '≤: etcd wrote it at or before that time: read back from its history after a stretch the sidecar did not watch live, or the state a full snapshot holds (the time it was taken)',
      );
    }
    if (this.kinds.has('unrecorded')) {
      lines.push(
        "times are when the sidecar received each event; some deltas do not record whether it watched live then (ebr's, or older ones), when a time may be later than etcd's write",
      );
    }
    await this.out.write(`${lines.join('\n')}\n`);
  }

  private cells(row: LogRow): string[] {
    const time = row.timeKind === 'read-back' || row.timeKind === 'snapshot' ? `≤${row.time}` : row.time;
    const several = row.count > 1;
    const cells = [
      String(row.revision),
      time,
      row.type,
      row.type === 'put' ? String(row.valueSize) : '',
      row.valueSha256?.slice(0, SHA256_DIGITS) ?? '',
      row.lease === '0' ? '' : leaseHex(row.lease),
    ];
    if (!this.kubernetes)
      return [...cells, several ? `${printableKey(row.key)}* (${row.count} keys)` : printableKey(row.key)];
    if (several) {
      const first = kubernetesKey(keyText(row.firstKey as Buffer) ?? '');
      const last = kubernetesKey(keyText(row.lastKey as Buffer) ?? '');
      const same = first && last && first.resource === last.resource;
      return [
        ...cells,
        same ? first.resource : '*',
        same && first.namespace === last.namespace ? (first.namespace ?? '') : '*',
        `* (${row.count} keys)`,
      ];
    }
    const object = kubernetesKey(keyText(row.key) ?? '');
    return object
      ? [...cells, object.resource, object.namespace ?? '', object.name]
      : [...cells, '', '', printableKey(row.key)];
  }
}

/**
 * `etcd-restore log`: plans the log (a usage error before anything is downloaded), then writes each item as it
 * comes, to stdout; stops early when the reader has gone (`| head`).
 */
export async function printLog(store: SnapStore, options: StoreLogOptions, json: boolean): Promise<void> {
  const plan = await planLog(store, options);
  const out = new ResultStream();
  const output = new LogOutput(out, json, options.filter);
  let rows = 0;
  for await (const item of storeLog(store, plan, options)) {
    await output.item(item);
    if (item.kind === 'row') rows++;
    if (out.closed) return;
  }
  await output.end(plan, options.limit !== undefined && rows >= options.limit);
}
