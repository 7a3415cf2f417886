/** Base class of every error callgate throws on purpose; `code` is stable and machine-readable. */
export class CallgateError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
