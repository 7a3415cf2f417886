import { CallgateError } from './CallgateError.js';

/** The store (Redis) could not be reached, or did not answer within the decision timeout. */
export class StoreUnavailableError extends CallgateError {
  constructor(message: string, cause?: unknown) {
    super('ERR_STORE_UNAVAILABLE', message, { cause });
  }
}
