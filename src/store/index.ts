export type * from './types.js';
export { MemoryStore, type MemoryStoreOptions } from './MemoryStore.js';
export { RECOMMENDED_REDIS_OPTIONS, RedisStore, type RedisStoreOptions } from './RedisStore.js';
