export { CallgateError } from './CallgateError.js';
export { InvalidArgumentError } from './InvalidArgumentError.js';
export { StoreUnavailableError } from './StoreUnavailableError.js';
