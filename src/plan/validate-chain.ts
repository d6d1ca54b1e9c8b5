/**
 * Chained rounds (`Phase.commGroupOfRound`, docs/plan-format.md): one entry per round, starting at
 * 0 and never decreasing by more than 0 or growing by more than 1 (comm groups are numbered
 * 0..K-1 in execution order), and each comm group inside one group (a group's comm groups run one
 * after another, so a comm group spanning two groups would have no place in that order). Plans
 * without the field are unchanged.
 */
import type { Plan } from './types.ts';
import type { IssueSink } from './validate-issues.ts';

/** Checks both phases' comm groups; returns false when one is broken (code `plan.rule5.chain`). */
export function checkChains(plan: Plan, sink: IssueSink): boolean {
  let ok = true;
  for (const name of ['forward', 'backward'] as const) {
    const ph = plan[name];
    const c = ph.commGroupOfRound;
    if (c === undefined) continue;
    const g = ph.groupOfRound;
    const path = `${name}.commGroupOfRound`;
    if (c.length !== g.length) {
      sink.add('plan.rule5.chain', `${path} has ${c.length} entries for ${g.length} rounds`, path);
      ok = false;
      continue;
    }
    for (let r = 0; r < c.length; r++) {
      const prev = r === 0 ? -1 : c[r - 1]!;
      const step = c[r]! - prev;
      if (r === 0 ? c[r] !== 0 : step !== 0 && step !== 1) {
        sink.add(
          'plan.rule5.chain',
          `${path}[${r}] is ${c[r]} after ${prev}: comm groups must be numbered 0, 1, 2, ... in round order`,
          path,
          r,
        );
        ok = false;
      } else if (r > 0 && step === 0 && g[r] !== g[r - 1]) {
        sink.add(
          'plan.rule5.chain',
          `comm group ${c[r]} holds rounds of groups ${g[r - 1]} and ${g[r]}: a comm group must lie in one group`,
          path,
          r,
        );
        ok = false;
      }
    }
  }
  return ok;
}
