/**
 * The sipp caller scenario the end-to-end tests use (examples/sip-edge/sipp/caller.xml), against
 * a carrier whose answers arrive out of order, as Kamailio's UDP workers can relay them: a 200,
 * then the call's 180, then the 200 again. A phone ignores the late 180 and ACKs each 200; so
 * must the caller, or a proxy's reordering fails the call in sipp's count (it did in CI: "Aborting
 * call on unexpected message ... while pausing, received 180 Ringing").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { SCENARIOS } from './helpers/sip-edge.js';
import { sippAvailable, SIPP_INSTALL_HINT, startSipp } from './helpers/sipp.js';

describe('sipp caller scenario (examples/sip-edge/sipp/caller.xml)', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => {
    if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-sipp-caller-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a 180 after the 200 is ignored and a repeated 200 is ACKed again: every call succeeds', async () => {
    const carrier = await startSipp({
      name: 'late',
      scenario: path.resolve('test/sipp/late-provisional.xml'),
      dir,
      timeoutS: 30,
    });
    const caller = await startSipp({
      name: 'caller',
      scenario: path.join(SCENARIOS, 'caller.xml'),
      dir,
      remote: `127.0.0.1:${carrier.port}`,
      rate: 10,
      calls: 3,
      pauseMs: 200,
      keys: { caller: 'p1' },
      timeoutS: 30,
    });
    const report = await caller.done(30_000);
    const uas = await carrier.stop(10_000);
    expect(report.code, `caller exit; errors:\n${report.errors}\n${report.output.slice(-1500)}`).to.equal(0);
    expect(report.stats['SuccessfulCall(C)']).to.equal('3');
    expect(report.stats['FailedCall(C)']).to.equal('0');
    expect(report.errors).to.equal('');
    // each call: 2 ACKs sent (one per 200), the 180 received and ignored
    const sent = (m: string) => report.messages.filter((e) => e.dir === 'sent' && e.method === m).length;
    expect(sent('ACK')).to.equal(6);
    expect(report.messages.filter((e) => e.dir === 'received' && e.status === 180).length).to.equal(3);
    expect(uas.stats['SuccessfulCall(C)']).to.equal('3');
    expect(uas.stats['FailedCall(C)']).to.equal('0');
  });
});
