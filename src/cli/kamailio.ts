/** `callgate kamailio`: the Kamailio include that decides on callgate's Redis (src/kamailio/redis-commands.ts). */
import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { loadConfigFile } from '../config/index.js';
import { kamailioCommands, kamailioInclude } from '../kamailio/redis-commands.js';

export function kamailioCommand(program: Command): void {
  program
    .command('kamailio')
    .summary('write the Kamailio include for ndb_redis')
    .description(
      'write the Kamailio include of examples/kamailio/kamailio-redis.cfg: the admit and release script ' +
        'calls of every configured peer (alone and with each account), as the library makes them',
    )
    .requiredOption('--config <file>', 'the limit configuration (JSON or YAML)')
    .option('--prefix <prefix>', 'the key prefix, as the Node processes on the same Redis use it', 'callgate:')
    .option('--local-share <share>', "policy local: the share of each level's rate Kamailio allows alone", '1')
    .option('--out <file>', 'where to write it (default: standard output)')
    .action(async (opts: { config: string; prefix: string; localShare: string; out?: string }) => {
      const config = await loadConfigFile(opts.config);
      const text = kamailioInclude(kamailioCommands(config, opts.prefix, Number(opts.localShare)), opts.config);
      if (opts.out === undefined) process.stdout.write(text);
      else writeFileSync(opts.out, text);
    });
}
