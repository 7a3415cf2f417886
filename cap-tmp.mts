import { Redis } from 'ioredis';
import { writeFileSync } from 'node:fs';
import { RedisStore } from '/work/main/src/store/RedisStore.ts';
import { scripts } from '/work/main/src/store/scripts.ts';
const redis = new Redis(6391);
const sl = (limit: number, windowUs: number) => ({ limit, windowUs, algorithm: 'sliding-log' as const });
const three = [
  { name: 'g', limits: [sl(15000, 1e6), sl(100000, 1e7)] },
  { name: `a1`, limits: [sl(1500, 1e6), sl(10000, 1e7)] },
  { name: `p1`, limits: [sl(40, 1e6), sl(250, 1e7)] },
];
const store = new RedisStore({ redis, prefix: 'x:' });
const mon = await new Redis(6391).monitor();
let captured: string[] | undefined;
mon.on('monitor', (_t: string, args: string[]) => { if (!captured && args[0]!.toLowerCase().startsWith('eval')) captured = args; });
await new Promise((r) => setTimeout(r, 100));
await store.admit({ tag: 't', buckets: three });
await new Promise((r) => setTimeout(r, 100));
writeFileSync('/tmp/args.json', JSON.stringify(captured));
writeFileSync('/tmp/admit.lua', scripts().admit.lua);
console.log(captured!.length, captured!.slice(0, 8));
mon.disconnect(); redis.disconnect();
