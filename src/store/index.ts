export type * from './types.js';
export { MemoryStore, type MemoryStoreOptions } from './memory-store.js';
export { RECOMMENDED_REDIS_OPTIONS, RedisStore, type RedisStoreOptions } from './redis/redis-store.js';
