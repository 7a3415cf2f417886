export type * from './types.js';
export { MemoryStore, type MemoryStoreOptions } from './MemoryStore.js';
export { RedisStore, type RedisStoreOptions } from './RedisStore.js';
