/**
 * A GitHub-flavoured Markdown table: a header row, a rule, then one row per entry.
 * Numbers are printed as given (format them before); a `|` inside a cell is escaped.
 */
export type Cell = string | number;

/** Which way a column's text lines up: numbers read best right-aligned. */
export type Align = 'left' | 'right';

const escapeCell = (cell: Cell): string => String(cell).replaceAll('|', '\\|');

export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly Cell[])[],
  align: readonly Align[] = [],
): string {
  for (const [i, row] of rows.entries()) {
    if (row.length !== header.length)
      throw new RangeError(`table row ${i} has ${row.length} cells, the header has ${header.length}`);
  }
  const rule = header.map((_, c) => (align[c] === 'right' ? '---:' : '---'));
  const line = (cells: readonly Cell[]) => `| ${cells.map(escapeCell).join(' | ')} |`;
  return [line(header), line(rule), ...rows.map(line)].join('\n') + '\n';
}
