/**
 * The public surface of the callgate package: package.json "exports" maps `callgate` here and
 * nothing else. Internals (Admission, the Dispatcher class, the configuration schema, key
 * helpers, the batcher, the Lua scripts) are not part of it and may change in any release.
 * test/public-api.json lists every name; test/public-api.test.ts keeps the two in step.
 */

// The engine
export {
  CallGate,
  type CallGateEvents,
  type CallGateOptions,
  type ConfigSource,
  type DecisionTiming,
  type GateWarning,
  type ReleasedEvent,
  type ReleaseOutcome,
} from './gate.js';

// Decisions, inputs and events
export type {
  AdmissionDecision,
  AdmissionEvents,
  AdmitInput,
  DegradedEvent,
  StoreStallEvent,
  StorePolicy,
} from './admission/admission.js';
export { admissionLevels } from './admission/plan.js';
export type {
  DispatchInput,
  DispatchOutcome,
  DispatchReason,
  DispatchResult,
  DispatcherEvents,
  Reservation,
  ReroutedEvent,
  SendFn,
} from './dispatch/dispatcher.js';

// Stores
export { MemoryStore, type MemoryStoreOptions } from './store/memory-store.js';
export {
  RECOMMENDED_REDIS_OPTIONS,
  RedisStore,
  type RedisConnectOptions,
  type RedisStoreOptions,
  type HoldsOptions,
} from './store/redis/redis-store.js';
export type * from './store/types.js';
export { leaseMetrics } from './observe/lease-metrics.js';
export {
  LeaseCoordinator,
  type LeaseCoordinatorOptions,
  type LeaseLanes,
  type LeaseTickReport,
} from './lease/coordinator.js';
export type { LanePins } from './lease/lanes.js';
export type { HoldLedger, LedgerEntry, LedgerHold } from './holds/ledger.js';

// Clocks
export { SystemClock, VirtualClock, type Clock } from './clock.js';

// Errors
export {
  CallGateError,
  ConfigError,
  DispatcherClosedError,
  InvalidArgumentError,
  StoreUnavailableError,
  TraceError,
  type CallGateErrorCode,
  type TraceProblem,
} from './errors/index.js';

// SIP
export { toSipResponse, type ChannelRefusal, type SipOptions, type SipResponse } from './admission/sip.js';

// Configuration
export { loadConfig, loadConfigFile } from './config/load.js';
export type {
  AttributeKey,
  AttributeLevelConfig,
  AttributeLevelInput,
  AttributeMatch,
  AttributeOrder,
  BanConfig,
  BucketConfig,
  BucketEntryInput,
  CallGateConfig,
  CallGateConfigInput,
  CarrierConfig,
  CarrierInput,
  ChannelsInput,
  IdMap,
  LimitInput,
} from './config/types.js';
export type { ConfigChange, ConfigChangeKind, ConfigSection } from './config/diff.js';

// Metrics (prom-client) and live inspection
export {
  gateMetrics,
  inspectLive,
  DEFAULT_LATENCY_BUCKETS,
  DEFAULT_WAIT_BUCKETS,
  type GateMetrics,
  type LiveState,
  type MetricsOptions,
} from './observe/metrics.js';
export {
  inspectGate,
  inspectState,
  stateText,
  type BucketState,
  type CarrierState,
  type GateState,
  type InspectOptions,
  type LimitState,
} from './observe/inspect.js';
// An operator's hand: the calls holding a bucket or carrier, a bucket reset (release frees one call)
export {
  listHolds,
  resetBucket,
  type HoldsListing,
  type HoldsTarget,
  type OperateOptions,
  type ResetReport,
} from './observe/operate.js';
export type {
  ListedHold,
  ListHoldsRequest,
  ListHoldsResult,
  OperableStore,
  ResetRequest,
  ResetResult,
} from './store/operations.js';
export { MAX_ID_LENGTH } from './ids.js';
export { liftBan, listBans, type BanState } from './observe/bans.js';
export type { CallAttributes } from './admission/attributes.js';
// Recording live traffic as replayable traces
export { TraceRecorder, type TraceRecorderOptions } from './recording/trace-recorder.js';
export { mergeTraces, type MergeResult } from './replay/trace-merge.js';
