/** `callgate kamailio`: the Kamailio include that decides on callgate's Redis (src/kamailio/redis-commands.ts). */
import type { Command } from 'commander';
import { loadConfigFile } from '../config/index.js';
import { kamailioCommands, kamailioInclude } from '../kamailio/redis-commands.js';
import { InvalidArgumentError } from '../errors/index.js';
import { OutputFile, sameFileProblems } from '../output-file.js';
import { shownOption } from './int-option.js';
import { checkLeasable, type LeaseArgs, leasedStoreOptions, leaseLanesOption } from './lease-lanes.js';

interface KamailioArgs extends LeaseArgs {
  config: string;
  prefix: string;
  localShare: string;
  hashTags?: boolean;
  out?: string;
}

export function kamailioCommand(program: Command): void {
  const cmd = program
    .command('kamailio')
    .summary('write the ndb_redis include for Kamailio')
    .description(
      'write the Kamailio include of examples/kamailio/kamailio-redis.cfg: the admit and release script ' +
        'calls of every configured peer (alone and with each account), as the library makes them',
    )
    .requiredOption('--config <file>', 'the limit configuration (JSON or YAML)')
    .option('--prefix <prefix>', 'the key prefix, as the Node processes on the same Redis use it', 'callgate:')
    .option(
      '--hash-tags',
      'keys with hash tags, as the Node processes name them on a Redis Cluster (or with hashTags: true)',
    )
    .option('--local-share <share>', "policy local: the share of each level's rate Kamailio allows alone", '1');
  leaseLanesOption(cmd, 'the Node processes lease the global level over N lanes: decide on the lanes (hash tags)')
    .option('--out <file>', 'where to write it (default: standard output)')
    .action(async (opts: KamailioArgs) => {
      // a number as typed (Number('') and Number(' ') are 0, which was not meant)
      const share = /^\s*$/.test(opts.localShare) ? Number.NaN : Number(opts.localShare);
      if (!(share > 0 && share <= 1))
        throw new InvalidArgumentError(
          `--local-share: expected a number > 0 and <= 1, got ${shownOption(opts.localShare)}`,
        );
      const clashes = sameFileProblems([['--out', opts.out, true]], [['--config', opts.config]]);
      if (clashes.length > 0) throw new InvalidArgumentError(clashes.join('\n'));
      const config = await loadConfigFile(opts.config);
      checkLeasable(opts, config);
      // the lanes as the Node processes' stores take them
      const { lease } = leasedStoreOptions(opts);
      const cmds = kamailioCommands(config, opts.prefix, share, {
        hashTags: opts.hashTags === true,
        ...(lease && { lease }),
      });
      const text = kamailioInclude(cmds, opts.config);
      // as replay's outputs: a one-line error naming the file (a directory, no such directory,
      // a full device, a reader that went away), and a file replaced whole or not at all
      const out = await OutputFile.open(opts.out ?? '-', (name) => `the include to ${name}`, { dash: true });
      try {
        await out.write(text);
        await out.commit();
      } catch (err) {
        out.abort();
        throw err;
      }
    });
}
