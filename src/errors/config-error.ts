import { CallGateError } from './call-gate-error.js';
import { capProblems } from '../problem-list.js';

/**
 * A limit configuration that cannot be used: unreadable file, JSON/YAML syntax error, or values
 * that break the contract. `problems` holds every problem found (not only the first), one line
 * each, shaped `[file: ]path: message`, e.g.
 * `limits.json: inbound.peers.peer45[1].window: expected a positive duration, got "abc"`.
 * The message is those lines joined by newlines, the first 20 of them and a count of the rest
 * (see capProblems); `problems` keeps them all.
 */
export class ConfigError extends CallGateError {
  readonly problems: readonly string[];

  constructor(problems: readonly string[], options?: { cause?: unknown }) {
    const list = problems.length > 0 ? [...problems] : ['invalid configuration'];
    super('ERR_CONFIG', capProblems(list).join('\n'), options);
    this.problems = list;
  }
}
