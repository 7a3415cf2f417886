/**
 * The reference SIP edge (examples/sip-edge), message by message: a caller and carriers made of
 * plain UDP sockets on loopback send and answer exactly what each test says, against an edge in
 * this process on the memory store. Retransmissions and merged requests, refusals (403, 503 with
 * Retry-After, 503 for all routes congested), CANCEL of a held and of a forwarded call, the
 * carrier's failure answer, BYE from either side, channels released, and configuration errors.
 */
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import sip from 'sip';
import { parseEdgeConfig, type EdgeConfigInput } from '../examples/sip-edge/config.js';
import { SipEdge } from '../examples/sip-edge/edge.js';
import { ConfigError } from '../src/errors/index.js';
import { freeUdpPort } from './helpers/sipp.js';
import { inspectGate } from '../src/observe/inspect.js';

const HOST = '127.0.0.1';

/** A UDP endpoint that records every SIP message it gets and sends raw text. */
class Endpoint {
  readonly got: sip.Message[] = [];
  private waiters: (() => void)[] = [];
  private constructor(
    readonly socket: Socket,
    readonly port: number,
  ) {
    socket.on('message', (buf) => {
      const m = sip.parse(buf);
      if (m) this.got.push(m);
      this.waiters.splice(0).forEach((w) => {
        w();
      });
    });
  }
  static async open(): Promise<Endpoint> {
    const socket = createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, HOST, () => r()));
    return new Endpoint(socket, socket.address().port);
  }
  send(text: string, port: number): void {
    this.socket.send(Buffer.from(text.replace(/\n/g, '\r\n')), port, HOST);
  }
  /** The next message (from `from` on in `got`) matching, within `ms`. */
  async next(match: (m: sip.Message) => boolean, ms = 3_000): Promise<sip.Message> {
    const until = Date.now() + ms;
    for (;;) {
      const m = this.got.find(match);
      if (m) {
        this.got.splice(this.got.indexOf(m), 1);
        return m;
      }
      if (Date.now() > until)
        throw new Error(`no matching message within ${ms} ms; got: ${this.got.map(first).join(' | ')}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }
  /** Nothing matching arrives within `ms`. */
  async none(match: (m: sip.Message) => boolean, ms: number): Promise<void> {
    await new Promise((r) => setTimeout(r, ms));
    expect(this.got.filter(match).map(first)).to.deep.equal([]);
  }
  close(): void {
    this.socket.close();
  }
}

const first = (m: sip.Message) =>
  'method' in m && m.method
    ? `${m.method} ${m.headers['call-id']}`
    : `${(m as sip.Response).status} ${m.headers.cseq.method} ${m.headers['call-id']}`;
const isStatus =
  (callId: string, status: number, method = 'INVITE') =>
  (m: sip.Message) =>
    (m as sip.Response).status === status && m.headers['call-id'] === callId && m.headers.cseq.method === method;
const isRequest = (callId: string, method: string) => (m: sip.Message) =>
  (m as sip.Request).method === method && m.headers['call-id'] === callId;

function invite(o: {
  callId: string;
  from: Endpoint;
  user?: string;
  branch?: string;
  edge: number;
  extra?: string;
  to?: string;
}): string {
  return `INVITE sip:${o.to ?? '1000'}@${HOST}:${o.edge} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${o.from.port};branch=${o.branch ?? `z9hG4bK-${o.callId}`}
From: <sip:${o.user ?? 'caller'}@${HOST}:${o.from.port}>;tag=t-${o.callId}
To: <sip:${o.to ?? '1000'}@${HOST}:${o.edge}>
Call-ID: ${o.callId}
CSeq: 1 INVITE
Contact: <sip:caller@${HOST}:${o.from.port}>
Max-Forwards: 70
${o.extra ?? ''}Content-Length: 0

`.replace(/\n\n\n$/, '\n\n');
}

/** A response to a request the endpoint received, as its UA would write it. */
function answer(rq: sip.Request, status: number, reason: string, toTag?: string, contactPort?: number): string {
  const rs = sip.makeResponse(rq, status, reason);
  if (toTag) rs.headers.to = { ...rs.headers.to, params: { ...rs.headers.to.params, tag: toTag } };
  if (contactPort) rs.headers.contact = [{ uri: `sip:${HOST}:${contactPort}`, params: {} }];
  if (rq.headers['record-route']) rs.headers['record-route'] = rq.headers['record-route'];
  return sip.stringify(rs).replace(/\r\n/g, '\n');
}

function inDialog(
  method: string,
  o: { callId: string; from: Endpoint; fromTag: string; toTag: string; cseq: number; edge: number; branch?: string },
): string {
  return `${method} sip:1000@${HOST}:${o.edge} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${o.from.port};branch=${o.branch ?? `z9hG4bK-${method}-${o.callId}-${randomBytes(3).toString('hex')}`}
From: <sip:x@${HOST}:${o.from.port}>;tag=${o.fromTag}
To: <sip:y@${HOST}:${o.edge}>;tag=${o.toTag}
Call-ID: ${o.callId}
CSeq: ${o.cseq} ${method}
Max-Forwards: 70
Content-Length: 0

`;
}

describe('SIP edge, message by message (examples/sip-edge)', function () {
  this.timeout(20_000);
  let caller: Endpoint;
  let other: Endpoint;
  let carrierA: Endpoint;
  let carrierB: Endpoint;
  let edge: SipEdge;
  let port: number;

  async function start(limits: EdgeConfigInput['limits'], route = ['A', 'B'], timerCMs?: number) {
    port = await freeUdpPort();
    const config = await parseEdgeConfig({
      listen: `${HOST}:${port}`,
      limits,
      peers: { p1: { sources: [`${HOST}:${caller.port}`], account: 'acme' }, p2: {} },
      route,
      carriers: { A: { address: `${HOST}:${carrierA.port}` }, B: { address: `${HOST}:${carrierB.port}` } },
      retryAfterJitter: 2,
    });
    edge = await SipEdge.start({ config, random: () => 0.99, ...(timerCMs !== undefined && { timerCMs }) });
  }

  beforeEach(async () => {
    [caller, other, carrierA, carrierB] = await Promise.all([
      Endpoint.open(),
      Endpoint.open(),
      Endpoint.open(),
      Endpoint.open(),
    ]);
  });
  afterEach(async () => {
    await edge?.stop();
    for (const e of [caller, other, carrierA, carrierB]) e.close();
  });

  it('answers, relays and releases a call; refuses with 503 + Retry-After, 403 for an unknown peer; one decision per call', async () => {
    await start({
      inbound: {
        accounts: { acme: [{ channels: 5 }] },
        peers: { p1: [{ limit: 1, window: 'PT1S' }, { channels: 1 }], p2: [{ limit: 5, window: 'PT1S' }] },
      },
      outbound: { carriers: { A: { cps: 10, maxWait: 'PT1S', channels: 2 }, B: { cps: 10 } } },
    });
    // call 1: admitted, 100 Trying, forwarded to A with our Record-Route, answered, ACK and BYE relayed
    caller.send(invite({ callId: 'c1', from: caller, edge: port }), port);
    await caller.next(isStatus('c1', 100));
    const inv = (await carrierA.next(isRequest('c1', 'INVITE'))) as sip.Request;
    expect(sip.stringifyUri(inv.uri)).to.equal(`sip:1000@${HOST}:${carrierA.port}`);
    expect(inv.headers['max-forwards']).to.equal('69');
    expect(sip.stringifyUri(inv.headers['record-route']![0]!.uri)).to.equal(`sip:${HOST}:${port};lr`);
    expect(inv.headers.via).to.have.length(2);
    carrierA.send(answer(inv, 180, 'Ringing', 'callee1', carrierA.port), port);
    await caller.next(isStatus('c1', 180));
    carrierA.send(answer(inv, 200, 'OK', 'callee1', carrierA.port), port);
    const ok = (await caller.next(isStatus('c1', 200))) as sip.Response;
    expect(ok.headers.via).to.have.length(1);
    caller.send(
      inDialog('ACK', { callId: 'c1', from: caller, fromTag: 't-c1', toTag: 'callee1', cseq: 1, edge: port }),
      port,
    );
    await carrierA.next(isRequest('c1', 'ACK'));

    // call 2 within the second: 503, Retry-After = ceil(wait) + jitter, Warning names the limit
    caller.send(invite({ callId: 'c2', from: caller, edge: port }), port);
    const r2 = (await caller.next(isStatus('c2', 503))) as sip.Response;
    expect(Number(r2.headers['retry-after'])).to.be.within(1, 3);
    expect(r2.headers.warning).to.match(/^399 127\.0\.0\.1 "callgate: peer:p1 rate"$/);
    // its retransmission (same branch): the same answer from the transaction, no second decision
    const decided = edge.summary().decisions;
    caller.send(invite({ callId: 'c2', from: caller, edge: port }), port);
    await caller.next(isStatus('c2', 503));
    expect(edge.summary()).to.include({ decisions: decided, retransmissions: 1 });
    // the same Call-ID on a new transaction: a merged request, no decision either
    caller.send(invite({ callId: 'c2', from: caller, edge: port, branch: 'z9hG4bK-again' }), port);
    await caller.next(isStatus('c2', 482));
    expect(edge.summary()).to.include({ decisions: decided, merged: 1 });
    // the caller's new attempt after its 503 (the same Call-ID, CSeq 2): a decision of its own
    // (it was 482 for 32 s), refused again while c1 holds p1's channel
    caller.send(
      invite({ callId: 'c2', from: caller, edge: port, branch: 'z9hG4bK-retry' }).replace('CSeq: 1', 'CSeq: 2'),
      port,
    );
    await caller.next(isStatus('c2', 503));
    expect(edge.summary()).to.include({ decisions: decided + 1, merged: 1 });

    // unknown source and user: 403; a source not in the table named by its From user (p2): admitted
    other.send(invite({ callId: 'u1', from: other, user: 'nobody', edge: port }), port);
    expect(((await other.next(isStatus('u1', 403))) as sip.Response).headers['retry-after']).to.equal(undefined);
    other.send(invite({ callId: 'f1', from: other, user: 'p2', edge: port }), port);
    await other.next(isStatus('f1', 100));
    const invF = (await carrierA.next(isRequest('f1', 'INVITE'))) as sip.Request;
    // the carrier refuses it: 486 relayed, the call ends and its channels go back
    carrierA.send(answer(invF, 486, 'Busy Here', 'calleeF'), port);
    await other.next(isStatus('f1', 486));
    await carrierA.next(isRequest('f1', 'ACK')); // the edge's transaction acknowledges the carrier's 486

    // BYE from the carrier side reaches the caller (its Contact); the answer goes back
    carrierA.send(
      inDialog('BYE', { callId: 'c1', from: carrierA, fromTag: 'callee1', toTag: 't-c1', cseq: 7, edge: port }),
      port,
    );
    const bye = (await caller.next(isRequest('c1', 'BYE'))) as sip.Request;
    caller.send(answer(bye, 200, 'OK'), port);
    await carrierA.next(isStatus('c1', 200, 'BYE'));

    // p1 holds no channel any more: a new call is admitted once the rate allows
    await new Promise((r) => setTimeout(r, 1_050));
    caller.send(invite({ callId: 'c3', from: caller, edge: port }), port);
    await caller.next(isStatus('c3', 100));
    await carrierA.next(isRequest('c3', 'INVITE'));
    const s = edge.summary();
    expect(s).to.include({
      invites: 6,
      decisions: 6,
      admitted: 3,
      answered: 1,
      carrierFailures: 1,
      byes: 1,
      released: 2,
    });
    expect(s.refused).to.deep.equal({ 'peer:p1 rate': 2, 'unknown-peer': 1 });
    expect(await edge.holds()).to.deep.equal({ 'account:acme': 1, 'peer:p1': 1, 'carrier:A': 1 }); // c3 in progress
  });

  it('attribute levels: the From user is the caller, the To user the callee, the address the source; a ban is a 403', async () => {
    await start({
      inbound: {
        peers: { p1: [{ limit: 50, window: 'PT1S' }], p2: [{ limit: 50, window: 'PT1S' }] },
        attributes: [
          {
            name: 'dest',
            key: 'callee',
            match: { prefixes: ['10', '1000'] },
            limits: [{ limit: 2, window: '1s' }],
            order: 'first',
          },
          { name: 'src', key: 'source', limits: [{ limit: 3, window: '1s' }] },
          {
            name: 'caller',
            key: 'caller',
            limits: [{ limit: 1, window: '1s' }],
            ban: { over: 1, within: '1s', for: '1m' },
          },
        ],
      },
      outbound: { carriers: { A: { cps: 100 }, B: { cps: 100 } } },
    });
    const call = async (callId: string, user: string, status: number, to?: string) => {
      caller.send(invite({ callId, from: caller, user, edge: port, ...(to && { to }) }), port);
      return (await caller.next(isStatus(callId, status))) as sip.Response;
    };
    await call('a1', 'alice', 100);
    // alice again: the caller level refuses; its one strike reaches 1 x 1: alice is banned
    expect((await call('a2', 'alice', 503)).headers.warning).to.match(/"callgate: caller:alice rate"$/);
    const r3 = await call('a3', 'alice', 403);
    expect(r3.headers['retry-after']).to.equal(undefined);
    expect(r3.headers.warning).to.match(/"callgate: caller:alice banned"$/);
    await call('b1', 'bob', 100);
    // the To user 1000 (longest prefix "1000") had 2 calls: the callee level, first in order, refuses
    expect((await call('c1', 'carol', 503)).headers.warning).to.match(/"callgate: dest:1000 rate"$/);
    // a To user matching no prefix skips it; the source address had 2 calls of 3
    await call('d1', 'dave', 100, '2000');
    expect((await call('e1', 'erin', 503, '2000')).headers.warning).to.match(/"callgate: src:127\.0\.0\.1 rate"$/);
    const state = await inspectGate(edge.gate, { bans: true });
    expect(state.bans!.map((b) => `${b.level}:${b.value}`)).to.deep.equal(['caller:alice']);
    expect(edge.summary().refused).to.deep.equal({
      'caller rate': 1,
      'caller banned': 1,
      'dest rate': 1,
      'src rate': 1,
    });
  });

  it('CANCEL: a held call ends 487 and never reaches a carrier; a forwarded one is cancelled at the carrier after its 180', async () => {
    await start(
      {
        inbound: { peers: { p1: [{ limit: 10, window: 'PT1S' }, { channels: 5 }], p2: [] } },
        outbound: { carriers: { A: { cps: 1, maxWait: 'PT2S' }, B: { cps: 1 } } },
      },
      ['A'],
    );
    caller.send(invite({ callId: 'a', from: caller, edge: port }), port);
    const invA = (await carrierA.next(isRequest('a', 'INVITE'))) as sip.Request;
    caller.send(invite({ callId: 'b', from: caller, edge: port }), port); // held ~1 s for its slot
    await caller.next(isStatus('b', 100));
    caller.send(
      `CANCEL sip:1000@${HOST}:${port} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${caller.port};branch=z9hG4bK-b
From: <sip:caller@${HOST}:${caller.port}>;tag=t-b
To: <sip:1000@${HOST}:${port}>
Call-ID: b
CSeq: 1 CANCEL
Max-Forwards: 70
Content-Length: 0

`,
      port,
    );
    await caller.next(isStatus('b', 200, 'CANCEL'));
    await caller.next(isStatus('b', 487));
    // the forwarded call: CANCEL waits for the carrier's provisional answer, then goes with its branch
    carrierA.send(answer(invA, 180, 'Ringing', 'ca'), port);
    await caller.next(isStatus('a', 180));
    caller.send(
      `CANCEL sip:1000@${HOST}:${port} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${caller.port};branch=z9hG4bK-a
From: <sip:caller@${HOST}:${caller.port}>;tag=t-a
To: <sip:1000@${HOST}:${port}>
Call-ID: a
CSeq: 1 CANCEL
Max-Forwards: 70
Content-Length: 0

`,
      port,
    );
    await caller.next(isStatus('a', 200, 'CANCEL'));
    const cancel = (await carrierA.next(isRequest('a', 'CANCEL'))) as sip.Request;
    expect(cancel.headers.via[0]!.params.branch).to.equal(invA.headers.via[0]!.params.branch);
    carrierA.send(answer(cancel, 200, 'OK'), port);
    carrierA.send(answer(invA, 487, 'Request Terminated', 'ca'), port);
    await caller.next(isStatus('a', 487));
    await carrierA.none(isRequest('b', 'INVITE'), 1_200); // b's slot passed: never sent
    expect(edge.summary()).to.include({ admitted: 2, cancelled: 1, carrierFailures: 1, released: 2 });
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 0 });
  });

  it('all routes congested: 503 without Retry-After; OPTIONS answered, other methods 405, a BYE for no call 481', async () => {
    await start({
      inbound: { peers: { p1: [{ limit: 10, window: 'PT1S' }], p2: [] } },
      outbound: { carriers: { A: { cps: 1 }, B: { cps: 1 } } },
    });
    caller.send(invite({ callId: 'x1', from: caller, edge: port }), port);
    await carrierA.next(isRequest('x1', 'INVITE'));
    caller.send(invite({ callId: 'x2', from: caller, edge: port }), port);
    await carrierB.next(isRequest('x2', 'INVITE')); // A's next slot is 1 s away (maxWait 0): rerouted to B
    caller.send(invite({ callId: 'x3', from: caller, edge: port }), port);
    const r3 = (await caller.next(isStatus('x3', 503))) as sip.Response;
    expect(r3.headers['retry-after']).to.equal(undefined);
    expect(r3.headers.warning).to.match(/all-routes-congested/);
    caller.send(
      `OPTIONS sip:${HOST}:${port} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${caller.port};branch=z9hG4bK-o1
From: <sip:caller@${HOST}:${caller.port}>;tag=o
To: <sip:${HOST}:${port}>
Call-ID: o1
CSeq: 1 OPTIONS
Content-Length: 0

`,
      port,
    );
    await caller.next(isStatus('o1', 200, 'OPTIONS'));
    caller.send(
      `MESSAGE sip:${HOST}:${port} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${caller.port};branch=z9hG4bK-m1
From: <sip:caller@${HOST}:${caller.port}>;tag=m
To: <sip:${HOST}:${port}>
Call-ID: m1
CSeq: 1 MESSAGE
Content-Length: 0

`,
      port,
    );
    await caller.next(isStatus('m1', 405, 'MESSAGE'));
    caller.send(inDialog('BYE', { callId: 'nope', from: caller, fromTag: 'a', toTag: 'b', cseq: 2, edge: port }), port);
    await caller.next(isStatus('nope', 481, 'BYE'));
    expect(edge.summary()).to.include({ rerouted: 1, congested: 1, released: 1 });
  });

  it('bad input: 400 for what it cannot relay, a BYE outside the dialog 481, no crash, no stall, no leak', async () => {
    await start({
      inbound: { peers: { p1: [{ limit: 50, window: 'PT1S' }, { channels: 1 }], p2: [] } },
      outbound: { carriers: { A: { cps: 50, maxWait: 'PT1S' }, B: { cps: 50 } } },
    });
    const options = async (callId: string) => {
      const at = performance.now();
      caller.send(
        `OPTIONS sip:${HOST}:${port} SIP/2.0
Via: SIP/2.0/UDP ${HOST}:${caller.port};branch=z9hG4bK-${callId}
From: <sip:caller@${HOST}:${caller.port}>;tag=o
To: <sip:${HOST}:${port}>
Call-ID: ${callId}
CSeq: 1 OPTIONS
Content-Length: 0

`,
        port,
      );
      const ok = (await caller.next(isStatus(callId, 200, 'OPTIONS'))) as sip.Response;
      // the edge's own answers carry a To tag (RFC 3261 8.2.6.2)
      expect(ok.headers.to.params.tag).to.match(/^[0-9a-f]{16}$/);
      return performance.now() - at;
    };
    // a Route, Record-Route or Path URI the stack cannot parse (or write: it threw in a timer,
    // and the process died with the call's channels held): 400, no decision
    for (const [callId, extra] of [
      ['r1', 'Route: <foo>\n'],
      ['r2', `Record-Route: <sip:${HOST}:${port};lr>, <foo>\n`],
      ['r3', 'Path: <sip:[2001:db8::1];lr>\n'],
      ['r4', 'CSeq: 2 BYE\n'], // a second CSeq: joined, and not the method's
      ['r5', 'Constructor: x\n'], // relayed as `function Object() { [native code] }: x`
      ['r6', 'Call-ID: other\n'], // two Call-IDs, joined into one
    ] as const) {
      caller.send(invite({ callId, from: caller, edge: port, extra }), port);
      await caller.next((m) => (m as sip.Response).status === 400 && m.headers['call-id'].startsWith(callId));
    }
    // a Max-Forwards that is no number (RFC 3261 20.22): 400, not 483 Too Many Hops
    caller.send(
      invite({ callId: 'mf', from: caller, edge: port }).replace('Max-Forwards: 70', 'Max-Forwards: many'),
      port,
    );
    expect(((await caller.next(isStatus('mf', 400))) as sip.Response).reason).to.equal('Bad Max-Forwards');
    // a body shorter than its Content-Length (RFC 3261 18.3): 400; bytes past a length of 0:
    // dropped (they went on to the carrier as a body of 15 bytes)
    caller.send(
      invite({ callId: 'cl1', from: caller, edge: port }).replace('Content-Length: 0', 'Content-Length: 500'),
      port,
    );
    await caller.next((m) => (m as sip.Response).status === 400 && m.headers['call-id'] === 'cl1');
    caller.send(`${invite({ callId: 'cl0', from: caller, edge: port })}v=0 trailing`, port);
    const cl0 = (await carrierA.next(isRequest('cl0', 'INVITE'))) as sip.Request;
    expect(cl0.content ?? '').to.equal('');
    carrierA.send(answer(cl0, 486, 'Busy Here', 'callee-cl0'), port); // the call ends, its channel free
    await caller.next(isStatus('cl0', 486));
    // a Call-ID callgate refuses (over 256 characters): 400, not 500
    const long = 'x'.repeat(300);
    caller.send(invite({ callId: long, from: caller, edge: port }), port);
    await caller.next(isStatus(long, 400));
    // a P-Asserted-Identity with no address, from an unknown source: the From user decides (403), not a 500
    other.send(
      invite({ callId: 'pai', from: other, user: 'nobody', edge: port, extra: 'P-Asserted-Identity: ;x\n' }),
      port,
    );
    const forbidden = (await other.next(isStatus('pai', 403))) as sip.Response;
    expect(forbidden.headers.to.params.tag).to.match(/^[0-9a-f]{16}$/);
    // whitespace datagrams: the stack's parser is quadratic in them (ten of 64 KB held the edge 8 s)
    for (let k = 0; k < 10; k++) caller.send('\r\n '.repeat(5_400), port);
    caller.send(' '.repeat(60_000), port);
    expect(await options('o1'), 'ms for an OPTIONS behind them').to.be.below(1_000);

    // a call's answer from anywhere but its carrier (a forged 486): dropped, the call goes on;
    // a CANCEL with another branch than its INVITE's (RFC 3261 9.2): 481, nothing cancelled
    other.send(invite({ callId: 'fg', from: other, user: 'p2', edge: port }), port);
    const fg = (await carrierA.next(isRequest('fg', 'INVITE'))) as sip.Request;
    other.send(answer(fg, 486, 'Busy Here', 'forged'), port);
    other.send(
      invite({ callId: 'fg', from: other, user: 'p2', edge: port, branch: 'z9hG4bK-not-its' })
        .replace(/^INVITE /, 'CANCEL ')
        .replace('CSeq: 1 INVITE', 'CSeq: 1 CANCEL'),
      port,
    );
    await other.next(isStatus('fg', 481, 'CANCEL'));
    await other.none(isStatus('fg', 486), 300);
    await carrierA.none(isRequest('fg', 'CANCEL'), 0);
    carrierA.send(answer(fg, 486, 'Busy Here', 'callee-fg'), port); // its carrier's answer ends it
    await other.next(isStatus('fg', 486));

    // a call up; a BYE with its Call-ID and From tag but another To tag is not its dialog: 481,
    // never relayed, and the call keeps its channel (it was released, and p1 took a second call)
    caller.send(invite({ callId: 'd1', from: caller, edge: port }), port);
    const inv = (await carrierA.next(isRequest('d1', 'INVITE'))) as sip.Request;
    carrierA.send(answer(inv, 200, 'OK', 'callee-d1', carrierA.port), port);
    await caller.next(isStatus('d1', 200));
    caller.send(
      inDialog('BYE', { callId: 'd1', from: caller, fromTag: 't-d1', toTag: 'bogus', cseq: 2, edge: port }),
      port,
    );
    await caller.next(isStatus('d1', 481, 'BYE'));
    // Max-Forwards 0 inside the dialog: 483, not relayed with -1
    caller.send(
      inDialog('INFO', {
        callId: 'd1',
        from: caller,
        fromTag: 't-d1',
        toTag: 'callee-d1',
        cseq: 3,
        edge: port,
      }).replace('Max-Forwards: 70', 'Max-Forwards: 0'),
      port,
    );
    await caller.next(isStatus('d1', 483, 'INFO'));
    await carrierA.none((m) => (m as sip.Request).method === 'BYE' || (m as sip.Request).method === 'INFO', 200);
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 1 });
    caller.send(invite({ callId: 'd2', from: caller, edge: port }), port);
    expect(((await caller.next(isStatus('d2', 503))) as sip.Response).headers.warning).to.match(/peer:p1 channels/);
    // the right BYE ends it
    caller.send(
      inDialog('BYE', { callId: 'd1', from: caller, fromTag: 't-d1', toTag: 'callee-d1', cseq: 4, edge: port }),
      port,
    );
    await carrierA.next(isRequest('d1', 'BYE'));
    expect(await options('o2')).to.be.below(1_000);
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 0 });
    expect(edge.summary()).to.include({ errors: 0, byes: 1, released: 3, carrierFailures: 2 });
  });

  it('Timer C: a carrier that rings and never answers is cancelled, the caller gets 408, the channels come back', async () => {
    await start(
      {
        inbound: { peers: { p1: [{ limit: 50, window: 'PT1S' }, { channels: 1 }], p2: [] } },
        outbound: { carriers: { A: { cps: 50, maxWait: 'PT1S' }, B: { cps: 50 } } },
      },
      ['A'],
      400,
    );
    caller.send(invite({ callId: 'ring', from: caller, edge: port }), port);
    const inv = (await carrierA.next(isRequest('ring', 'INVITE'))) as sip.Request;
    // a 180 now and again restarts it: the call is still ringing after 2 x 400 ms
    for (let k = 0; k < 3; k++) {
      carrierA.send(answer(inv, 180, 'Ringing', 'callee-ring'), port);
      await caller.next(isStatus('ring', 180));
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 1 });
    // then nothing: 400 ms on, CANCEL to the carrier, 408 to the caller (it rang for ever)
    const cancel = (await carrierA.next(isRequest('ring', 'CANCEL'))) as sip.Request;
    expect(cancel.headers.via[0]!.params.branch).to.equal(inv.headers.via[0]!.params.branch);
    await caller.next(isStatus('ring', 408));
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 0 });
    expect(edge.summary()).to.include({ released: 1, errors: 0 });
  });

  it("a defaultPeer's refusals are counted under peer:*, not one count per From user", async () => {
    await start({
      inbound: { peers: { p1: [{ limit: 1, window: 'PT1S' }] }, defaultPeer: [{ limit: 1, window: 'PT10S' }] },
      outbound: { carriers: { A: { cps: 100, maxWait: 'PT1S' }, B: { cps: 100 } } },
    });
    for (const user of ['u1', 'u2', 'u1', 'u2']) {
      const callId = `${user}-${randomBytes(3).toString('hex')}`;
      other.send(invite({ callId, from: other, user, edge: port }), port);
      await other.next((m) => m.headers['call-id'] === callId && (m as sip.Response).status >= 100);
    }
    caller.send(invite({ callId: 'k1', from: caller, edge: port }), port);
    caller.send(invite({ callId: 'k2', from: caller, edge: port }), port);
    await caller.next(isStatus('k2', 503));
    await other.none((m) => (m as sip.Response).status === 500, 100);
    expect(edge.summary().refused).to.deep.equal({ 'peer:* rate': 2, 'peer:p1 rate': 1 });
  });

  it('a call silent for maxCallDuration ends and frees its channels; one whose dialog goes on is refreshed', async () => {
    await start({
      maxCallDuration: 'PT2S',
      inbound: { peers: { p1: [{ limit: 50, window: 'PT1S' }, { channels: 2 }], p2: [] } },
      outbound: { carriers: { A: { cps: 50, maxWait: 'PT1S' }, B: { cps: 50 } } },
    });
    for (const callId of ['quiet', 'talking']) {
      caller.send(invite({ callId, from: caller, edge: port }), port);
      const inv = (await carrierA.next(isRequest(callId, 'INVITE'))) as sip.Request;
      carrierA.send(answer(inv, 200, 'OK', `callee-${callId}`, carrierA.port), port);
      await caller.next(isStatus(callId, 200));
    }
    // 'talking' shows itself every 400 ms (session timers' re-INVITEs or UPDATEs would); 'quiet'
    // never does, and never ends (its BYE lost). Both were refreshed for ever: p1 stayed full.
    for (let k = 1; k <= 9; k++) {
      await new Promise((r) => setTimeout(r, 400));
      caller.send(
        inDialog('INFO', {
          callId: 'talking',
          from: caller,
          fromTag: 't-talking',
          toTag: 'callee-talking',
          cseq: k + 1,
          edge: port,
        }),
        port,
      );
    }
    expect(await edge.holds()).to.deep.equal({ 'peer:p1': 1 });
    expect(edge.summary()).to.include({ released: 1, inProgress: 1 });
    expect(edge.summary().refreshed).to.be.at.least(1);
  });

  it('configuration: every problem at once, with its path', async () => {
    const bad = {
      listen: '127.0.0.1',
      limits: { inbound: { peers: { p1: [{ limit: 1, window: 'PT1S' }] } }, outbound: { carriers: { A: { cps: 1 } } } },
      peers: { p1: { sources: ['127.0.0.1:5070'] }, p9: { sources: ['127.0.0.1:5070'] } },
      route: ['A', 'Z'],
      carriers: { A: { address: '127.0.0.1:5090' }, C: { address: '127.0.0.1:5091' } },
    };
    let err: unknown;
    try {
      await parseEdgeConfig(bad, { source: 'edge.json' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    // the edge's own fields, the limits and the cross-checks, all in one start
    expect((err as ConfigError).problems).to.deep.equal([
      'edge.json: listen: expected "ip:port" (an IPv4 address and a port 1-65535)',
      'edge.json: carriers.C: no pacing for it in limits.outbound.carriers',
      'edge.json: route[1]: carrier "Z" has no address in carriers',
      'edge.json: peers.p9: no limits for it in limits.inbound.peers and no defaultPeer (every call would be refused 403)',
      'edge.json: peers.p9.sources: 127.0.0.1:5070 is already the source of peer "p1"',
    ]);
    const worse = {
      ...bad,
      timeoutMs: -1,
      limits: { inbound: { peers: { p1: [{ limit: 0, window: 'PT1S' }] } }, outbound: { carriers: { A: { cps: 1 } } } },
    };
    try {
      await parseEdgeConfig(worse, { source: 'edge.json' });
    } catch (e) {
      err = e;
    }
    const problems = (err as ConfigError).problems;
    expect(problems.slice(0, 2)).to.deep.equal([
      'edge.json: listen: expected "ip:port" (an IPv4 address and a port 1-65535)',
      'edge.json: timeoutMs: Too small: expected number to be >0',
    ]);
    expect(problems[2]).to.match(/^edge\.json: limits: inbound\.peers\.p1\[0\]\.limit: /);
    // with the limits invalid, the checks against them wait; the others are made
    expect(problems.slice(3)).to.deep.equal([
      'edge.json: route[1]: carrier "Z" has no address in carriers',
      'edge.json: peers.p9.sources: 127.0.0.1:5070 is already the source of peer "p1"',
    ]);
    try {
      await parseEdgeConfig({ ...bad, listen: '127.0.0.1:5080' }, { source: 'edge.json' });
    } catch (e) {
      err = e;
    }
    expect((err as ConfigError).problems).to.deep.equal([
      'edge.json: carriers.C: no pacing for it in limits.outbound.carriers',
      'edge.json: route[1]: carrier "Z" has no address in carriers',
      'edge.json: peers.p9: no limits for it in limits.inbound.peers and no defaultPeer (every call would be refused 403)',
      'edge.json: peers.p9.sources: 127.0.0.1:5070 is already the source of peer "p1"',
    ]);
  });
});
