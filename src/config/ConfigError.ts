/** Moved to src/errors/ (one error class per file there); this path keeps working. */
export { ConfigError } from '../errors/ConfigError.js';
