/**
 * Chained rounds for executors (docs/plan-format.md, `commGroupOfRound`): a phase whose groups are
 * split into comm groups runs exactly like the phase whose groups are those comm groups, with every
 * compute op waiting for the last comm group of the group it named. Executors that run groups one
 * after another per rank (the simulator, the CPU runtime) honour chaining by running this phase.
 *
 * Why that is the same execution: a rank runs its comm groups in order, each one concurrent
 * transfer call, which is what groups already mean; data received in a group is usable after the
 * group completes, i.e. after its last comm group; `sendAfter` pairs stay ordered since a transfer
 * in a later group lies in a later comm group than every comm group of the op's group.
 */
import type { Phase, Plan } from './types.ts';

/** The phase with its comm groups as groups (the phase itself when it has none). */
export function chainsAsGroups(ph: Phase): Phase {
  const c = ph.commGroupOfRound;
  if (c === undefined) return ph;
  const g = ph.groupOfRound;
  const groups = g.length > 0 ? g[g.length - 1]! + 1 : 0;
  // Last comm group of each group (a validated plan gives every group at least one round).
  const lastComm = new Int32Array(groups).fill(-1);
  for (let r = 0; r < g.length; r++) lastComm[g[r]!] = Math.max(lastComm[g[r]!]!, c[r]!);
  for (let k = 1; k < groups; k++) if (lastComm[k]! < lastComm[k - 1]!) lastComm[k] = lastComm[k - 1]!;
  const after = Int32Array.from(ph.compute.after, (a) => (a >= 0 && a < groups ? lastComm[a]! : a));
  const { commGroupOfRound: _dropped, ...rest } = ph;
  return { ...rest, groupOfRound: c, compute: { ...ph.compute, after } };
}

/** The plan with both phases' comm groups as groups (the plan itself when neither has any). */
export function planChainsAsGroups(plan: Plan): Plan {
  if (plan.forward.commGroupOfRound === undefined && plan.backward.commGroupOfRound === undefined)
    return plan;
  return { ...plan, forward: chainsAsGroups(plan.forward), backward: chainsAsGroups(plan.backward) };
}
