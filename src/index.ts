export { CallGate, type CallGateEvents, type CallGateOptions, type ConfigSource } from './gate.js';
export { Admission, type AdmissionDecision, type AdmitInput, type StorePolicy } from './admission/Admission.js';
export { toSipResponse, type SipResponse, type SipOptions } from './admission/sip.js';
export * from './dispatch/Dispatcher.js';
export * from './config/index.js';
export * from './store/index.js';
export * from './errors/index.js';
export { SystemClock, VirtualClock, systemClockUs, type Clock } from './clock.js';
export * as keys from './keys.js';
