/**
 * Every code a CallGateError can carry, one per error class:
 * - ERR_INVALID_ARGUMENT: InvalidArgumentError, an argument refused before any I/O;
 * - ERR_STORE_UNAVAILABLE: StoreUnavailableError, Redis out of reach or too slow;
 * - ERR_CONFIG: ConfigError, a limit configuration that cannot be used;
 * - ERR_TRACE: TraceError, a call trace that cannot be used;
 * - ERR_DISPATCHER_CLOSED: DispatcherClosedError, a call or a release handed over after close();
 * - ERR_OUTPUT: OutputError, the replay's decisions or report cannot be written (command line);
 * - ERR_INTERRUPTED: InterruptedError, a replay stopped by SIGINT / SIGTERM (command line).
 */
export type CallGateErrorCode =
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_CONFIG'
  | 'ERR_TRACE'
  | 'ERR_DISPATCHER_CLOSED'
  | 'ERR_OUTPUT'
  | 'ERR_INTERRUPTED';

/**
 * Base class of every error callgate throws on purpose; `code` is stable and machine-readable.
 * Abstract: each code has its own subclass (above), and a throw site uses it, so that
 * `instanceof StoreUnavailableError` holds whenever `code` is ERR_STORE_UNAVAILABLE.
 */
export abstract class CallGateError extends Error {
  constructor(
    readonly code: CallGateErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    // JavaScript callers escape the compiler's `abstract`
    if (new.target === CallGateError) throw new TypeError(`build the subclass of ${code}, not a bare CallGateError`);
    super(message, options);
    this.name = new.target.name;
  }
}
