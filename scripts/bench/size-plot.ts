// sizes.ts's figures as an SVG: time and peak memory of each program against the db's size, ours in solid lines,
// ebr's dashed in the same colour. Written by hand: two line charts need no plotting library.

export interface Figures {
  seconds: number;
  peakMb: number;
  /** The anonymous part of the peak (an etcd's RSS counts the db pages it has mapped; this does not). */
  peakAnonMb?: number;
  /** False when the run failed or was stopped at its limit: it is left out of the plot. */
  ok: boolean;
}

export interface SizeResult {
  gib: number;
  dbBytes: number;
  program: string;
  ours: Figures;
  reference?: Figures & { name: string };
  ebr?: Figures;
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf', '#7f7f7f'];
const W = 460;
const H = 320;
const M = { left: 56, right: 12, top: 28, bottom: 40 };

const esc = (s: string) => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;');

/** A round step for the size axis up to `max`, about five ticks. */
function step(max: number): number {
  const raw = max / 5;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? raw;
}

function chart(results: SizeResult[], x0: number, title: string, value: (f: Figures) => number): string {
  const programs = [...new Set(results.map((r) => r.program))];
  const series = programs.flatMap((program, i) => {
    const rows = results.filter((r) => r.program === program);
    const line = (pick: (r: SizeResult) => Figures | undefined, dash: boolean) => ({
      colour: COLOURS[i % COLOURS.length],
      dash,
      points: rows.flatMap((r) => {
        const f = pick(r);
        return f?.ok ? [[r.dbBytes / 2 ** 30, value(f)] as const] : [];
      }),
    });
    return [line((r) => r.ours, false), line((r) => r.ebr, true)];
  });
  const xMax = Math.max(1, ...results.map((r) => r.dbBytes / 2 ** 30));
  const ys = series.flatMap((s) => s.points.map(([, y]) => y));
  // A log scale: ebr's figures are tens of times ours, and a linear axis would flatten ours onto zero.
  const yLow = 10 ** Math.floor(Math.log10(Math.max(0.01, Math.min(...ys))));
  const yHigh = 10 ** Math.ceil(Math.log10(Math.max(yLow * 10, ...ys)));
  const xs = step(xMax);
  const xTop = Math.ceil(xMax / xs) * xs;
  const px = (x: number) => x0 + M.left + (x / xTop) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - (Math.log10(y / yLow) / Math.log10(yHigh / yLow)) * (H - M.top - M.bottom);
  const out = [`<text x="${x0 + W / 2}" y="18" text-anchor="middle" font-weight="bold">${esc(title)}</text>`];
  for (let x = 0; x <= xTop + 1e-9; x += xs)
    out.push(
      `<line x1="${px(x)}" y1="${py(yLow)}" x2="${px(x)}" y2="${py(yHigh)}" stroke="#eee"/>`,
      `<text x="${px(x)}" y="${H - M.bottom + 16}" text-anchor="middle">${+x.toFixed(2)}</text>`,
    );
  for (let decade = yLow; decade <= yHigh * 1.0001; decade *= 10)
    for (const m of decade < yHigh * 0.9999 ? [1, 2, 5] : [1]) {
      const y = decade * m;
      out.push(
        `<line x1="${px(0)}" y1="${py(y)}" x2="${px(xTop)}" y2="${py(y)}" stroke="${m === 1 ? '#ccc' : '#eee'}"/>`,
      );
      out.push(`<text x="${px(0) - 6}" y="${py(y) + 4}" text-anchor="end">${+y.toPrecision(2)}</text>`);
    }
  out.push(`<text x="${px(xTop / 2)}" y="${H - 6}" text-anchor="middle">db size (GiB)</text>`);
  for (const s of series) {
    if (s.points.length === 0) continue;
    const d = s.points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    const dash = s.dash ? ' stroke-dasharray="6,4"' : '';
    out.push(`<path d="${d}" fill="none" stroke="${s.colour}" stroke-width="2"${dash}/>`);
    for (const [x, y] of s.points)
      out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.colour}"/>`);
  }
  return out.join('\n');
}

/** Two charts side by side (time, peak memory) and a legend of the programs below them. */
export function plotSizes(results: SizeResult[]): string {
  const programs = [...new Set(results.map((r) => r.program))];
  const legendTop = H + 10;
  const height = legendTop + 20 * (programs.length + 1) + 10;
  const legend = [
    ...programs.map((p, i) => {
      const y = legendTop + 20 * i + 10;
      const colour = COLOURS[i % COLOURS.length];
      return `<line x1="70" y1="${y}" x2="100" y2="${y}" stroke="${colour}" stroke-width="2"/><text x="108" y="${y + 4}">${esc(p)}</text>`;
    }),
    `<text x="70" y="${legendTop + 20 * programs.length + 14}">solid: etcd-steward; dashed: ebr v0.23 (where it finished)</text>`,
  ];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${height}" font-family="sans-serif" font-size="12">`,
    '<title>Time and peak memory of each program against the db size</title>',
    `<rect width="100%" height="100%" fill="white"/>`,
    chart(results, 0, 'wall time (s, log scale)', (f) => f.seconds),
    chart(results, W, 'peak memory of the process tree (MB, log scale)', (f) => f.peakMb),
    ...legend,
    '</svg>',
    '',
  ].join('\n');
}
