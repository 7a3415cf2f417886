import { CallGateError } from './call-gate-error.js';
import { capProblems } from '../problem-list.js';

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

/**
 * A trace that cannot be used; `problems` holds what was kept of the problems found (at least
 * one), `problemCount` how many were found. The message lists the first 20 and counts the rest.
 */
export class TraceError extends CallGateError {
  readonly problemCount: number;

  constructor(
    readonly problems: readonly TraceProblem[],
    problemCount = problems.length,
  ) {
    super('ERR_TRACE', capProblems(problems.map(formatProblem), problemCount).join('\n'));
    this.problemCount = Math.max(problemCount, problems.length);
  }
}
