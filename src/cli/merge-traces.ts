/** `callgate merge-traces`: recorded traces (several processes, rotated files) into one, in time order. */
import type { Command } from 'commander';
import { mergeTraces } from '../replay/trace-merge.js';

export function mergeTracesCommand(program: Command): void {
  program
    .command('merge-traces')
    .summary('merge recorded traces in time order')
    .description('merge recorded traces (several processes, rotated files) into one, in time order')
    .requiredOption('--out <file>', 'the merged trace (written whole or not at all)')
    .argument('<traces...>', 'recorded trace files; equal times keep the order given')
    .action(async (traces: string[], opts: { out: string }) => {
      const r = await mergeTraces(traces, opts.out);
      process.stdout.write(`${opts.out}: ${r.rows} calls from ${traces.length} files\n`);
    });
}
