import { CallgateError } from './CallgateError.js';

/** One problem of a call trace, located in its file. */
export interface TraceProblem {
  file: string;
  /** Physical line (1-based); 0 when the problem concerns the whole file (cannot read it). */
  line: number;
  /** Column name, when the problem concerns one cell. */
  column?: string;
  message: string;
}

/** `FILE:LINE: column "time": bad time "abc"` (`FILE: message` when line is 0). */
export function formatProblem(p: TraceProblem): string {
  const where = p.line > 0 ? `${p.file}:${p.line}` : p.file;
  const col = p.column !== undefined ? `column ${JSON.stringify(p.column)}: ` : '';
  return `${where}: ${col}${p.message}`;
}

/** A trace that cannot be used; `problems` holds what was found (at least one). */
export class TraceError extends CallgateError {
  constructor(readonly problems: readonly TraceProblem[]) {
    const shown = problems.slice(0, 10).map(formatProblem);
    if (problems.length > 10) shown.push(`… and ${problems.length - 10} more problems`);
    super('ERR_TRACE', shown.join('\n'));
  }
}
