/** Moved to src/errors/ (one error class per file there); this path keeps working. */
export { DispatcherClosedError } from '../errors/DispatcherClosedError.js';
