import { CallGateError } from './call-gate-error.js';

/**
 * The replay's output cannot be written where the command line says: `--decisions` naming a
 * directory, a missing directory, no permission, a full device, a reader that went away; or the
 * report on a closed standard output. `what` names it: `decisions to out.jsonl`.
 */
export class OutputError extends CallGateError {
  constructor(what: string, reason: string, options?: { cause?: unknown }) {
    super('ERR_OUTPUT', `cannot write ${what}: ${reason}`, options);
  }
}
