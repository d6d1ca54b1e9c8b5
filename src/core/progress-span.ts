/**
 * Progress fractions of a part of a job: a step that reports its own fraction in [0, 1] while it
 * covers [lo, hi] of its caller's (planners' stages, the validator's report, the simulator's
 * check of the plan, a compare step's planning). Used wherever a reported fraction is passed on.
 */

/** A progress callback: the fraction in [0, 1] of the work done. */
export type OnProgress = (fraction: number) => void;

/** `on` seen from a part covering [lo, hi] of it; undefined when there is no `on`. */
export function progressSpan(on: OnProgress, lo: number, hi: number): OnProgress;
export function progressSpan(on: OnProgress | undefined, lo: number, hi: number): OnProgress | undefined;
export function progressSpan(on: OnProgress | undefined, lo: number, hi: number): OnProgress | undefined {
  return on && ((f: number) => on(lo + (hi - lo) * f));
}
