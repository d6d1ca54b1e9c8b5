/**
 * `fcp compare --sweep-from`: the configurations an earlier `--baselines best` comparison chose,
 * as the only candidates of each baseline's sweep besides its default. The headline uses it at
 * 4096 ranks, where the full sweep of docs/baselines.md "Tuning" does not fit the shared 2-core
 * machine (docs/baselines.md "At 1024 ranks and more").
 */
import { fail } from '../core/issues.ts';
import type { PlannerOptions } from '../planners/types.ts';

/**
 * The configurations each baseline won with in an earlier `--baselines best` comparison
 * (compare.json `doc`), at the largest world it ran, for `fcp compare --sweep-from`: at 4096 ranks
 * the headline restricts each baseline's sweep to its own winners at 1024 on the same batch and
 * setting (docs/baselines.md "At 1024 ranks and more"). The earlier run must have tuned its
 * baselines and used the same batch generator, cluster and network model (FcpError
 * `option.sweepFrom` otherwise: a winner on another workload is not this baseline's best here).
 */
export function sweepCandidatesFrom(
  doc: unknown,
  format: string,
  expect: { batch: string; cluster: string; network: string },
): Record<string, PlannerOptions[]> {
  const d = doc as Partial<{
    format: string;
    baselines: string;
    batch: string;
    cluster: { name?: string };
    network: string;
    rows: { strategy: string; world: number; config: PlannerOptions }[];
  }>;
  const bad = (why: string): never =>
    fail(
      'option.sweepFrom',
      `--sweep-from: ${why}; give the compare.json of a --baselines best run of the same batch and setting`,
      'sweepFrom',
    );
  if (d.format !== format || !Array.isArray(d.rows)) bad(`not a ${format} file`);
  if (d.baselines !== 'best') bad('its baselines were not tuned (baselines is not best)');
  const got = { batch: String(d.batch), cluster: String(d.cluster?.name), network: String(d.network) };
  for (const k of ['batch', 'cluster', 'network'] as const)
    if (got[k] !== expect[k]) bad(`its ${k} is ${got[k]}, this run's is ${expect[k]}`);
  const largest = new Map<string, number>();
  for (const r of d.rows!) largest.set(r.strategy, Math.max(largest.get(r.strategy) ?? 0, r.world));
  const out: Record<string, PlannerOptions[]> = {};
  for (const r of d.rows!) if (r.world === largest.get(r.strategy)) addCandidate(out, r.strategy, r.config);
  return out;
}

/** Appends `config` to `strategy`'s candidates in `out` unless it is there already. */
function addCandidate(out: Record<string, PlannerOptions[]>, strategy: string, config: PlannerOptions): void {
  const list = out[strategy] ?? [];
  out[strategy] = list;
  const key = JSON.stringify(config);
  if (!list.some((c) => JSON.stringify(c) === key)) list.push(config);
}

/**
 * The union of several {@link sweepCandidatesFrom} results (`--sweep-from A,B`): per baseline, each
 * configuration once, in the order the files and their rows give them. The headline passes the
 * direct-routing winners and the folder's own earlier ones, so that a narrowed sweep never drops a
 * configuration that won there before (docs/baselines.md "At 1024 ranks and more").
 */
export function unionCandidates(
  lists: readonly Record<string, readonly PlannerOptions[]>[],
): Record<string, PlannerOptions[]> {
  const out: Record<string, PlannerOptions[]> = {};
  for (const from of lists)
    for (const [strategy, configs] of Object.entries(from))
      for (const c of configs) addCandidate(out, strategy, c);
  return out;
}
