import { CallgateError } from './CallgateError.js';

/** An argument that makes no sense (limit <= 0, non-finite time, empty route…), refused before any I/O. */
export class InvalidArgumentError extends CallgateError {
  constructor(message: string) {
    super('ERR_INVALID_ARGUMENT', message);
  }
}
