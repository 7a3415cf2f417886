/**
 * The sidecar's listen address and the rule that guards it: on loopback the API is open to this
 * host's processes only; on any other address it needs a token, or the sidecar refuses to start.
 */
import { isIP } from 'node:net';
import { InvalidArgumentError } from '../errors/index.js';

export const DEFAULT_LISTEN = '127.0.0.1:8790';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

function bad(message: string): never {
  throw new InvalidArgumentError(message);
}

/** `PORT`, `HOST:PORT` or `[IPv6]:PORT`; a bare port listens on 127.0.0.1. */
export function parseListen(text: string): ListenAddress {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]:|([^:[\]]+):)?(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) bad(`--listen: expected PORT, HOST:PORT or [IPv6]:PORT, got ${JSON.stringify(text)}`);
  const host = m[1] ?? m[2] ?? '127.0.0.1';
  if (m[1] !== undefined && isIP(host) !== 6) bad(`--listen: ${JSON.stringify(host)} is not an IPv6 address`);
  return { host, port };
}

/** 127.0.0.0/8, ::1 (and its IPv4-mapped form), localhost. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/** Refuse a non-loopback address without a token, saying what to do. */
export function checkExposure(addr: ListenAddress, token: string | undefined): void {
  if (token !== undefined && token.length < 16) bad('the token must be at least 16 characters long');
  // Node reads a header as latin1 and trims its ends: a token with a control character (a
  // trailing newline from a secret file), a character above U+007E, or spaces at either end can
  // never be sent, and every request would be a 401
  if (token !== undefined && !/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(token))
    bad(
      'the token must be printable ASCII without spaces at either end (a trailing newline from a file?): no client could send it in an Authorization header',
    );
  if (token === undefined && !isLoopback(addr.host)) {
    bad(
      `--listen ${addr.host}:${addr.port} is not a loopback address: anyone who reaches it could admit, reserve and release calls. ` +
        `Set a token (CALLGATE_TOKEN or --token), which clients send as "Authorization: Bearer <token>", or listen on 127.0.0.1.`,
    );
  }
}
