import { constants } from 'node:os';
import { CallGateError } from './call-gate-error.js';

/** SIGINT or SIGTERM received: the replay stops and the command exits with 128 + its number. */
export class InterruptedError extends CallGateError {
  constructor(readonly signal: 'SIGINT' | 'SIGTERM') {
    super('ERR_INTERRUPTED', `interrupted by ${signal}`);
  }

  /** 130 for SIGINT, 143 for SIGTERM, as shells report a process killed by them. */
  get exitCode(): number {
    return 128 + constants.signals[this.signal];
  }
}
