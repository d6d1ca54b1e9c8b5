/**
 * Progress of long commands on stderr: a cli-progress bar when stderr is a terminal, one plain line
 * per step otherwise (CI logs, pipes), so that stdout stays clean for results.
 */
import cliProgress from 'cli-progress';

/** Reports steps of a job whose number of steps is known up front. */
export interface Progress {
  /** Starts step `label` (the previous one is done). */
  step(label: string): void;
  /** Ends the bar (or prints nothing more). */
  done(): void;
}

/** A progress reporter that prints nothing (library use, tests). */
export const silentProgress: Progress = { step: () => {}, done: () => {} };

/** Progress on `stream` (default stderr) for `total` steps, prefixed by `name`. */
export function createProgress(
  total: number,
  name: string,
  stream: NodeJS.WriteStream = process.stderr,
): Progress {
  const t0 = performance.now();
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        stream,
        format: `${name} [{bar}] {value}/{total} {elapsed}s {step}`,
        hideCursor: true,
        clearOnComplete: false,
        barsize: 24,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0, { step: '', elapsed: '0.0' });
    let n = 0;
    return {
      step(label) {
        bar.update(n++, { step: label, elapsed: ((performance.now() - t0) / 1000).toFixed(1) });
      },
      done() {
        bar.update(total, { step: 'done', elapsed: ((performance.now() - t0) / 1000).toFixed(1) });
        bar.stop();
      },
    };
  }
  let n = 0;
  const width = String(total).length;
  return {
    step(label) {
      n++;
      const t = ((performance.now() - t0) / 1000).toFixed(1).padStart(5);
      stream.write(`${name}: [${String(n).padStart(width)}/${total} ${t}s] ${label}\n`);
    },
    done() {},
  };
}
