/**
 * The edge's UDP transport for the `sip` stack, in place of the stack's own: the same sends (our
 * Via's sent-by and rport set on each request), with a guard in front of the stack's parser and
 * around its serializer.
 *
 * - In: a datagram over MAX_DATAGRAM bytes is dropped (a SIP request over UDP past about 1,300
 *   bytes must go over TCP, RFC 3261 18.1.1), leading CRLFs are skipped (7.5) and one that then
 *   starts with other whitespace is dropped. The stack's parser is quadratic in both: ten 64 KB
 *   datagrams of whitespace held the edge for 8 s.
 * - A message the edge cannot relay safely or whole (problemOf: a header name that is no token,
 *   a body shorter than its Content-Length, a bad Call-ID or CSeq, ...) is answered 400 if it is
 *   a request other than ACK, and otherwise dropped. Among them: an unparsable Route,
 *   Record-Route or Path URI made the stack throw when it wrote the message, in a timer, and
 *   the process died with the call's channels held.
 * - Out: a message that cannot be written is reported, never thrown from a timer.
 */
import { createSocket } from 'node:dgram';
import sip from 'sip';

/** Largest datagram read (bytes). */
export const MAX_DATAGRAM = 16_384;
const CRLF = 0x0d0a;

/** A header name as RFC 3261 25.1 spells a token (lower-cased by the stack). */
const TOKEN = /^[-!%*_+`'~.a-z0-9]+$/;

/** Why the stack cannot carry `m` whole, or undefined. */
export function problemOf(m: sip.Message): string | undefined {
  const h = m.headers;
  // the stack looks names up in a plain object: `Constructor:` came out as `function Object()…`
  for (const name of Object.keys(h)) if (!TOKEN.test(name)) return 'Bad header name';
  const length = h['content-length'] as unknown;
  if (length !== undefined) {
    // a body shorter than said (RFC 3261 18.3); the stack cut a longer one to the length
    if (!(Number.isSafeInteger(length) && (length as number) >= 0)) return 'Bad Content-Length';
    if ((length as number) > Buffer.byteLength(m.content ?? '', 'binary')) return 'Body shorter than Content-Length';
  }
  if (!Array.isArray(h.via) || h.via.length === 0 || !h['call-id'] || !h.to || !h.from || !h.cseq)
    return 'Missing Via, Call-ID, From, To or CSeq';
  if (typeof h['call-id'] !== 'string' || h['call-id'].includes(',')) return 'Bad Call-ID';
  const { seq, method } = h.cseq;
  if (!(Number.isSafeInteger(seq) && seq >= 0 && seq < 2 ** 31)) return 'Bad CSeq';
  if ('method' in m && m.method !== undefined && method !== m.method) return 'CSeq method differs';
  // 1*DIGIT (RFC 3261 20.22); a request with none is relayed with 70 (hopsLeft)
  const hops = h['max-forwards'] as unknown;
  if (hops !== undefined && !(typeof hops === 'string' && /^\d{1,9}$/.test(hops.trim()))) return 'Bad Max-Forwards';
  for (const name of ['route', 'record-route', 'path'] as const) {
    const list = h[name] as unknown;
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.some((r) => typeof (r as sip.NameAddr | undefined)?.uri !== 'object'))
      return `Bad ${name === 'route' ? 'Route' : name === 'path' ? 'Path' : 'Record-Route'}`;
  }
  return undefined;
}

/** The message in a datagram, or undefined (dropped). */
function parseDatagram(buf: Buffer): sip.Message | undefined {
  if (buf.length > MAX_DATAGRAM) return undefined;
  let at = 0;
  while (at + 1 < buf.length && buf.readUInt16BE(at) === CRLF) at += 2;
  if (at >= buf.length || buf[at] === 0x20 || buf[at] === 0x09 || buf[at] === 0x0d || buf[at] === 0x0a)
    return undefined;
  try {
    const m = sip.parse(at === 0 ? buf : buf.subarray(at));
    // the stack took a length of 0 for none, and the bytes after the headers for the body (18.3: dropped)
    if (m !== undefined && m.headers['content-length'] === 0) m.content = '';
    return m;
  } catch {
    return undefined;
  }
}

export interface UdpTransport extends sip.Transport {
  /** Bound (rejects when the address is taken). */
  readonly ready: Promise<void>;
}

export function udpTransport(
  options: { readonly address: string; readonly port: number; readonly publicAddress: string },
  onMessage: (m: sip.Message, remote: sip.Remote) => void,
  onProblem: (err: Error) => void,
): UdpTransport {
  const socket = createSocket('udp4');
  const local = { address: options.address, port: options.port };
  const open = (remote: sip.Address): sip.Connection => ({
    protocol: 'UDP',
    release: () => undefined,
    send(m: sip.Message) {
      if ('method' in m && m.method !== undefined) {
        const via = m.headers.via[0]!;
        via.host = options.publicAddress;
        via.port = options.port;
        via.protocol = 'UDP';
        via.params.rport = null;
      }
      let text: string;
      try {
        text = sip.stringify(m);
      } catch (err) {
        onProblem(new Error(`a message to ${remote.address}:${remote.port} could not be written: ${String(err)}`));
        return;
      }
      socket.send(Buffer.from(text, 'binary'), remote.port, remote.address);
    },
  });
  socket.on('message', (buf, rinfo) => {
    const m = parseDatagram(buf);
    if (m === undefined || !('headers' in m) || !Array.isArray(m.headers.via) || m.headers.via.length === 0) return;
    const remote: sip.Remote = { protocol: 'UDP', address: rinfo.address, port: rinfo.port, local };
    const isRequest = 'method' in m && m.method !== undefined;
    if (isRequest) {
      const via = m.headers.via[0]!;
      via.params.received = rinfo.address;
      if (Object.hasOwn(via.params, 'rport')) via.params.rport = String(rinfo.port);
    }
    const problem = problemOf(m);
    if (problem === undefined) onMessage(m, remote);
    else if (
      isRequest &&
      m.method !== 'ACK' &&
      m.headers.cseq &&
      m.headers['call-id'] &&
      m.headers.from &&
      m.headers.to
    )
      open(remote).send(sip.makeResponse(m, 400, problem));
  });
  // a bind failure is start()'s error alone; once bound, the socket's errors are problems
  const ready = new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(options.port, options.address, () => {
      socket.off('error', reject);
      socket.on('error', onProblem);
      resolve();
    });
  });
  ready.catch(() => undefined);
  return { ready, open, get: open, destroy: () => socket.close() };
}
