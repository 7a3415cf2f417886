import { CallGateError } from './call-gate-error.js';

/** An argument that makes no sense (limit <= 0, non-finite time, empty route…), refused before any I/O. */
export class InvalidArgumentError extends CallGateError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_INVALID_ARGUMENT', message, options);
  }
}
