/**
 * `callgate unban`: lift the ban of one value of an attribute level (docs/attributes.md) on the
 * live Redis the routing processes share: every process sees it at its next call.
 */
import type { Command } from 'commander';
import { loadConfigFile } from '../config/load.js';
import { printable } from '../ids.js';
import { liftBan, unbanTarget } from '../observe/bans.js';
import { RedisStore } from '../store/redis/redis-store.js';
import { closeRedis, openRedis, redisOptions, type RedisConnectionArgs } from './redis.js';

export interface UnbanArgs extends RedisConnectionArgs {
  config: string;
  prefix: string;
  level: string;
  value: string;
  json?: boolean;
}

export async function runUnban(args: UnbanArgs, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const config = await loadConfigFile(args.config);
  unbanTarget(config, args.level, args.value); // before Redis: a level without a ban is no outage
  const redis = await openRedis(args);
  try {
    const { lifted } = await liftBan(config, new RedisStore({ redis, prefix: args.prefix }), args.level, args.value);
    const what = printable(`${args.level}:${args.value}`);
    out.write(
      args.json
        ? `${JSON.stringify({ level: args.level, value: args.value, lifted })}\n`
        : lifted
          ? `lifted the ban of ${what}\n`
          : `${what} was not banned (its strikes are reset)\n`,
    );
  } finally {
    await closeRedis(redis);
  }
}

export function unbanCommand(program: Command): void {
  const cmd = program
    .command('unban')
    .summary('lift the ban of an attribute value')
    .description('lift the ban of one value of an attribute level on the live Redis, for every routing process')
    .requiredOption('--config <file>', 'limit configuration (JSON or YAML) the routing processes use')
    .requiredOption('--level <name>', 'the attribute level (its name in the configuration)')
    .requiredOption(
      '--value <value>',
      'the value as limited_by shows it after "<level>:" (or #<slot> of a shared bucket)',
    );
  redisOptions(cmd, 'the Redis they share')
    .option('--prefix <prefix>', 'their key prefix', 'callgate:')
    .option('--json', 'one JSON object')
    .action(async (opts: UnbanArgs) => runUnban(opts));
}
