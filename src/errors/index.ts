export { CallgateError, type CallgateErrorCode } from './CallgateError.js';
export { ConfigError } from './ConfigError.js';
export { DispatcherClosedError } from './DispatcherClosedError.js';
export { InterruptedError } from './InterruptedError.js';
export { InvalidArgumentError } from './InvalidArgumentError.js';
export { OutputError } from './OutputError.js';
export { StoreUnavailableError } from './StoreUnavailableError.js';
export { TraceError, type TraceProblem } from './TraceError.js';
