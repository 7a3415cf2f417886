export { ConfigError } from '../errors/config-error.js';
export { formatDuration, parseDuration, parseDurationUs } from './duration.js';
export type { DurationParse } from './duration.js';
export { configSchema, ALGORITHMS, DEFAULT_ALGORITHM, DEFAULT_MAX_CALL_DURATION_US } from './schema.js';
export { parseConfig, loadConfig, loadConfigFile, isYamlPath } from './load.js';
export { diffConfig } from './diff.js';
export type { ConfigChange, ConfigChangeKind, ConfigSection } from './diff.js';
export { formatPath } from './path.js';
export type {
  BucketConfig,
  BucketEntryInput,
  CallGateConfig,
  CallGateConfigInput,
  CarrierConfig,
  CarrierInput,
  ChannelsInput,
  LimitInput,
} from './types.js';
