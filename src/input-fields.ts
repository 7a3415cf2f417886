/**
 * Refuse the fields a call's input does not have: from JavaScript, a misspelt optional field
 * (`acount`) would otherwise be ignored silently and the call decided without it (the sidecar
 * refuses unknown fields the same way). A for-in over a few keys: cheap enough for every decision.
 */
import { InvalidArgumentError } from './errors/index.js';

export function checkFields(input: object, allowed: ReadonlySet<string>, what: string): void {
  let unknown: string[] | undefined;
  for (const key in input) if (!allowed.has(key)) (unknown ??= []).push(key);
  if (unknown === undefined) return;
  const names = unknown.map((k) => JSON.stringify(k)).join(', ');
  throw new InvalidArgumentError(
    `${what}: unknown field${unknown.length > 1 ? 's' : ''} ${names} (accepted: ${[...allowed].join(', ')})`,
  );
}

/** A value as an error message shows it (JSON where it can be: a bigint or a cycle cannot). */
export function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return typeof value === 'bigint' ? `${value}n` : Object.prototype.toString.call(value);
  }
}
