/**
 * `--lease-lanes N`, `--lease-overflow` and `--lease-pin`, shared by the commands that meet a leased deployment (docs/leasing.md):
 * `serve` runs one, `inspect`, `holds` and `reset` read its lanes, `replay` simulates one.
 */
import type { Command } from 'commander';
import { intOption, shownOption } from './int-option.js';
import type { CallGateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import { leasedCarrier } from '../lease/carriers.js';
import { type LanePins, lanePlan, leasedLevel, MAX_LANES } from '../lease/lanes.js';

/**
 * Adds the option with `description`; its value is a number, or the text given when it is not
 * digits (refused by checkLeaseLanes, which shows it as typed).
 */
export function leaseLanesOption(cmd: Command, description: string): Command {
  return cmd
    .option('--lease-lanes <n>', description, intOption)
    .option('--lease-overflow', 'the leased level has an overflow lane (docs/leasing.md)')
    .option(
      '--lease-pin <owner=lane>',
      'account:<id>=<lane> or peer:<id>=<lane>: that owner on that lane, repeatable (docs/leasing.md)',
      collectPin,
    );
}

/**
 * One `--lease-pin account:<id>=<lane>` (or `peer:<id>=<lane>`) added to those before it. The id
 * is everything between the kind and the last `=`, so it may hold `=` itself.
 */
function collectPin(v: string, before: LanePins | undefined): LanePins {
  const m = /^(account|peer):(.+)=([^=]*)$/s.exec(v);
  if (m === null)
    throw new InvalidArgumentError(
      `--lease-pin: expected account:<id>=<lane> or peer:<id>=<lane>, got ${JSON.stringify(v)}`,
    );
  if (!/^\d+$/.test(m[3]!))
    throw new InvalidArgumentError(`--lease-pin ${v}: the lane must be an integer from 0, got ${JSON.stringify(m[3])}`);
  const field = m[1] === 'account' ? 'accounts' : 'peers';
  const id = m[2]!;
  // one owner per flag: a list would pin an owner whose id is the whole list
  if (/,(account|peer):/.test(id))
    throw new InvalidArgumentError(`--lease-pin ${v}: one owner per --lease-pin (repeat the option)`);
  const had = before?.[field] ?? {};
  if (Object.hasOwn(had, id)) throw new InvalidArgumentError(`--lease-pin: ${m[1]}:${id} is pinned twice`);
  return { ...before, [field]: { ...had, [id]: Number(m[3]) } };
}

/** The options leaseLanesOption adds, as commander hands them to a command. */
export interface LeaseArgs {
  /** The global level leased over this many lanes (`--lease-lanes`): a number, or the text given. */
  leaseLanes?: number;
  /** ... with an overflow lane (`--lease-overflow`). */
  leaseOverflow?: boolean;
  /** ... and owners placed on lanes (`--lease-pin`). */
  leasePin?: LanePins;
}

/** A clear error unless the lanes are absent or an integer from 1 to MAX_LANES, with what needs them only with them. */
export function checkLeaseLanes({ leaseLanes: lanes, leaseOverflow: overflow, leasePin: pin }: LeaseArgs): void {
  if (overflow === true && lanes === undefined) throw new InvalidArgumentError('--lease-overflow needs --lease-lanes');
  if (pin !== undefined && lanes === undefined) throw new InvalidArgumentError('--lease-pin needs --lease-lanes');
  if (lanes !== undefined && !(Number.isSafeInteger(lanes) && (lanes as number) >= 1 && (lanes as number) <= MAX_LANES))
    throw new InvalidArgumentError(
      `--lease-lanes: expected an integer from 1 to ${MAX_LANES}, got ${shownOption(lanes)}`,
    );
  // each pin's lane within the lanes
  for (const [field, kind] of [
    ['accounts', 'account'],
    ['peers', 'peer'],
  ] as const)
    for (const [id, lane] of Object.entries(pin?.[field] ?? {}))
      if (lane >= (lanes as number))
        throw new InvalidArgumentError(
          `--lease-pin ${kind}:${id}=${lane}: a lane from 0 to ${(lanes as number) - 1} (of ${lanes})`,
        );
  if (pin !== undefined) lanePlan(lanes as number, pin);
}

/** With lanes: a valid number of them, and a configuration whose global level can be leased (clear errors). */
export function checkLeasable(args: LeaseArgs, config: CallGateConfig): void {
  checkLeaseLanes(args);
  if (args.leaseLanes !== undefined) leasedLevel(config);
  // an account pin that names no configured account is a typo: it would place nothing
  for (const id of Object.keys(args.leasePin?.accounts ?? {}))
    if (!config.inbound.accounts.has(id))
      throw new InvalidArgumentError(
        `--lease-pin account:${id}: the configuration has no account ${JSON.stringify(id)}`,
      );
}

/**
 * RedisStore options for the leased deployment `args` names: its lanes, with an overflow lane or
 * not, its pins (hash tags on a single Redis too, as `serve` makes them); none when not leased.
 */
export function leasedStoreOptions({ leaseLanes: lanes, leaseOverflow: overflow, leasePin: pin }: LeaseArgs): {
  lease?: { lanes: number; overflow: boolean; pin?: LanePins };
  hashTags?: true;
} {
  return lanes === undefined
    ? {}
    : { lease: { lanes, overflow: overflow === true, ...(pin !== undefined && { pin }) }, hashTags: true };
}

/** --leased-carriers as ids, each a configured carrier with a whole CPS (a clear error otherwise). */
export function leasedCarrierIds(list: string | undefined, config: CallGateConfig): string[] | undefined {
  if (list === undefined) return undefined;
  const ids = list.split(',').map((id) => id.trim());
  if (ids.some((id) => id === ''))
    throw new InvalidArgumentError(`--leased-carriers: an empty carrier id in ${JSON.stringify(list)}`);
  for (const id of ids) leasedCarrier(config, id);
  return ids;
}
