/**
 * The callgate command line, one file per command:
 *
 *   callgate replay --config FILE --trace FILE [--store memory|redis] [--decisions FILE|-]
 *                   [--json] [--html FILE] [--compare OLD_CONFIG]          (replay.ts)
 *   callgate serve --config FILE [--store memory|redis] [--listen ADDR] ...  (serve.ts)
 *   callgate inspect --config FILE [--redis-url URL] [--peer ID]... [--json] (inspect.ts)
 *   callgate merge-traces --out FILE TRACE...                               (merge-traces.ts)
 *   callgate holds | release | reset (an operator's hand on live Redis)       (operate.ts)
 *   callgate kamailio --config FILE [--prefix P] [--out FILE]               (kamailio.ts)
 *
 * Commands on Redis take --redis-url and --redis-tls-* (redis.ts). Exit codes: 0 done; 2 bad
 * input (an invalid configuration, a malformed trace, an unreadable or unwritable file, a bad
 * option), reported as one line per problem (at most 20, then a count), no stack trace; 1 Redis
 * out of reach, or a crash (with its stack); 130 / 143 interrupted by SIGINT / SIGTERM.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError as CliArgumentError } from 'commander';
import { CallGateError, InterruptedError, StoreUnavailableError } from '../errors/index.js';
import { packageVersion } from '../package-root.js';
import { inspectCommand } from './inspect.js';
import { kamailioCommand } from './kamailio.js';
import { mergeTracesCommand } from './merge-traces.js';
import { operateCommands } from './operate.js';
import { replayCommand } from './replay.js';
import { rememberSecrets, redactSecrets } from './redis.js';
import { serveCommand } from './serve.js';
import { unbanCommand } from './unban.js';

const EXIT_BAD_INPUT = 2;
const EXIT_UNAVAILABLE = 1;

/**
 * One line per problem, no stack trace: bad input is the user's to fix, not a crash. The messages
 * of ConfigError and TraceError hold one problem a line, at most 20 and a count of the rest.
 */
function reportFailure(err: unknown): number {
  if (err instanceof CallGateError) {
    for (const line of redactSecrets(err.message).split('\n')) process.stderr.write(`error: ${line}\n`);
    if (err instanceof InterruptedError) return err.exitCode;
    return err instanceof StoreUnavailableError ? EXIT_UNAVAILABLE : EXIT_BAD_INPUT;
  }
  process.stderr.write(`error: ${redactSecrets((err as Error)?.stack ?? String(err))}\n`);
  return 1;
}

export function program(): Command {
  const cmd = new Command('callgate').description(
    'Call admission (CPS and channel limits) and outbound pacing for SIP routing, on Redis or in memory.',
  );
  // set before the commands are added: they inherit it
  cmd.exitOverride();
  // commander's own messages may quote what was typed (an option's value): no credentials in them
  cmd.configureOutput({
    writeOut: (str) => process.stdout.write(redactSecrets(str)),
    writeErr: (str) => process.stderr.write(redactSecrets(str)),
  });
  cmd.version(packageVersion(), '-V, --version', 'print the version of callgate');
  replayCommand(cmd);
  serveCommand(cmd);
  inspectCommand(cmd);
  mergeTracesCommand(cmd);
  operateCommands(cmd);
  unbanCommand(cmd);
  kamailioCommand(cmd);
  return cmd;
}

/** The Redis URLs a command line and the environment name, remembered as secrets (redis.ts). */
function rememberArgvSecrets(argv: readonly string[]): void {
  rememberSecrets(process.env.REDIS_URL);
  argv.forEach((arg, i) => {
    if (arg === '--redis-url') rememberSecrets(argv[i + 1]);
    else if (arg.startsWith('--redis-url=')) rememberSecrets(arg.slice('--redis-url='.length));
    else if (arg.includes('://')) rememberSecrets(arg);
  });
}

export async function main(argv: string[]): Promise<number> {
  rememberArgvSecrets(argv);
  try {
    await program().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') return 0;
    if (typeof code === 'string' && code.startsWith('commander.')) return EXIT_BAD_INPUT; // commander printed it
    if (err instanceof CliArgumentError) return EXIT_BAD_INPUT;
    const exitCode = reportFailure(err);
    // cleaned up; what cannot be cancelled (a FIFO's open waiting for a reader) must not keep the
    // process alive
    if (err instanceof InterruptedError) process.exit(exitCode);
    return exitCode;
  }
}

const invokedDirectly =
  process.argv[1] !== undefined && fileURLToPath(import.meta.url) === realpathSync(process.argv[1]);
if (invokedDirectly) {
  process.exitCode = await main(process.argv.slice(2));
}
