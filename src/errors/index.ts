export { CallgateError, type CallgateErrorCode } from './CallgateError.js';
export { ConfigError } from './ConfigError.js';
export { DispatcherClosedError } from './DispatcherClosedError.js';
export { InvalidArgumentError } from './InvalidArgumentError.js';
export { StoreUnavailableError } from './StoreUnavailableError.js';
export { TraceError, type TraceProblem } from './TraceError.js';
