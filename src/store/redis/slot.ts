/**
 * The Redis Cluster slot of a key (its hash tag's, when it has one), computed by
 * cluster-key-slot: ioredis' own dependency, so the slot is the one ioredis routes the key to.
 * The package ships no types; it is loaded here, once, with its one function typed.
 */
import { createRequire } from 'node:module';

const calculateSlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;

export function slotOf(key: string): number {
  return calculateSlot(key);
}
