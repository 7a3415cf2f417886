import { CallGateError } from './call-gate-error.js';

/** The store (Redis) could not be reached, or did not answer within the decision timeout. */
export class StoreUnavailableError extends CallGateError {
  constructor(message: string, cause?: unknown) {
    super('ERR_STORE_UNAVAILABLE', message, { cause });
  }
}
