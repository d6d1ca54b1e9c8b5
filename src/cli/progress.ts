/**
 * Progress of long commands on stderr (docs/cli.md, "Progress"): once a job has run a second, a line
 * when each step starts, and
 * while a step runs a line at least every few seconds with the fraction done and an estimate of
 * the time left where the work reports its fraction (the CPU runtime, the float64 reference) or
 * the steps' relative costs are known (sweeps). On a terminal the line is rewritten in place; in a
 * pipe or a log every update is its own line, so a CI log shows the run is alive.
 *
 * Two sources keep the lines coming: a heartbeat timer (fires while the main thread waits, e.g. on
 * worker threads or child processes), and {@link LiveProgress.fraction}, which synchronous loops
 * call often and which prints only when the interval has passed (a timer cannot fire inside them).
 */
import type { Progress } from '../report/progress.ts';

/** Share of the work done before the time left is estimated (below it the rate is noise). */
const MIN_DONE = 0.02;

/** Progress of a job of known steps, with fractions inside a step. */
export interface LiveProgress extends Progress {
  /** Starts step `label` (the previous one is done). */
  step(label: string): void;
  /** Fraction in [0, 1] of the current step; cheap to call often (prints at most every interval). */
  fraction(f: number): void;
  /** Ends the progress (stops the heartbeat; on a terminal, ends the line). */
  done(): void;
}

/** Where progress goes: stderr or a test double. */
export interface ProgressStream {
  write(s: string): unknown;
  readonly isTTY?: boolean;
}

/** Options of {@link createLiveProgress}. */
export interface LiveProgressOptions {
  /** Prefix of every line, e.g. `fcp verify`. */
  name: string;
  /** Number of steps. */
  total: number;
  /** Relative cost of each step (length `total`), for an estimate of the whole job's time left. */
  weights?: readonly number[];
  /** Default process.stderr. */
  stream?: ProgressStream;
  /** Longest silence between two lines while a step runs, ms (default {@link PROGRESS_INTERVAL_MS}). */
  intervalMs?: number;
  /** Clock in ms (tests pass a fake one). Default performance.now. */
  now?: () => number;
  /** Run the heartbeat timer (default true; tests with a fake clock call `heartbeat` themselves). */
  timer?: boolean;
  /**
   * Nothing is printed before the job has run this long, ms (default {@link PROGRESS_DELAY_MS}):
   * a command that ends quickly prints no progress, and an error found at once is the only line.
   */
  startDelayMs?: number;
}

/** Default {@link LiveProgressOptions.startDelayMs}: progress is for work that takes seconds. */
export const PROGRESS_DELAY_MS = 1000;

/**
 * Longest silence between progress lines, ms. The acceptance bound is 5 s; the heartbeat checks
 * every quarter interval, so a loaded machine that delays timers still stays under it.
 */
export const PROGRESS_INTERVAL_MS = 3000;

/** A progress that prints nothing (--quiet, --json/--csv do not silence it; library use). */
export const quietProgress: LiveProgress = { step: () => {}, fraction: () => {}, done: () => {} };

/** Live progress objects not yet done, so that main() can stop their timers after an error. */
const live = new Set<{ stop(): void }>();

/** Stops every heartbeat still running (main() calls it when a command ends, however it ends). */
export function stopAllProgress(): void {
  for (const p of [...live]) p.stop();
}

/** `12.3 s`, `2 min 5 s`, `1 h 3 min`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, ms / 1000);
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - 60 * m)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** A progress with a heartbeat; also the testable core (`heartbeat` runs one timer tick). */
export function createLiveProgress(o: LiveProgressOptions): LiveProgress & { heartbeat(): void } {
  const stream = o.stream ?? process.stderr;
  const now = o.now ?? (() => performance.now());
  const interval = o.intervalMs ?? PROGRESS_INTERVAL_MS;
  const tty = stream.isTTY === true;
  const weights = o.weights && o.weights.length === o.total ? o.weights : undefined;
  const totalWeight = weights ? weights.reduce((a, b) => a + b, 0) : 0;
  const width = String(o.total).length;
  const t0 = now();
  let n = 0; // steps started
  let label = '';
  let stepStart = t0;
  let frac: number | undefined;
  let lastPrint = Number.NEGATIVE_INFINITY;
  let doneWeight = 0; // weights of the finished steps
  let ended = false;
  let timer: ReturnType<typeof setInterval> | undefined;

  /** Estimated ms left: from the weights when known, else from the step's own fraction. */
  const left = (t: number): number | undefined => {
    const f = frac ?? 0;
    if (weights && n >= 1) {
      const done = doneWeight + f * (weights[n - 1] ?? 0);
      // Too little done for a rate: no estimate rather than a wild one (a step whose fraction only
      // covers its last part, as compare's simulation after planning, read "450 h left" at 0%).
      if (done < MIN_DONE * totalWeight || t - t0 < 500) return undefined;
      return ((t - t0) / done) * (totalWeight - done);
    }
    if (frac !== undefined && f >= MIN_DONE) return ((t - stepStart) * (1 - f)) / f;
    return undefined;
  };

  const line = (t: number): string => {
    const el = ((t - t0) / 1000).toFixed(1).padStart(5);
    let s = `${o.name}: [${String(n).padStart(width)}/${o.total} ${el}s] ${label}`;
    const parts: string[] = [];
    if (frac !== undefined) parts.push(`${(100 * frac).toFixed(0)}%`);
    const l = left(t);
    if (l !== undefined) parts.push(`about ${formatDuration(l)} left${weights ? '' : ' in this step'}`);
    if (parts.length > 0) s += `: ${parts.join(', ')}`;
    return s;
  };

  const delay = o.startDelayMs ?? PROGRESS_DELAY_MS;
  const print = (t: number): void => {
    if (t - t0 < delay) return; // the heartbeat prints the current step once the delay is over
    lastPrint = t;
    stream.write(tty ? `\r\x1b[K${line(t)}` : `${line(t)}\n`);
  };

  const stop = (): void => {
    if (timer) clearInterval(timer);
    timer = undefined;
    live.delete(handle);
  };
  const handle = { stop };

  const p = {
    step(l: string): void {
      if (ended) return;
      const t = now();
      if (n >= 1 && weights) doneWeight += weights[n - 1] ?? 0;
      n++;
      label = l;
      stepStart = t;
      frac = undefined;
      print(t);
    },
    fraction(f: number): void {
      if (ended || !(f >= 0)) return;
      frac = Math.min(1, f);
      const t = now();
      if (t - lastPrint >= interval) print(t);
    },
    heartbeat(): void {
      if (ended || n === 0) return;
      const t = now();
      if (t - lastPrint >= interval) print(t);
    },
    done(): void {
      if (ended) return;
      ended = true;
      stop();
      if (tty && lastPrint > Number.NEGATIVE_INFINITY) stream.write('\n');
    },
  };
  if (o.timer !== false) {
    timer = setInterval(() => p.heartbeat(), Math.max(50, interval / 4));
    timer.unref(); // progress never keeps the process alive
    live.add(handle);
  }
  return p;
}
