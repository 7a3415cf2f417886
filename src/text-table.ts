/**
 * Rows of cells as aligned text for a terminal (the replay report, `inspect`, `holds`). Every
 * cell goes through printable(): ids come from traffic.
 */
import { printable } from './ids.js';

/**
 * `rows` (the first is the header) in columns two spaces apart: the first column left-aligned,
 * the others right-aligned (`allLeft`: every column left); `rule`: a line of dashes under the
 * header.
 */
export function textTable(
  rows: readonly (readonly (string | number)[])[],
  opts: { allLeft?: boolean; rule?: boolean } = {},
): string {
  const cells = rows.map((r) => r.map((c) => printable(String(c))));
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === 0 || opts.allLeft ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  const lines = cells.map(line);
  if (opts.rule) lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return lines.join('\n');
}
