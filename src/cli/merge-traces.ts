/** `callgate merge-traces`: recorded traces (several processes, rotated files) into one, in time order. */
import type { Command } from 'commander';
import { InvalidArgumentError } from '../errors/index.js';
import { mergeTraces } from '../replay/trace-merge.js';

export function mergeTracesCommand(program: Command): void {
  program
    .command('merge-traces')
    .summary('merge recorded traces in time order')
    .description('merge recorded traces (several processes, rotated files) into one, in time order')
    .requiredOption('--out <file>', 'the merged trace (written whole or not at all)')
    .argument('<traces...>', 'recorded trace files; equal times keep the order given')
    .action(async (traces: string[], opts: { out: string }) => {
      // `-` is standard output for --decisions; here it would be a file named "-", silently
      if (opts.out === '-')
        throw new InvalidArgumentError(
          '--out -: merge-traces writes a file, whole or not at all (a replay reads its trace twice): name one',
        );
      const r = await mergeTraces(traces, opts.out);
      const n = (k: number, what: string) => `${k} ${what}${k === 1 ? '' : 's'}`;
      process.stdout.write(`${opts.out}: ${n(r.rows, 'call')} from ${n(traces.length, 'file')}\n`);
    });
}
