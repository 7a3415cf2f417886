/**
 * Progress of a long replay or what-if (LONG_RUN calls or more): a cli-progress bar on a
 * terminal, else one final line (`replay: 120000 calls in 2.4 s, 50000 calls/s, the trace's check
 * and sort included`) so a log shows how long it took, all told: the report's own time counts the
 * decisions alone. Short runs print nothing.
 */
import cliProgress from 'cli-progress';

export const LONG_RUN = 50_000;

export interface Progress {
  /** (calls done, total calls): feed it to replay()'s / compare()'s onProgress. */
  readonly update: (done: number, total: number) => void;
  /** The run succeeded: stop the bar, or print the final line. */
  finish(): void;
  /** The run failed: stop the bar, print nothing more. */
  abort(): void;
}

export function progress(label: string, stream: NodeJS.WriteStream = process.stderr, enabled = true): Progress {
  const started = performance.now();
  const bar =
    enabled && stream.isTTY
      ? new cliProgress.SingleBar(
          { stream, format: `${label} [{bar}] {percentage}% {value}/{total} calls`, hideCursor: true },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  let barStarted = false;
  let last = { done: 0, total: 0 };
  return {
    update(done, total) {
      last = { done, total };
      if (!bar) return;
      if (!barStarted && total >= LONG_RUN) {
        bar.start(total, 0);
        barStarted = true;
      }
      if (barStarted) bar.update(done);
    },
    finish() {
      if (barStarted) bar!.stop();
      else if (enabled && !bar && last.total >= LONG_RUN) {
        const s = (performance.now() - started) / 1000;
        stream.write(
          `${label}: ${last.done} calls in ${s.toFixed(1)} s, ${Math.round(last.done / Math.max(s, 1e-9))} calls/s, the trace's check and sort included\n`,
        );
      }
    },
    abort() {
      if (barStarted) bar!.stop();
    },
  };
}
