/**
 * Redis over TLS for tests: a private CA, a server certificate for 127.0.0.1 and a client
 * certificate made with openssl, and redis-server children listening with TLS only
 * (`--port 0 --tls-port <free>`), on loopback. Every child is SIGKILLed on process exit.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { freePort, serverArgs } from './redis.js';
import { orAfter } from './wait.js';

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 5_000;

export interface TlsFiles {
  dir: string;
  /** The private CA's certificate (PEM). */
  ca: string;
  serverCert: string;
  serverKey: string;
  /** A client certificate signed by the same CA, and its key. */
  clientCert: string;
  clientKey: string;
  /** A second CA that signed nothing here: trusting it alone must fail. */
  otherCa: string;
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  if (r.error) throw new Error(`openssl is needed for the TLS tests: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${r.stderr}`);
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=callgate test ${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
}

function makeLeaf(dir: string, name: string, cn: string, ext: string): void {
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, ['req', '-new', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

/** A CA, a server certificate for 127.0.0.1 / localhost, a client certificate; in a temp dir. */
export function makeCertificates(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-tls-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'other');
  makeLeaf(
    dir,
    'server',
    '127.0.0.1',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  makeLeaf(dir, 'client', 'callgate-client', 'extendedKeyUsage=clientAuth\n');
  const f = (name: string) => join(dir, name);
  return {
    dir,
    ca: f('ca.crt'),
    otherCa: f('other.crt'),
    serverCert: f('server.crt'),
    serverKey: f('server.key'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface TlsRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** One PING over TLS, trusting `files.ca` (and showing the client certificate); true on PONG. */
function tlsPing(port: number, files: TlsFiles): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = tls.connect({
      host: HOST,
      port,
      ca: readFileSync(files.ca),
      cert: readFileSync(files.clientCert),
      key: readFileSync(files.clientKey),
    });
    const timer = setTimeout(() => done(false), 500);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    sock.once('error', () => done(false));
    sock.once('secureConnect', () => sock.write('*1\r\n$4\r\nPING\r\n'));
    sock.on('data', (d: Buffer) => done(d.toString().startsWith('+PONG')));
  });
}

/**
 * redis-server with TLS only, on a free loopback port. `authClients`: whether clients must show
 * a certificate signed by the CA ('yes') or not ('no'). Resolves once it answers PING over TLS.
 */
export async function startTlsRedis(
  files: TlsFiles,
  opts: { authClients: 'yes' | 'no'; args?: string[] },
): Promise<TlsRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'callgate-tls-redis-'));
  let lastOutput = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    // --port 0: no plain-text listener at all
    const args = serverArgs(0, dir, [
      '--tls-port',
      String(port),
      '--tls-cert-file',
      files.serverCert,
      '--tls-key-file',
      files.serverKey,
      '--tls-ca-cert-file',
      files.ca,
      '--tls-auth-clients',
      opts.authClients,
      ...(opts.args ?? []),
    ]);
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    let exited = false;
    const exit = new Promise<void>((resolve) =>
      child.once('exit', () => {
        exited = true;
        children.delete(child);
        resolve();
      }),
    );
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!exited && Date.now() < deadline && !(await tlsPing(port, files)))
      await new Promise((r) => setTimeout(r, 50));
    if (!exited && Date.now() < deadline) {
      return {
        url: `rediss://${HOST}:${port}`,
        port,
        async stop() {
          child.kill('SIGTERM');
          await orAfter(exit, 3_000, undefined);
          if (!exited) child.kill('SIGKILL');
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    child.kill('SIGKILL');
    await exit;
    lastOutput = output;
    if (!/address already in use/i.test(output)) break;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`redis-server with TLS did not start (is it built with TLS?):\n${lastOutput.trim()}`);
}
