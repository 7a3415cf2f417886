/**
 * A reference SIP edge: a small stateful proxy (UDP) that embeds callgate as a routing process
 * would. Every initial INVITE is mapped to a peer and account, admitted (or refused: 503 with a
 * jittered Retry-After, 403 for an unknown peer), then dispatched over its route of carriers with
 * pacing and reroute, and forwarded to the carrier chosen. ACK, BYE, CANCEL and the responses
 * are relayed; a call's channels are released when it ends (BYE, or a failure final response).
 *
 * SIP stack: the `sip` npm package, for its parser, UDP transport and RFC 3261 transaction layer
 * (retransmissions, timers, ACK of non-2xx answers). Its high-level send() is not used: it
 * resolves the next hop from the request URI and takes any URI whose host is the stack's own
 * address for one of its flow tokens, so a carrier on the edge's own IP (loopback tests, a
 * co-located carrier) would be unreachable. The edge picks every next hop itself instead, and
 * only ever sends to addresses it knows: a carrier's configured address, or the address a
 * caller's INVITE came from (Contact and Route from traffic are not followed, so no message can
 * make the edge send elsewhere).
 *
 * One decision per call: retransmissions of an INVITE are absorbed by its server transaction; a
 * second INVITE with a Call-ID already seen (a new transaction) gets 482 Loop Detected (RFC 3261
 * 8.2.2.2, merged request) and no decision, unless it is the caller's new attempt (a higher
 * CSeq) after a refusal. The call table is keyed by Call-ID; an ended call is
 * kept LINGER_MS to recognise late messages.
 *
 * Channels: an admitted call holds its channels (inbound levels, and its carrier's) from its
 * decision; they are released (gate.release) when it ends: BYE from either side, a failure final
 * response, CANCEL, or a refusal after admission (no route, store trouble). A call in progress
 * is refreshed every half maxCallDuration while its dialog shows life, so a long call with
 * session timers does not lapse; one silent for maxCallDuration (its end never seen) ends then,
 * as its holds lapse. The UDP transport (udp.ts) is the edge's own, guarding the stack's parser.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as hdr from 'hdr-histogram-js';
import sip from 'sip';
import {
  type AdmissionDecision,
  admissionLevels,
  CallGate,
  DispatcherClosedError,
  type DispatchResult,
  InvalidArgumentError,
  inspectGate,
  type Store,
  toSipResponse,
} from 'callgate';
import type { EdgeConfig, HostPort, IdentifyBy } from './config.js';
import { type UdpTransport, udpTransport } from './udp.js';

/** Timer C by default (RFC 3261 16.6: more than 3 minutes). */
const TIMER_C_MS = 180_000;
/** How long an ended call stays in the table (64 × T1: a transaction's whole life). */
const LINGER_MS = 32_000;
/** The process clock in µs, for latencies. */
const nowUs = (): number => Math.round(performance.now() * 1000);
/** The sweep's period at most (ms): a quarter of maxCallDuration when that is shorter. */
const SWEEP_MS = 5_000;
const ALLOW = 'INVITE, ACK, BYE, CANCEL, OPTIONS';

type Phase = 'admitting' | 'dispatching' | 'forwarded' | 'ended';

interface EdgeCall {
  readonly callId: string;
  readonly invite: sip.Request;
  readonly from: HostPort;
  readonly callerTag: string;
  readonly callerContact: string | undefined;
  /** µs on the process clock when the INVITE came in. */
  readonly inAt: number;
  phase: Phase;
  peer?: string;
  account?: string;
  /** The call was admitted (holds channels until released). */
  admitted: boolean;
  /** Refused because the store did not answer in time: it may still have recorded the call. */
  maybeHeld: boolean;
  released: boolean;
  /** A final response went upstream. */
  finalSent: boolean;
  cancelRequested: boolean;
  cancelSent: boolean;
  /** The carrier answered with a provisional response (a CANCEL may go). */
  proceeding: boolean;
  answered: boolean;
  carrier?: string;
  /** The INVITE as sent to the carrier. */
  out?: sip.Request;
  delayMs?: number | null;
  calleeTag?: string;
  calleeContact?: string;
  /** ms (Date.now) after which the sweep drops the call. */
  expiresAt: number;
  /** ms (Date.now) of its decision or last refresh. */
  refreshedAt: number;
  /** ms (Date.now) of the last message of its dialog (its INVITE at first): a sign it goes on. */
  activeAt: number;
  /** Where each request the edge sent for the call went, by its Via branch: its answers come from there. */
  readonly sentTo: Map<string, sip.Address>;
  /** Timer C of its forwarded INVITE, while no final answer came. */
  timerC?: NodeJS.Timeout;
}

export interface EdgeOptions {
  readonly config: EdgeConfig;
  /** Default: an in-process MemoryStore. */
  readonly store?: Store;
  /** Randomness for the Retry-After jitter (default Math.random). */
  readonly random?: () => number;
  /** Where problems go (default: nowhere; the CLI prints them). */
  readonly onProblem?: (err: Error) => void;
  /** Timer C (RFC 3261 16.6): how long a forwarded INVITE may go without a final answer after its last provisional one (ms; default 180,000). */
  readonly timerCMs?: number;
}

type Histogram = ReturnType<typeof hdr.build>;
const histogram = (): Histogram =>
  hdr.build({ bitBucketSize: 32, autoResize: true, lowestDiscernibleValue: 1, numberOfSignificantValueDigits: 3 });

interface CarrierStats {
  sent: number;
  /** Smallest gap between two sends on this carrier, on the Dispatcher's clock readings, µs. */
  minGapUs: number | null;
  lastUs?: number;
}

export interface EdgeSummary {
  invites: number;
  retransmissions: number;
  merged: number;
  decisions: number;
  admitted: number;
  refused: Record<string, number>;
  dispatched: number;
  rerouted: number;
  congested: number;
  cancelled: number;
  failed: number;
  answered: number;
  carrierFailures: number;
  byes: number;
  /**
   * Admitted calls released (gate.release). By outcome (released, not-held, deferred) in
   * releaseOutcomes, which also counts, as `unanswered <outcome>`, the releases of calls
   * refused because the store did not answer in time.
   */
  released: number;
  releaseOutcomes: Record<string, number>;
  refreshed: number;
  errors: number;
  inProgress: number;
  held: number;
  carriers: Record<string, { sent: number; minGapMs: number | null }>;
  /** Calls holding a channel when the edge stopped, per level and carrier with a channel limit. */
  holds: Record<string, number>;
  /** µs: INVITE in → admission decision. */
  admissionUs: { count: number; p50: number; p99: number; max: number };
  /** µs: INVITE in → INVITE handed to the transport, for calls with no pacing delay. */
  forwardUs: { count: number; p50: number; p99: number; max: number };
}

/** A request's Max-Forwards (udp.ts checked its form), 70 when it has none (RFC 3261 16.6). */
const hopsLeft = (rq: sip.Request): number => Number(rq.headers['max-forwards'] ?? 70);

const uriUser = (uri: string | sip.Uri | undefined): string | undefined =>
  uri === undefined ? undefined : sip.parseUri(uri)?.user || undefined;

export class SipEdge {
  readonly gate: CallGate;
  readonly config: EdgeConfig;
  private readonly transport: UdpTransport;
  private readonly transactions: sip.TransactionLayer;
  private readonly calls = new Map<string, EdgeCall>();
  private readonly random: () => number;
  private readonly onProblem: (err: Error) => void;
  private readonly timerCMs: number;
  private readonly recordRoute: sip.NameAddr;
  private readonly sweeper: NodeJS.Timeout;
  private stopping?: Promise<void>;
  private readonly admissionHist = histogram();
  private readonly forwardHist = histogram();
  private readonly perCarrier = new Map<string, CarrierStats>();
  private readonly counts = {
    invites: 0,
    retransmissions: 0,
    merged: 0,
    decisions: 0,
    admitted: 0,
    dispatched: 0,
    rerouted: 0,
    congested: 0,
    cancelled: 0,
    failed: 0,
    answered: 0,
    carrierFailures: 0,
    byes: 0,
    released: 0,
    refreshed: 0,
    errors: 0,
  };
  private readonly releaseOutcomes: Record<string, number> = {};
  private finalHolds: Record<string, number> = {};
  private readonly refused: Record<string, number> = {};
  /** Makes the To tag of the edge's own answers (one per Call-ID, unguessable). */
  private readonly tagSecret = randomBytes(16);

  /** Create the engine, then listen (UDP). */
  static async start(opts: EdgeOptions): Promise<SipEdge> {
    const gate = await CallGate.create({
      config: opts.config.limits,
      store: opts.store,
      policy: opts.config.policy,
      timeoutMs: opts.config.timeoutMs,
    });
    const edge = new SipEdge(gate, opts);
    try {
      await edge.transport.ready;
    } catch (err) {
      clearInterval(edge.sweeper);
      edge.transactions.destroy();
      await gate.close();
      const { host, port } = opts.config.listen;
      throw new Error(`cannot listen on udp ${host}:${port}: ${(err as Error).message}`);
    }
    return edge;
  }

  private constructor(gate: CallGate, opts: EdgeOptions) {
    this.gate = gate;
    this.config = opts.config;
    this.random = opts.random ?? Math.random;
    this.onProblem = opts.onProblem ?? (() => undefined);
    this.timerCMs = opts.timerCMs ?? TIMER_C_MS;
    gate.on('error', (err) => this.problem(err));
    // a Redis that stalls keeps its connection: no 'error', so say it once here
    gate.on('storeStall', (e) => {
      if (e.stalled)
        this.problem(
          new Error(
            `Redis did not answer a decision within ${e.timeoutMs} ms; decisions follow the policy while it does not`,
          ),
        );
    });
    const { host, port } = this.config.listen;
    this.recordRoute = { uri: sip.parseUri(`sip:${this.config.advertise}:${port};lr`)!, params: {} };
    const options = { address: host, port, publicAddress: this.config.advertise, udp: true, tcp: false };
    this.transport = udpTransport(
      options,
      (m, remote) => this.guard(() => this.onMessage(m, remote)),
      (err) => this.problem(err),
    );
    this.transactions = sip.makeTransactionLayer(options, this.transport.open.bind(this.transport));
    this.sweeper = setInterval(() => this.sweep(), Math.max(100, Math.min(SWEEP_MS, this.maxCallMs() / 4)));
    this.sweeper.unref();
  }

  /** Stop: held calls end (503), the engine closes, then the socket and every transaction. */
  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      clearInterval(this.sweeper);
      this.finalHolds = await this.holds().catch((err: Error) => {
        this.problem(err);
        return {};
      });
      await this.gate.close({ mode: 'cancel' });
      this.transactions.destroy();
      this.transport.destroy();
      for (const call of this.calls.values()) clearTimeout(call.timerC);
      this.calls.clear();
    })());
  }

  summary(): EdgeSummary {
    const q = (h: Histogram) => ({
      count: h.totalCount,
      p50: h.totalCount ? h.getValueAtPercentile(50) : 0,
      p99: h.totalCount ? h.getValueAtPercentile(99) : 0,
      max: h.totalCount ? h.maxValue : 0,
    });
    let inProgress = 0;
    for (const c of this.calls.values()) if (c.phase !== 'ended') inProgress++;
    const carriers: EdgeSummary['carriers'] = {};
    for (const [id, s] of this.perCarrier)
      carriers[id] = { sent: s.sent, minGapMs: s.minGapUs === null ? null : s.minGapUs / 1000 };
    return {
      ...this.counts,
      releaseOutcomes: { ...this.releaseOutcomes },
      holds: { ...this.finalHolds },
      refused: { ...this.refused },
      inProgress,
      held: this.gate.held,
      carriers,
      admissionUs: q(this.admissionHist),
      forwardUs: q(this.forwardHist),
    };
  }

  /**
   * Calls holding a channel now, in every level of the configured peers and on every carrier
   * that has a channel limit (read from the store: across every process sharing it).
   */
  async holds(): Promise<Record<string, number>> {
    const levels = new Set<string>();
    for (const [peer, entry] of this.config.peers)
      for (const level of admissionLevels(this.gate.config, peer, entry.account) ?? []) levels.add(level);
    const state = await inspectGate(this.gate, { peers: [...this.config.peers.keys()] });
    const out: Record<string, number> = {};
    for (const b of state.buckets)
      if (b.channels !== undefined && levels.has(b.bucket)) out[b.bucket] = b.channels.in_use;
    for (const c of state.carriers) if (c.channels !== undefined) out[`carrier:${c.carrier}`] = c.channels.in_use;
    return out;
  }

  // --- messages in ------------------------------------------------------------------------------

  private onMessage(m: sip.Message, remote: sip.Remote): void {
    if (!('method' in m) || m.method === undefined) {
      // a response: to its client transaction, or dropped (no transaction: a stray). Only from
      // where its request went (our Via asks for that: rport, RFC 3581):
      // the stack's branches are 1 of 10^6, and a 486 forged by anyone who knew the Call-ID
      // ended the call here, its channels free, while the carrier kept it
      const sentTo = this.calls.get(m.headers['call-id'])?.sentTo.get(m.headers.via[0]!.params.branch ?? '');
      if (sentTo?.address === remote.address && sentTo.port === remote.port)
        this.transactions.getClient(m)?.message(m, remote);
      return;
    }
    const rq = m;
    const t = this.transactions.getServer(rq);
    if (t) {
      // a retransmission (answered by the transaction), or the ACK of a non-2xx final response
      if (rq.method === 'INVITE') this.counts.retransmissions++;
      t.message(rq, remote);
      return;
    }
    if (rq.method === 'ACK') {
      this.onAck(rq);
      return;
    }
    this.transactions.createServerTransaction(rq, this.transport.get(remote)!);
    try {
      this.onRequest(rq, remote);
    } catch (err) {
      this.respond(rq, 500, 'Server Internal Error');
      throw err;
    }
  }

  private onRequest(rq: sip.Request, remote: sip.Remote): void {
    const inDialog = rq.headers.to.params.tag !== undefined;
    if (rq.method === 'CANCEL') this.onCancel(rq);
    else if (inDialog) this.onInDialog(rq);
    else if (rq.method === 'INVITE') this.onInvite(rq, { host: remote.address, port: remote.port });
    else if (rq.method === 'OPTIONS') this.respond(rq, 200, 'OK', { allow: ALLOW });
    else this.respond(rq, 405, 'Method Not Allowed', { allow: ALLOW });
  }

  private onInvite(rq: sip.Request, from: HostPort): void {
    const callId = rq.headers['call-id'];
    const prior = this.calls.get(callId);
    // a Call-ID seen before: a merged request (482), unless it is the caller's new attempt after
    // a refusal (its From tag, a higher CSeq: RFC 3261 8.2.2.2 merges only the same CSeq), which
    // gets a decision of its own. Never after an admission: that call's release may still be on
    // its way, and would free the new attempt's channels.
    const retry =
      prior !== undefined &&
      prior.phase === 'ended' &&
      !prior.admitted &&
      !prior.maybeHeld &&
      rq.headers.from.params.tag === prior.callerTag &&
      rq.headers.cseq.seq > prior.invite.headers.cseq.seq;
    if (prior !== undefined && !retry) {
      this.counts.merged++;
      this.respond(rq, 482, 'Loop Detected');
      return;
    }
    if (this.noHopsLeft(rq)) return;
    const contact = Array.isArray(rq.headers.contact) ? rq.headers.contact[0]?.uri : undefined;
    const call: EdgeCall = {
      callId,
      invite: rq,
      from,
      callerTag: rq.headers.from.params.tag ?? '',
      callerContact: typeof contact === 'string' ? contact : contact && sip.stringifyUri(contact),
      inAt: nowUs(),
      phase: 'admitting',
      admitted: false,
      maybeHeld: false,
      released: false,
      finalSent: false,
      cancelRequested: false,
      cancelSent: false,
      proceeding: false,
      answered: false,
      expiresAt: Date.now() + this.maxCallMs(),
      refreshedAt: Date.now(),
      activeAt: Date.now(),
      sentTo: new Map(),
    };
    this.calls.set(callId, call);
    this.counts.invites++;
    try {
      this.decide(call, rq, from);
    } catch (err) {
      // answered 500 by onMessage; the entry lingers as an ended call, not for maxCallDuration
      this.end(call);
      throw err;
    }
  }

  private decide(call: EdgeCall, rq: sip.Request, from: HostPort): void {
    const { callId } = call;
    const who = this.identify(rq, from);
    call.peer = who.peer;
    call.account = this.config.peers.get(who.peer)?.account;
    this.counts.decisions++;
    // attribute levels (callgate's docs/attributes.md): From user, To user, source address
    const caller = uriUser(rq.headers.from.uri);
    const callee = uriUser(rq.headers.to.uri);
    this.gate
      .admit({
        callId,
        peer: call.peer,
        ...(call.account !== undefined && { account: call.account }),
        ...(caller !== undefined && { caller }),
        ...(callee !== undefined && { callee }),
        source: from.host,
      })
      .then((d) => this.onAdmission(call, d))
      .catch((err: Error) => {
        // an INVITE that came while the edge stops: refused as the engine closes, not a fault
        if (err instanceof DispatcherClosedError) this.finalResponse(call, 503, 'Service Unavailable');
        // an id callgate refuses (a Call-ID or user of over 256 characters): the caller's fault
        else if (err instanceof InvalidArgumentError) this.finalResponse(call, 400, 'Bad Request');
        else {
          this.problem(err);
          this.finalResponse(call, 500, 'Server Internal Error');
        }
        this.end(call);
      });
  }

  /**
   * The peer of an INVITE, by the configured methods in order: its source address (`ip:port`,
   * then `ip`) in the peers table, the P-Asserted-Identity user, the From user. Without a match,
   * the source address itself names the peer (callgate refuses it as unknown unless a
   * defaultPeer is configured).
   */
  private identify(rq: sip.Request, from: HostPort): { peer: string; by: IdentifyBy | 'none' } {
    for (const by of this.config.identify) {
      if (by === 'source') {
        const peer = this.config.bySource.get(`${from.host}:${from.port}`) ?? this.config.bySource.get(from.host);
        if (peer !== undefined) return { peer, by };
      } else if (by === 'pai') {
        const pai = rq.headers['p-asserted-identity'];
        if (typeof pai === 'string') {
          // an unparsable identity names no one: the next method decides
          const user = (() => {
            try {
              return uriUser(sip.parseAOR({ s: pai, i: 0 }).uri);
            } catch {
              return undefined;
            }
          })();
          if (user) return { peer: user, by };
        }
      } else {
        const user = uriUser(rq.headers.from.uri);
        if (user) return { peer: user, by };
      }
    }
    return { peer: `${from.host}:${from.port}`, by: 'none' };
  }

  private onAdmission(call: EdgeCall, d: AdmissionDecision): void {
    this.admissionHist.recordValue(Math.max(1, nowUs() - call.inAt));
    if (!d.admitted) {
      call.maybeHeld = d.limitedBy === 'store-unavailable';
      const key =
        d.limitedBy === 'unknown-peer' || d.limitedBy === 'store-unavailable'
          ? d.limitedBy
          : `${d.limitedBy} ${d.reason ?? 'rate'}`;
      // an attribute level's refusals count under its name, a defaultPeer's peers under
      // `peer:*`: their values (callers, addresses, From users) are unbounded
      const colon = key.indexOf(':');
      const level = colon > 0 ? key.slice(0, colon) : '';
      const counted = (this.gate.config.inbound.attributes ?? []).some((l) => l.name === level)
        ? `${level} ${d.reason ?? 'rate'}`
        : level === 'peer' && !this.gate.config.inbound.peers.has(key.slice(colon + 1, key.lastIndexOf(' ')))
          ? `peer:* ${d.reason ?? 'rate'}`
          : key;
      this.refused[counted] = (this.refused[counted] ?? 0) + 1;
      const rs = toSipResponse(d, { jitterSeconds: this.config.retryAfterJitter, random: this.random })!;
      const headers: Record<string, unknown> = { warning: this.warning(key) };
      if (rs.retryAfter !== undefined) headers['retry-after'] = String(rs.retryAfter);
      this.finalResponse(call, rs.status, rs.reason, headers);
      this.end(call);
      return;
    }
    this.counts.admitted++;
    call.admitted = true;
    if (call.cancelRequested) {
      this.finalResponse(call, 487, 'Request Terminated');
      this.end(call);
      return;
    }
    // 100 Trying once admitted: a caller's INVITE was sent before the decision and this
    // response leaves after it (the end-to-end test brackets each decision between the two)
    this.respond(call.invite, 100, 'Trying');
    call.phase = 'dispatching';
    const route = this.config.peers.get(call.peer!)?.route ?? this.config.route;
    this.gate
      .dispatch({ callId: call.callId, route: [...route] }, (carrier) => this.forward(call, carrier), {
        onReserved: (r) => (call.delayMs = r.delayMs),
      })
      .then((r) => this.onDispatched(call, r))
      .catch((err: Error) => {
        this.problem(err);
        this.finalResponse(call, 500, 'Server Internal Error');
        this.end(call);
      });
  }

  private onDispatched(call: EdgeCall, r: DispatchResult): void {
    if (r.reroutedFrom.length > 0 && r.outcome === 'dispatched') this.counts.rerouted++;
    switch (r.outcome) {
      case 'dispatched': {
        this.counts.dispatched++;
        // spacing as the Dispatcher kept it: its clock reading just before each send, in send order
        let s = this.perCarrier.get(r.carrier!);
        if (s === undefined) this.perCarrier.set(r.carrier!, (s = { sent: 0, minGapUs: null }));
        if (s.lastUs !== undefined) s.minGapUs = Math.min(s.minGapUs ?? Infinity, r.sentAt! - s.lastUs);
        s.lastUs = r.sentAt!;
        s.sent++;
        return;
      }
      case 'rejected':
        this.counts.congested++;
        this.finalResponse(call, 503, 'Service Unavailable', { warning: this.warning('all-routes-congested') });
        break;
      case 'cancelled':
        this.counts.cancelled++;
        if (call.cancelRequested) this.finalResponse(call, 487, 'Request Terminated');
        else this.finalResponse(call, 503, 'Service Unavailable', { warning: this.warning('shutting down') });
        break;
      default:
        this.counts.failed++;
        this.finalResponse(call, 503, 'Service Unavailable', { warning: this.warning(r.reason ?? 'failed') });
    }
    this.end(call);
  }

  /**
   * Forward the INVITE to the carrier (the Dispatcher's send, at the call's slot). Resolves once
   * the datagram was written (the stack writes on the next tick; setImmediate runs after it), so
   * the Dispatcher spaces the next INVITE on this carrier from the write, however late it was.
   */
  private forward(call: EdgeCall, carrier: string): Promise<void> {
    const target = this.config.carriers.get(carrier)!; // every carrier of a route has an address (config check)
    const out = sip.copyMessage(call.invite);
    const user = uriUser(call.invite.uri);
    out.uri = `sip:${user ? `${user}@` : ''}${target.host}:${target.port}`;
    out.headers['max-forwards'] = hopsLeft(call.invite) - 1;
    out.headers.route = this.foreignRoutes(out.headers.route);
    out.headers['record-route'] = [this.recordRoute, ...(out.headers['record-route'] ?? [])];
    call.out = out;
    call.carrier = carrier;
    call.phase = 'forwarded';
    if (call.delayMs === 0) this.forwardHist.recordValue(Math.max(1, nowUs() - call.inAt));
    this.request(call, out, target, (rs) => this.onCarrierResponse(call, rs));
    this.armTimerC(call);
    return new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * (Re)start Timer C (RFC 3261 16.6 step 11, 16.7): a carrier that rings and never answers
   * kept the call, and its channels, for good (the stack's INVITE transaction has no timer once
   * a provisional answer came). When it fires: CANCEL to the carrier, 408 to the caller, and
   * the call ends. (Without any provisional answer, the transaction's Timer B ends it first.)
   */
  private armTimerC(call: EdgeCall): void {
    clearTimeout(call.timerC);
    call.timerC = setTimeout(
      () =>
        this.guard(() => {
          if (call.finalSent || call.phase === 'ended') return;
          call.cancelRequested = true;
          this.maybeCancel(call);
          this.finalResponse(call, 408, 'Request Timeout');
          this.end(call);
        }),
      this.timerCMs,
    );
    call.timerC.unref();
  }

  private onCarrierResponse(call: EdgeCall, rs: sip.Response): void {
    call.activeAt = Date.now();
    rs.headers.via.shift();
    const tag = rs.headers.to.params.tag;
    if (tag) call.calleeTag = tag;
    const contact = Array.isArray(rs.headers.contact) ? rs.headers.contact[0]?.uri : undefined;
    if (contact) call.calleeContact = typeof contact === 'string' ? contact : sip.stringifyUri(contact);
    if (rs.status < 200) {
      if (rs.status > 100) this.armTimerC(call);
      call.proceeding = true;
      if (rs.status > 100) this.upstream(rs); // 100 Trying is hop by hop
      this.maybeCancel(call);
      return;
    }
    clearTimeout(call.timerC); // a final answer
    if (rs.status < 300) {
      if (!call.answered) this.counts.answered++;
      call.answered = true;
      call.finalSent = true;
      this.upstream(rs); // retransmissions of a 2xx go through too (end to end)
      return;
    }
    this.counts.carrierFailures++;
    call.finalSent = true;
    this.upstream(rs);
    this.end(call);
  }

  private onCancel(rq: sip.Request): void {
    const call = this.calls.get(rq.headers['call-id']);
    // a CANCEL matches its INVITE's transaction: the same top Via branch (RFC 3261 9.2)
    if (!call || rq.headers.via[0]?.params.branch !== call.invite.headers.via[0]?.params.branch) {
      this.respond(rq, 481, 'Call/Transaction Does Not Exist');
      return;
    }
    this.respond(rq, 200, 'OK');
    if (call.finalSent || call.phase === 'ended') return;
    call.cancelRequested = true;
    if (call.phase === 'dispatching')
      this.gate.cancel(call.callId); // held: ends `cancelled`, never sent (487 then)
    else if (call.phase === 'forwarded') this.maybeCancel(call);
    // admitting: answered 487 once decided
  }

  /** CANCEL the carrier's INVITE once it answered provisionally (RFC 3261 9.1). */
  private maybeCancel(call: EdgeCall): void {
    if (!call.cancelRequested || call.cancelSent || !call.proceeding || call.finalSent || !call.out) return;
    call.cancelSent = true;
    const out = call.out;
    const cancel: sip.Request = {
      method: 'CANCEL',
      uri: out.uri,
      headers: {
        via: [{ ...out.headers.via[0]!, params: { ...out.headers.via[0]!.params } }],
        to: { ...out.headers.to, params: { ...out.headers.to.params } },
        from: out.headers.from,
        'call-id': out.headers['call-id'],
        cseq: { seq: out.headers.cseq.seq, method: 'CANCEL' },
        'max-forwards': 70,
      },
    };
    delete cancel.headers.to.params.tag;
    this.request(call, cancel, this.config.carriers.get(call.carrier!)!, () => undefined);
  }

  /** ACK of a 2xx (a new transaction): on to the carrier. */
  private onAck(rq: sip.Request): void {
    const call = this.calls.get(rq.headers['call-id']);
    if (!call?.answered || rq.headers.from.params.tag !== call.callerTag) return; // stray: dropped
    call.activeAt = Date.now();
    const ack = this.relayed(rq, call, true);
    ack.headers.via.unshift({ params: { branch: sip.generateBranch() } });
    const cn = this.transport.open(this.addressOf(call, true), (err) => this.problem(err));
    try {
      cn.send(ack);
    } finally {
      cn.release();
    }
  }

  /**
   * BYE and any other request inside a dialog: to the other side; BYE ends the call. The dialog
   * is its Call-ID and both tags (RFC 3261 12.2.2): a BYE with the caller's From tag and any
   * other To tag was relayed (the carrier answered 481, the call went on) and ended the call
   * here, its channels free while it was still up.
   */
  private onInDialog(rq: sip.Request): void {
    const call = this.calls.get(rq.headers['call-id']);
    const from = rq.headers.from.params.tag;
    const to = rq.headers.to.params.tag;
    const known = call?.carrier !== undefined && call.calleeTag !== undefined;
    const downstream = known && from === call.callerTag && to === call.calleeTag;
    const upstream = known && from === call.calleeTag && to === call.callerTag;
    if (!call || !(downstream || upstream)) {
      this.respond(rq, 481, 'Call/Transaction Does Not Exist');
      return;
    }
    if (this.noHopsLeft(rq)) return;
    call.activeAt = Date.now();
    const out = this.relayed(rq, call, downstream);
    this.request(call, out, this.addressOf(call, downstream), (rs) => {
      rs.headers.via.shift();
      if (rs.status > 100) this.upstream(rs);
    });
    if (rq.method === 'BYE') {
      this.counts.byes++;
      this.end(call);
    }
  }

  /** A request that may not be relayed (Max-Forwards 0) was answered 483. */
  private noHopsLeft(rq: sip.Request): boolean {
    if (hopsLeft(rq) > 0) return false;
    this.respond(rq, 483, 'Too Many Hops');
    return true;
  }

  /** A copy of an in-dialog request for the other side: one hop less, our Route gone, addressed to its Contact. */
  private relayed(rq: sip.Request, call: EdgeCall, downstream: boolean): sip.Request {
    const out = sip.copyMessage(rq);
    out.headers['max-forwards'] = hopsLeft(rq) - 1;
    out.headers.route = this.foreignRoutes(out.headers.route);
    const contact = downstream ? call.calleeContact : call.callerContact;
    if (contact && (out.headers.route ?? []).length === 0) out.uri = contact;
    return out;
  }

  /** The network address of the other side: the carrier's configured one, or where the caller's INVITE came from. */
  private addressOf(call: EdgeCall, downstream: boolean): sip.Address {
    const at = downstream ? this.config.carriers.get(call.carrier!)! : call.from;
    return { protocol: 'UDP', address: at.host, port: at.port };
  }

  /** Route entries not naming this edge. */
  private foreignRoutes(route: sip.NameAddr[] | undefined): sip.NameAddr[] | undefined {
    if (!route) return undefined;
    const { port } = this.config.listen;
    return route.filter((r) => {
      const uri = sip.parseUri(r.uri);
      return !(uri && uri.host === this.config.advertise && (uri.port || 5060) === port);
    });
  }

  // --- messages out -----------------------------------------------------------------------------

  /** A request of a call through a client transaction of the stack (retransmitted until answered). */
  private request(
    call: EdgeCall,
    rq: sip.Request,
    target: HostPort | sip.Address,
    onResponse: (rs: sip.Response) => void,
  ): void {
    if (rq.method !== 'CANCEL') rq.headers.via.unshift({ params: {} }); // our Via; the transaction sets its branch
    const address = 'host' in target ? { protocol: 'UDP', address: target.host, port: target.port } : target;
    const cn = this.transport.open(address, (err) => this.problem(err));
    this.transactions.createClientTransaction(cn, rq, (rs) => this.guard(() => onResponse(rs)));
    call.sentTo.set(rq.headers.via[0]!.params.branch ?? '', address);
  }

  /**
   * A response to a request we received (through its server transaction). One the edge makes
   * itself carries a To tag (RFC 3261 8.2.6.2), the same for every answer of one Call-ID (a 487
   * and the 200 to its CANCEL).
   */
  private respond(rq: sip.Request, status: number, reason: string, headers?: Record<string, unknown>): void {
    const rs = sip.makeResponse(rq, status, reason, headers && { headers });
    if (status > 100 && rs.headers.to.params.tag === undefined)
      rs.headers.to = { ...rs.headers.to, params: { ...rs.headers.to.params, tag: this.localTag(rq) } };
    this.transactions.getServer(rs)?.send(rs);
  }

  private localTag(rq: sip.Request): string {
    return createHash('sha256').update(this.tagSecret).update(rq.headers['call-id']).digest('hex').slice(0, 16);
  }

  /** A response from downstream, our Via removed, to the transaction it answers. */
  private upstream(rs: sip.Response): void {
    if (rs.headers.via.length === 0) return;
    this.transactions.getServer(rs)?.send(rs);
  }

  private finalResponse(call: EdgeCall, status: number, reason: string, headers?: Record<string, unknown>): void {
    if (call.finalSent) return;
    call.finalSent = true;
    this.respond(call.invite, status, reason, headers);
  }

  private warning(text: string): string {
    return `399 ${this.config.advertise} "callgate: ${text.replace(/["\\]/g, '')}"`;
  }

  /** The call ended: its channels are released (once), and it lingers a while for late messages. */
  private end(call: EdgeCall): void {
    clearTimeout(call.timerC);
    if (call.phase === 'ended') return;
    call.phase = 'ended';
    call.expiresAt = Date.now() + LINGER_MS;
    if ((call.admitted || call.maybeHeld) && !call.released) {
      call.released = true;
      if (call.admitted) this.counts.released++;
      // every level and the carrier, from any process; kept and retried by the gate while the
      // store is away. A call refused for want of a store answer is released too: its admission
      // may have reached Redis after the deadline (usually `not-held`).
      const key = (outcome: string) => (call.admitted ? outcome : `unanswered ${outcome}`);
      this.gate.release(call.callId).then(
        (outcome) => (this.releaseOutcomes[key(outcome)] = (this.releaseOutcomes[key(outcome)] ?? 0) + 1),
        (err: Error) => this.problem(err),
      );
    }
  }

  private maxCallMs(): number {
    return this.gate.config.maxCallDurationUs / 1000;
  }

  /**
   * Drop ended calls past their linger; end a call silent for maxCallDuration (no message of its
   * dialog: its BYE was lost, or its caller and carrier vanished), as its holds lapse; refresh
   * the holds of the others every half maxCallDuration (a call with session timers, RFC 4028,
   * shows itself by its re-INVITEs or UPDATEs and lasts as long as they come).
   */
  private sweep(): void {
    const now = Date.now();
    for (const [id, call] of this.calls) {
      if (call.expiresAt <= now) this.calls.delete(id);
      else if (call.phase !== 'ended' && call.admitted && now - call.activeAt >= this.maxCallMs()) this.end(call);
      else if (call.phase !== 'ended' && call.admitted && now - call.refreshedAt >= this.maxCallMs() / 2) {
        call.refreshedAt = now;
        call.expiresAt = now + this.maxCallMs();
        this.gate.refresh(id).then(
          (held) => held && this.counts.refreshed++,
          (err: Error) => this.problem(err),
        );
      }
    }
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.problem(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private problem(err: Error): void {
    this.counts.errors++;
    this.onProblem(err);
  }
}
