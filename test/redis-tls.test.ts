/**
 * Redis over TLS with a private CA, for real: certificates made with openssl, redis-server
 * listening with TLS only. RedisStore.connect() with ioredis options, and the CLI's
 * --redis-tls-* options and ACL credentials (URL or environment), both ways: it works with the
 * right CA / client certificate / password, and fails (never silently) without them. The
 * credentials are tested on a server whose default user is off, so that only a login as the ACL
 * user decides anything: credentials that were ignored would fail there (NOAUTH).
 */
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { redisConnectionOptions, type RedisConnectionArgs } from '../src/cli/redis.js';
import { InvalidArgumentError, StoreUnavailableError } from '../src/errors/index.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { runNode, type Run } from './helpers/run.js';
import { makeCertificates, startTlsRedis, type TlsFiles, type TlsRedis } from './helpers/tls.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const FIX = join(ROOT, 'fixtures');
const PASSWORD = 'tls-test-password';

const CONFIG = {
  inbound: { peers: { p: [{ limit: 2, window: 'PT60S' }] } },
  outbound: { carriers: { A: { cps: 1 } } },
};

describe('Redis over TLS (rediss://) and ACL credentials', function () {
  this.timeout(120_000);
  let files: TlsFiles;
  let server: TlsRedis; // tls-auth-clients no
  let mutual: TlsRedis; // tls-auth-clients yes: clients show a certificate from the CA
  let locked: TlsRedis; // tls-auth-clients no; the default user off: only the ACL user 'callgate' gets in
  let dir: string;

  before(async () => {
    files = makeCertificates();
    [server, mutual, locked] = await Promise.all([
      startTlsRedis(files, { authClients: 'no' }),
      startTlsRedis(files, { authClients: 'yes' }),
      startTlsRedis(files, { authClients: 'no' }),
    ]);
    dir = mkdtempSync(join(tmpdir(), 'callgate-tls-cli-'));
    // an ACL user with a password (rules of the README's minimal ACL are tested elsewhere), and
    // the default user (no password) off: a client that does not log in as 'callgate' gets NOAUTH
    const admin = new Redis(locked.url, { tls: { ca: readFileSync(files.ca) } });
    await admin.call('ACL', 'SETUSER', 'callgate', 'on', `>${PASSWORD}`, '~callgate:*', '+@all');
    await admin.call('ACL', 'SETUSER', 'default', 'off');
    admin.disconnect();
    const anonymous = new Redis(locked.url, { tls: { ca: readFileSync(files.ca) }, maxRetriesPerRequest: 0 });
    anonymous.on('error', () => {});
    expect(await anonymous.ping().catch((e: Error) => e.message)).to.match(/^NOAUTH/);
    anonymous.disconnect();
  });
  after(async () => {
    await Promise.all([server?.stop(), mutual?.stop(), locked?.stop()]);
    files?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Two admissions in, the third refused, one reservation: the store really works. */
  async function decide(store: RedisStore, policy: 'error' = 'error'): Promise<string[]> {
    const gate = await CallGate.create({ config: CONFIG, store, policy });
    try {
      const out: string[] = [];
      for (const id of ['c1', 'c2', 'c3'])
        out.push((await gate.admit({ callId: id, peer: 'p' })).admitted ? 'in' : 'out');
      out.push((await gate.reserve({ callId: 'o1', route: ['A'] })).outcome);
      await store.clear();
      return out;
    } finally {
      await gate.close();
    }
  }

  const prefix = () => `callgate:tls:${Math.random().toString(36).slice(2)}:`;

  describe('RedisStore.connect(url, { redisOptions })', () => {
    it('decides over rediss:// with the private CA', async () => {
      const store = RedisStore.connect(server.url, {
        prefix: prefix(),
        redisOptions: { tls: { ca: readFileSync(files.ca) } },
      });
      expect(await decide(store)).to.deep.equal(['in', 'in', 'out', 'dispatched']);
    });

    it('does not decide when the server is not signed by the CA it trusts', async () => {
      const store = RedisStore.connect(server.url, {
        prefix: prefix(),
        redisOptions: { tls: { ca: readFileSync(files.otherCa) } },
      });
      const err = await decide(store).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StoreUnavailableError);
    });

    it('shows a client certificate to a server that asks for one; without it, no decision', async () => {
      const tlsFull = {
        ca: readFileSync(files.ca),
        cert: readFileSync(files.clientCert),
        key: readFileSync(files.clientKey),
      };
      expect(
        await decide(RedisStore.connect(mutual.url, { prefix: prefix(), redisOptions: { tls: tlsFull } })),
      ).to.deep.equal(['in', 'in', 'out', 'dispatched']);
      const without = RedisStore.connect(mutual.url, {
        prefix: prefix(),
        redisOptions: { tls: { ca: readFileSync(files.ca) } },
      });
      expect(
        await decide(without).then(
          () => 'decided',
          (e: unknown) => (e as Error).name,
        ),
      ).to.equal('StoreUnavailableError');
    });

    it('logs in as an ACL user given in the options or in the URL (the URL wins)', async () => {
      const ca = readFileSync(files.ca);
      const viaOptions = RedisStore.connect(locked.url, {
        prefix: prefix(),
        redisOptions: { tls: { ca }, username: 'callgate', password: PASSWORD },
      });
      expect(await decide(viaOptions)).to.deep.equal(['in', 'in', 'out', 'dispatched']);
      const url = locked.url.replace('rediss://', `rediss://callgate:${PASSWORD}@`);
      const viaUrl = RedisStore.connect(url, {
        prefix: prefix(),
        redisOptions: { tls: { ca }, username: 'nobody', password: 'wrong' },
      });
      expect(await decide(viaUrl)).to.deep.equal(['in', 'in', 'out', 'dispatched']);
    });
  });

  describe('callgate replay --store redis over TLS', () => {
    const trace = join(FIX, 'boundary.trace.csv');
    const config = join(FIX, 'boundary.config.json');
    function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
      return runNode([BIN, 'replay', '--config', config, '--trace', trace, ...args], {
        cwd: ROOT,
        env: { REDIS_URL: '', REDIS_USERNAME: '', REDIS_PASSWORD: '', ...env },
      });
    }
    let memory: string;
    before(async () => {
      const out = join(dir, 'memory.jsonl');
      const r = await run(['--decisions', out]);
      expect(r.code, r.stderr).to.equal(0);
      memory = readFileSync(out, 'utf8');
      expect(memory.split('\n').length).to.be.greaterThan(10);
    });

    /** Replays on Redis with `args`; expects exit 0 and the memory store's exact decisions. */
    async function sameDecisions(args: string[], env: NodeJS.ProcessEnv = {}): Promise<void> {
      const out = join(dir, `redis-${Math.random().toString(36).slice(2)}.jsonl`);
      const r = await run(['--store', 'redis', '--decisions', out, ...args], env);
      expect(r.code, r.stderr).to.equal(0);
      expect(readFileSync(out, 'utf8')).to.equal(memory);
    }

    it('--redis-tls-ca: the same decisions as the memory store, over rediss://', async () => {
      await sameDecisions(['--redis-url', server.url, '--redis-tls-ca', files.ca]);
    });

    it('without the CA: exit 1, one line naming the certificate problem, no stack trace', async () => {
      const r = await run(['--store', 'redis', '--redis-url', server.url]);
      expect(r.code).to.equal(1);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.match(/^error: cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+: .*certificate/);
    });

    it('--redis-tls-cert and --redis-tls-key for a server that asks for a client certificate', async () => {
      await sameDecisions([
        '--redis-url',
        mutual.url,
        '--redis-tls-ca',
        files.ca,
        '--redis-tls-cert',
        files.clientCert,
        '--redis-tls-key',
        files.clientKey,
      ]);
      const r = await run(['--store', 'redis', '--redis-url', mutual.url, '--redis-tls-ca', files.ca]);
      expect(r.code).to.equal(1);
      expect(r.stderr).to.match(/^error: cannot reach Redis at rediss:/);
    });

    it('ACL credentials from REDIS_URL or from REDIS_USERNAME / REDIS_PASSWORD; none: NOAUTH', async () => {
      const withUser = locked.url.replace('rediss://', `rediss://callgate:${PASSWORD}@`);
      await sameDecisions(['--redis-tls-ca', files.ca], { REDIS_URL: withUser });
      await sameDecisions(['--redis-url', locked.url, '--redis-tls-ca', files.ca], {
        REDIS_USERNAME: 'callgate',
        REDIS_PASSWORD: PASSWORD,
      });
      // without them the server lets nobody in: the variables above were needed
      const r = await run(['--store', 'redis', '--redis-url', locked.url, '--redis-tls-ca', files.ca]);
      expect(r.code).to.equal(1);
      expect(r.stderr).to.match(/^error: cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+: .*NOAUTH/);
    });

    it("the URL's credentials win over REDIS_USERNAME / REDIS_PASSWORD", async () => {
      const withUser = locked.url.replace('rediss://', `rediss://callgate:${PASSWORD}@`);
      await sameDecisions(['--redis-url', withUser, '--redis-tls-ca', files.ca], {
        REDIS_USERNAME: 'nobody',
        REDIS_PASSWORD: 'not-the-password',
      });
      await sameDecisions(['--redis-tls-ca', files.ca], {
        REDIS_URL: withUser,
        REDIS_USERNAME: 'nobody',
        REDIS_PASSWORD: 'not-the-password',
      });
    });

    it('a wrong password: exit 1, and the password is never printed', async () => {
      const url = locked.url.replace('rediss://', 'rediss://callgate:not-the-password@');
      const r = await run(['--store', 'redis', '--redis-tls-ca', files.ca], { REDIS_URL: url });
      expect(r.code).to.equal(1);
      expect(r.stderr).to.match(/WRONGPASS/);
      expect(r.stderr).not.to.include('not-the-password');
      expect(r.stderr).to.include('rediss://callgate:***@127.0.0.1');
    });

    it('bad TLS input is refused before any connection, one line each; exit 2', async () => {
      const notPem = join(dir, 'not.pem');
      writeFileSync(notPem, 'hello\n');
      const plain = server.url.replace('rediss:', 'redis:');
      const cases: [RedisConnectionArgs, RegExp][] = [
        [
          { redisUrl: plain, redisTlsCa: files.ca },
          /^--redis-tls-ca, --redis-tls-cert and --redis-tls-key need a rediss:\/\/ URL, got redis:\/\/127\.0\.0\.1:\d+$/,
        ],
        [
          { redisUrl: server.url, redisTlsCert: files.clientCert },
          /^--redis-tls-cert and --redis-tls-key go together$/,
        ],
        [{ redisUrl: server.url, redisTlsKey: files.clientKey }, /^--redis-tls-cert and --redis-tls-key go together$/],
        [
          { redisUrl: server.url, redisTlsCa: join(dir, 'missing.pem') },
          /^cannot read --redis-tls-ca .*missing\.pem: ENOENT/,
        ],
        [{ redisUrl: server.url, redisTlsCa: notPem }, /^--redis-tls-ca .*not\.pem is not a PEM file$/],
        [
          { redisUrl: server.url, redisTlsCa: files.ca, redisTlsCert: files.clientCert, redisTlsKey: notPem },
          /^--redis-tls-key .*not\.pem is not a PEM file$/,
        ],
      ];
      for (const [args, message] of cases) {
        const err = (() => {
          try {
            redisConnectionOptions(args, {});
          } catch (e) {
            return e as Error;
          }
          return undefined;
        })();
        expect(err, JSON.stringify(args)).to.be.instanceOf(InvalidArgumentError);
        expect(err!.message).to.match(message);
      }
      // the command: exit 2 with that one line
      const r = await run(['--store', 'redis', '--redis-url', plain, '--redis-tls-ca', files.ca]);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.match(
        /^error: --redis-tls-ca, --redis-tls-cert and --redis-tls-key need a rediss:\/\/ URL, got redis:\/\/127\.0\.0\.1:\d+\n$/,
      );
    });
  });
});
