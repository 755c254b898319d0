import type { ResultStream } from './result-stream.js';
import { resultStyle } from './terminal-style.js';

/** Rows whose widths set the columns' before the first is printed. */
const SAMPLE_ROWS = 100;

/**
 * An aligned text table, as `kubectl get` prints one, for results that stream: the columns take the widths of the
 * header and the first rows, which are then printed, and every later row is printed as it comes with those widths
 * (a wider cell pushes the rest of its row right, as `kubectl get --watch` does). So memory holds a few rows, never
 * the whole result. The last column is not padded; `right` columns (numbers) are aligned right.
 */
export class StreamedTable {
  private sample: string[][] | undefined = [];
  private widths: number[] = [];

  constructor(
    private readonly out: ResultStream,
    private readonly header: readonly string[],
    private readonly right: readonly boolean[] = [],
    private readonly sampleRows = SAMPLE_ROWS,
  ) {}

  async row(cells: readonly string[]): Promise<void> {
    if (this.sample) {
      this.sample.push([...cells]);
      if (this.sample.length >= this.sampleRows) await this.flush();
      return;
    }
    await this.out.write(`${this.line(cells)}\n`);
  }

  /** A line of its own between rows (a note where rows are missing), after the rows before it. */
  async note(text: string): Promise<void> {
    await this.flush();
    await this.out.write(`${text}\n`);
  }

  /** Prints what is held; the table then has its widths. Without any row, nothing is printed, not even the header. */
  async end(): Promise<void> {
    await this.flush();
  }

  /** Whether any row was given. */
  get empty(): boolean {
    return this.sample !== undefined && this.sample.length === 0 && this.widths.length === 0;
  }

  private async flush(): Promise<void> {
    const sample = this.sample;
    if (!sample) return;
    if (sample.length === 0 && this.widths.length === 0) return;
    this.sample = undefined;
    this.widths = this.header.map((h, i) => Math.max(h.length, ...sample.map((r) => (r[i] ?? '').length)));
    // Styled after padding: escape codes would count as width.
    let text = `${resultStyle.bold(this.line(this.header))}\n`;
    for (const r of sample) text += `${this.line(r)}\n`;
    await this.out.write(text);
  }

  private line(cells: readonly string[]): string {
    const last = this.header.length - 1;
    return cells
      .map((c, i) => (i === last ? c : this.right[i] ? c.padStart(this.widths[i]) : c.padEnd(this.widths[i])))
      .join('  ')
      .trimEnd();
  }
}
