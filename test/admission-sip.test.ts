/**
 * From a refusal to a SIP response: 503 with Retry-After in whole seconds (rounded up, never 0
 * when the wait is positive), jitter in range with an injected random source, 403 for an
 * unknown peer; and the retryAfterMs the engine computes, end to end.
 */
import { expect } from 'chai';
import type { AdmissionDecision } from '../src/admission/admission.js';
import { toSipResponse } from '../src/admission/sip.js';
import { CallGate } from '../src/gate.js';
import { prng as mulberry32 } from '../scripts/make-fixtures.js';
import { MS, S, T0 } from './admission/stores.js';

const refused = (retryAfterMs: number, limitedBy = 'peer:p'): AdmissionDecision => ({
  callId: 'c',
  direction: 'in',
  admitted: false,
  limitedBy,
  retryAfterMs,
  at: T0,
});

describe('toSipResponse', () => {
  it('admitted: no response', () => {
    expect(toSipResponse({ callId: 'c', direction: 'in', admitted: true, retryAfterMs: 0, at: T0 })).to.equal(
      undefined,
    );
  });

  it('unknown-peer: 403 Forbidden without Retry-After', () => {
    expect(toSipResponse(refused(0, 'unknown-peer'))).to.deep.equal({ status: 403, reason: 'Forbidden' });
    expect(toSipResponse(refused(0, 'unknown-peer'), { jitterSeconds: 5, random: () => 0.9 })).to.deep.equal({
      status: 403,
      reason: 'Forbidden',
    });
  });

  it('over a limit: 503 with Retry-After in whole seconds, rounded up, never 0', () => {
    const cases: [number, number][] = [
      [1, 1],
      [999, 1],
      [1_000, 1],
      [1_001, 2],
      [1_999, 2],
      [8_000, 8],
      [59_001, 60],
    ];
    for (const [ms, s] of cases) {
      for (const limitedBy of ['global', 'account:a', 'peer:p']) {
        expect(toSipResponse(refused(ms, limitedBy)), `${ms} ms`).to.deep.equal({
          status: 503,
          reason: 'Service Unavailable',
          retryAfter: s,
        });
      }
    }
  });

  it('store unavailable (no wait known): 503 without Retry-After', () => {
    expect(toSipResponse(refused(0, 'store-unavailable'))).to.deep.equal({
      status: 503,
      reason: 'Service Unavailable',
    });
  });

  it('jitter: base + floor(random·(J+1)), always within [base, base + J]', () => {
    expect(toSipResponse(refused(1_500), { jitterSeconds: 3, random: () => 0 })!.retryAfter).to.equal(2);
    expect(toSipResponse(refused(1_500), { jitterSeconds: 3, random: () => 0.5 })!.retryAfter).to.equal(4);
    expect(toSipResponse(refused(1_500), { jitterSeconds: 3, random: () => 0.999_999 })!.retryAfter).to.equal(5);
    const random = mulberry32(42);
    const seen = new Set<number>();
    for (let i = 0; i < 2_000; i++) {
      const r = toSipResponse(refused(1_500), { jitterSeconds: 3, random })!.retryAfter!;
      expect(r).to.be.within(2, 5);
      expect(Number.isInteger(r)).to.equal(true);
      seen.add(r);
    }
    expect([...seen].sort()).to.deep.equal([2, 3, 4, 5]); // every value reachable
  });

  it('jitter 0, negative or fractional is whole and never negative; random unused without jitter', () => {
    const never = () => {
      throw new Error('random must not be called');
    };
    expect(toSipResponse(refused(2_000), { random: never })!.retryAfter).to.equal(2);
    expect(toSipResponse(refused(2_000), { jitterSeconds: 0, random: never })!.retryAfter).to.equal(2);
    expect(toSipResponse(refused(2_000), { jitterSeconds: -4, random: never })!.retryAfter).to.equal(2);
    expect(toSipResponse(refused(2_000), { jitterSeconds: 1.9, random: () => 0.99 })!.retryAfter).to.equal(3);
  });

  it('end to end: the engine’s retryAfterMs becomes Retry-After', async () => {
    const gate = await CallGate.create({ config: { inbound: { peers: { p: [{ limit: 1, window: 'PT5S' }] } } } });
    await gate.admit({ callId: 'a', peer: 'p', at: T0 });
    const r1 = await gate.admit({ callId: 'b', peer: 'p', at: T0 + 1 });
    expect(r1.retryAfterMs).to.equal(5_000); // 5 s − 1 µs, rounded up to whole ms
    expect(toSipResponse(r1)!.retryAfter).to.equal(5);
    const r2 = await gate.admit({ callId: 'c', peer: 'p', at: T0 + 5 * S - 1 });
    expect(r2.retryAfterMs).to.equal(1); // 1 µs left: 1 ms, and 1 s on the wire (never 0)
    expect(toSipResponse(r2)).to.deep.equal({ status: 503, reason: 'Service Unavailable', retryAfter: 1 });
    const r3 = await gate.admit({ callId: 'd', peer: 'p', at: T0 + 3_999 * MS });
    expect(toSipResponse(r3)!.retryAfter).to.equal(2); // 1.001 s left → 2 s
    await gate.close();
  });
});
