export { CallGateError, type CallGateErrorCode } from './call-gate-error.js';
export { ConfigError } from './config-error.js';
export { DispatcherClosedError } from './dispatcher-closed-error.js';
export { InterruptedError } from './interrupted-error.js';
export { InvalidArgumentError } from './invalid-argument-error.js';
export { OutputError } from './output-error.js';
export { StoreUnavailableError } from './store-unavailable-error.js';
export { TraceError, type TraceProblem } from './trace-error.js';
