import { createHash } from 'node:crypto';
import { ResultStream } from '../common/result-stream.js';
import { StreamedTable } from '../common/streamed-table.js';
import type { DbKey } from './db-keys.js';
import { describeFilter, type KeyFilter, keyText, printableKey } from './key-filter.js';
import { type KeysAt, type KeysAtOptions, keysAtRevision } from './keys-at-revision.js';
import { leaseHex } from './log-rows.js';

const SHA256_DIGITS = 12;

/**
 * Writes the keys of `etcd-restore get` as they come. JSON is `etcdctl get -w json`'s shape, written a key at a time:
 * `{"header":{"revision":R},"kvs":[{"key":base64,"create_revision":…,"mod_revision":…,"version":…,"value":base64,
 * "lease":N}],"count":N}`, with Go's omissions (no zero field, no `kvs` or `count` for none; `value` only with
 * --values); the header holds the revision alone, since no member served it. Text is a table: the key, the numbers
 * etcdctl gives, the value's size and sha256 (to compare with `log`), and with --values the value, as text where it is
 * printable.
 */
export class GetOutput {
  private readonly table?: StreamedTable;
  private count = 0;
  private revision = 0;

  constructor(
    private readonly out: ResultStream,
    private readonly json: boolean,
    private readonly values: boolean,
  ) {
    if (!json) {
      this.table = new StreamedTable(
        out,
        ['KEY', 'CREATE_REVISION', 'MOD_REVISION', 'VERSION', 'LEASE', 'SIZE', 'SHA256', ...(values ? ['VALUE'] : [])],
        [false, true, true, true, false, true],
      );
    }
  }

  /** Before the first key: the revision they are read at. */
  async start(at: KeysAt): Promise<void> {
    this.revision = at.revision;
    if (this.json) await this.out.write(`{"header":{"revision":${at.revision}}`);
  }

  async key(kv: DbKey): Promise<void> {
    this.count++;
    if (this.json) {
      // The lease is an int64 and is written as one, as etcdctl writes it: JSON.stringify would round it.
      const fields = [
        `"key":"${kv.key.toString('base64')}"`,
        `"create_revision":${kv.createRevision}`,
        `"mod_revision":${kv.modRevision}`,
        `"version":${kv.version}`,
        ...(this.values && kv.value.length > 0 ? [`"value":"${kv.value.toString('base64')}"`] : []),
        ...(kv.lease !== '0' ? [`"lease":${kv.lease}`] : []),
      ];
      await this.out.write(`${this.count === 1 ? ',"kvs":[' : ','}{${fields.join(',')}}`);
      return;
    }
    await this.table?.row([
      printableKey(kv.key),
      String(kv.createRevision),
      String(kv.modRevision),
      String(kv.version),
      kv.lease === '0' ? '' : leaseHex(kv.lease),
      String(kv.value.length),
      createHash('sha256').update(kv.value).digest('hex').slice(0, SHA256_DIGITS),
      ...(this.values ? [printableValue(kv.value)] : []),
    ]);
  }

  /** After the last key: JSON's closing, or the table's last rows and a line saying what was read. */
  async end(at: KeysAt, filter: KeyFilter): Promise<void> {
    if (this.json) {
      await this.out.write(`${this.count > 0 ? `],"count":${this.count}` : ''}}\n`);
      return;
    }
    await this.table?.end();
    const from = `${at.snapshot}${at.deltas.length > 0 ? ` and ${at.deltas.length} delta(s)` : ''}`;
    const lines = [
      `${this.count === 0 ? 'no keys' : `${this.count} key(s)`} at revision ${this.revision} (${describeFilter(filter)}), restored from ${from}`,
    ];
    for (const s of at.skipped) lines.push(`skipped ${s.name}: ${s.reason}`);
    if (at.lost) {
      lines.push(
        `LOST revisions ${at.lost.fromRevision}..${at.lost.toRevision}${at.lost.delta ? ` (${at.lost.delta})` : ''}: ${at.lost.reason}; these keys are at revision ${at.revision}`,
      );
    }
    if (at.uncertain) {
      const { known, readBack } = at.uncertain;
      lines.push(
        `UNSURE: revisions ${readBack.from}..${readBack.to} were read back from etcd (not watched live) and may have been written by --to-time; these keys are at revision ${known.revision}, the newest known then`,
      );
    }
    if (at.timesUnrecorded) {
      lines.push(
        `note: ${at.timesUnrecorded} does not record which of its events came live: etcd may have been past revision ${at.revision} at --to-time`,
      );
    }
    await this.out.write(`${lines.join('\n')}\n`);
  }
}

/**
 * A value as a table cell: its text when it is UTF-8 without control characters, quoted with escapes when it
 * holds line breaks or tabs, otherwise (Kubernetes' protobuf objects, say) its size alone: JSON gives the bytes.
 */
function printableValue(value: Buffer): string {
  const text = keyText(value);
  if (text === undefined) return `(binary, ${value.length} bytes: --output json gives it)`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
  if (!/[\u0000-\u001f\u007f]/.test(text)) return text;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
  if (!/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) return JSON.stringify(text);
  return `(binary, ${value.length} bytes: --output json gives it)`;
}

/** `etcd-restore get`: the keys at the revision asked for, from a scratch restore, written to stdout as they are read. */
export async function printKeys(options: KeysAtOptions, json: boolean, values: boolean): Promise<void> {
  const out = new ResultStream();
  const output = new GetOutput(out, json, values);
  const at = await keysAtRevision(options, async (restored, keys) => {
    await output.start(restored);
    for await (const kv of keys) {
      await output.key(kv);
      if (out.closed) return;
    }
  });
  if (!out.closed) await output.end(at, options.filter);
}
