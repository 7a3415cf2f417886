/**
 * `--lease-lanes N` and `--lease-overflow`, shared by the commands that meet a leased deployment (docs/leasing.md):
 * `serve` runs one, `inspect`, `holds` and `reset` read its lanes, `replay` simulates one.
 */
import type { Command } from 'commander';
import type { CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { leasedLevel, MAX_LANES } from '../lease/lanes.js';

/**
 * Adds the option with `description`; its value is a number, or the text given when it is not
 * digits (refused by checkLeaseLanes, which shows it as typed).
 */
export function leaseLanesOption(cmd: Command, description: string): Command {
  return cmd
    .option('--lease-lanes <n>', description, (v: string) => (/^\d+$/.test(v) ? Number(v) : v))
    .option('--lease-overflow', 'the leased level has an overflow lane (docs/leasing.md)');
}

/** A clear error unless `lanes` is absent or an integer from 1 to MAX_LANES (and `overflow` comes with lanes). */
export function checkLeaseLanes(lanes: unknown, overflow?: boolean): void {
  if (overflow === true && lanes === undefined) throw new InvalidArgumentError('--lease-overflow needs --lease-lanes');
  if (lanes !== undefined && !(Number.isSafeInteger(lanes) && (lanes as number) >= 1 && (lanes as number) <= MAX_LANES))
    throw new InvalidArgumentError(
      `--lease-lanes: expected an integer from 1 to ${MAX_LANES}, got ${typeof lanes === 'string' ? JSON.stringify(lanes) : String(lanes)}`,
    );
}

/** With `lanes`: a valid number of them, and a configuration whose global level can be leased (clear errors). */
export function checkLeasable(lanes: unknown, config: CallGateConfig, overflow?: boolean): void {
  checkLeaseLanes(lanes, overflow);
  if (lanes !== undefined) leasedLevel(config);
}

/**
 * RedisStore options for a deployment leased over `lanes`, with an overflow lane or not (hash
 * tags on a single Redis too, as `serve` makes them).
 */
export function leasedStoreOptions(
  lanes: number | undefined,
  overflow?: boolean,
): { lease?: { lanes: number; overflow: boolean }; hashTags?: true } {
  return lanes === undefined ? {} : { lease: { lanes, overflow: overflow === true }, hashTags: true };
}
