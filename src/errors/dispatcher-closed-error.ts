import { CallGateError } from './call-gate-error.js';

/**
 * A call handed to a Dispatcher after close(): it ends `failed` with reason `closed` and this
 * error (reserve() rejects with it). CallGate.admit() and record() reject with it once close()
 * was called, release() and refresh() once close() has nothing left under way: nothing is
 * counted or sent.
 */
export class DispatcherClosedError extends CallGateError {
  constructor(message = 'dispatcher is closed') {
    super('ERR_DISPATCHER_CLOSED', message);
  }
}
