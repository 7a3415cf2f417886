import { CallGateError } from './call-gate-error.js';

/**
 * A call handed to a Dispatcher after close(): it ends `failed` with reason `closed` and this
 * error (reserve() rejects with it). CallGate.release() rejects with it too once close() has
 * ended the held outbound calls: the release is not sent.
 */
export class DispatcherClosedError extends CallGateError {
  constructor(message = 'dispatcher is closed') {
    super('ERR_DISPATCHER_CLOSED', message);
  }
}
