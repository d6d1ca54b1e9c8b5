/**
 * Two-hop K/V fan-out (`fanOut`, src/planners/fcp/transfers/fetch.ts) and the self-tuner that
 * chooses it (src/planners/fcp/index.ts): relayed plans stay valid and congestion-free, every
 * relay's sender received the range in an earlier group, relays move NIC bytes onto NVLink, the
 * tuner records its candidates and is deterministic, and the validator refuses a relay sent before
 * its range arrived.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FcpError, formatIssue } from '../../src/core/issues.ts';
import { planToJson } from '../../src/plan/io.ts';
import { Kind, type Phase, type Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { fcpPlanner, planFcp, tuneCandidates } from '../../src/planners/fcp/index.ts';
import type { FcpPlannerOptions, LoaderSwaps } from '../../src/planners/fcp/options.ts';
import type { Blocks } from '../../src/planners/fcp/placement/blocks.ts';
import { homeRuns } from '../../src/planners/fcp/placement/layout.ts';
import { chooseSenders, type KvEdges } from '../../src/planners/fcp/transfers/fetch.ts';
import { fetchRequests } from '../../src/planners/fcp/transfers/fetch-requests.ts';
import { reshufflePieces } from '../../src/planners/fcp/transfers/reshuffle.ts';
import { blockSizeCandidates } from '../../src/planners/fcp/tune-candidates.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

const NODE = 8;
const node = (r: number): number => Math.floor(r / NODE);

/** A multi-node long-tailed problem (3 nodes of 8 ranks). */
const problem = (seed: number, mask: 'causal' | 'full' = 'causal') =>
  resolveProblem({ batch: 'longtail', world: 24, tokensPerRank: 4096, seed, mask });

/** FCP through the registered planner (mode (b) included), small blocks so that ranges repeat. */
const planWith = (p: ReturnType<typeof problem>, o: FcpPlannerOptions): Plan =>
  fcpPlanner.plan(p, { blockSize: 512, ...o });

/**
 * `kv` transfers whose sender is neither a home nor the user rank of the range: relays. For each,
 * the earliest group in which a `kv` transfer brought a covering range to its sender (-1: none).
 */
function relays(plan: Plan, phase: Phase): { row: number; fedIn: number }[] {
  const holds = (r: number, s: number, a: number, b: number): boolean => {
    for (const l of [plan.homeLayout, plan.userLayout])
      for (let i = 0; i < l.rank.length; i++)
        if (l.rank[i] === r && l.seq[i] === s && l.start[i]! <= a && l.start[i]! + l.length[i]! >= b)
          return true;
    return false;
  };
  const t = phase.transfers;
  const out: { row: number; fedIn: number }[] = [];
  for (let i = 0; i < t.src.length; i++) {
    if (t.kind[i] !== Kind.kv) continue;
    const s = t.seq[i]!;
    const a = t.start[i]!;
    const b = a + t.length[i]!;
    if (holds(t.src[i]!, s, a, b)) continue;
    let fedIn = -1;
    for (let j = 0; j < t.src.length; j++)
      if (
        t.kind[j] === Kind.kv &&
        t.dst[j] === t.src[i] &&
        t.seq[j] === s &&
        t.start[j]! <= a &&
        t.start[j]! + t.length[j]! >= b
      ) {
        const g = phase.groupOfRound[t.round[j]!]!;
        if (fedIn < 0 || g < fedIn) fedIn = g;
      }
    out.push({ row: i, fedIn });
  }
  return out;
}

/** Bytes' worth of `kv` tokens that cross a node boundary. */
function nicKvTokens(phase: Phase): number {
  const t = phase.transfers;
  let n = 0;
  for (let i = 0; i < t.src.length; i++)
    if (t.kind[i] === Kind.kv && node(t.src[i]!) !== node(t.dst[i]!)) n += t.length[i]!;
  return n;
}

test('forced relays: valid, congestion 1, each relay inside a node and after its feed, fewer NIC bytes', () => {
  let relayed = 0;
  for (const seed of [1, 2, 3])
    for (const mask of ['causal', 'full'] as const)
      for (const loaderLayout of [false, true]) {
        const p = problem(seed, mask);
        const direct = planWith(p, { loaderLayout });
        // The same loader layout as the tuned direct plan (its swaps are chosen by its estimate).
        const loaderSwaps = (direct.meta?.loaderLayout as { swaps?: LoaderSwaps } | undefined)?.swaps;
        // And its group size (mode (b) also tries groups of 8 rounds): NIC bytes of hand-overs
        // depend on the groups, so relays are compared with direct fetches in the same groups.
        const tuning = direct.meta?.tuning as
          | { candidates: { coalesce: number; nicSwaps?: boolean }[]; chosen: number }
          | undefined;
        const coalesce = tuning ? tuning.candidates[tuning.chosen]!.coalesce : undefined;
        // And its placement: mode (a)'s tuner may keep its NIC-swap variant (tuner.ts).
        const nicSwaps = tuning ? tuning.candidates[tuning.chosen]!.nicSwaps === true : false;
        const plan = planWith(p, {
          loaderLayout,
          fanOut: true,
          tune: false,
          ...(loaderSwaps ? { loaderSwaps } : {}),
          ...(coalesce !== undefined ? { coalesce } : {}),
          ...(nicSwaps ? { nicSwaps } : {}),
        });
        const { issues, report } = validatePlan(plan);
        const label = `seed ${seed} ${mask} ${loaderLayout ? '(b)' : '(a)'}`;
        assert.deepEqual(issues.slice(0, 3).map(formatIssue), [], label);
        assert.equal(report.attendedPairs, report.expectedPairs, label);
        // The backward fetches directly (backward.ts): exactly Δ kv rounds there.
        assert.equal(report.backward.kvRounds, report.backward.kvDirectDelta, label);
        for (const dir of ['forward', 'backward'] as const) {
          const ph = plan[dir];
          assert.ok(report[dir].congestion <= 1, `${label} ${dir}: congestion ${report[dir].congestion}`);
          for (const { row, fedIn } of relays(plan, ph)) {
            const t = ph.transfers;
            // (Forwarding trees, forward-tree.ts, may forward across nodes what crossed anyway.)
            assert.ok(fedIn >= 0, `${label}: relay sender never received the range`);
            assert.ok(
              ph.groupOfRound[t.round[row]!]! > fedIn,
              `${label}: relay sent before its feed arrived`,
            );
            relayed++;
          }
          assert.ok(nicKvTokens(ph) <= nicKvTokens(direct[dir]), `${label} ${dir}: relays added NIC bytes`);
        }
      }
  assert.ok(relayed > 0, 'some K/V was relayed');
});

test('a range across several home runs is relayed once per message of its feed', () => {
  // Nodes of two ranks. Sequence 0 (400 tokens) is rank 0's user row, homed in runs of 100 on
  // ranks 0-3; sequences 1-3 stay on their user ranks 1-3. Ranks 2 and 3 on node 1 both need
  // [0, 200) of it (messages cut at 200 tokens), which lies in two home runs on node 0.
  const blocks = {
    seqBlocks: Int32Array.from([0, 4, 5, 6, 7]),
    start: Int32Array.from([0, 100, 200, 300, 0, 0, 0]),
    length: Int32Array.from([100, 100, 100, 100, 400, 400, 400]),
  } as unknown as Blocks;
  const runs = homeRuns(blocks, Int32Array.from([0, 1, 2, 3, 1, 2, 3]), 4);
  const userRows = {
    off: Int32Array.from([0, 1, 2, 3, 4]),
    rank: Int32Array.from([0, 1, 2, 3]),
    start: new Int32Array(4),
    length: Int32Array.from([400, 400, 400, 400]),
  };
  const seqs = Int32Array.from([400, 400, 400, 400]);
  const req = fetchRequests(runs, userRows, seqs, 'causal', 200);
  const pieces = reshufflePieces(runs, userRows, 0);
  const nic = (e: KvEdges): number => {
    let n = 0;
    for (let i = 0; i < e.src.length; i++) if (e.src[i]! >> 1 !== e.dst[i]! >> 1) n += e.length[i]!;
    return n;
  };
  const direct = chooseSenders(req, runs, pieces, 4, true, 0, 2, false);
  const relayed = chooseSenders(req, runs, pieces, 4, true, 0, 2, true);
  const rel = Array.from(relayed.relay.keys()).filter((e) => relayed.relay[e]! >= 0);
  assert.ok(rel.length > 0, 'the range is relayed');
  for (const e of rel) {
    const f = relayed.relay[e]!;
    assert.equal(relayed.src[e], relayed.dst[f], 'relayed by the rank its feed message reached');
    assert.equal(relayed.src[e]! >> 1, relayed.dst[e]! >> 1, 'inside the node');
    assert.equal(relayed.seq[e], relayed.seq[f]);
    assert.equal(relayed.start[e], relayed.start[f]);
    assert.ok(relayed.length[e]! <= relayed.length[f]!);
  }
  // Every relayed token crossed once for both receivers.
  assert.equal(nic(direct), 400);
  assert.equal(nic(relayed), 200);
});

test('the validator refuses a relay moved into its feed round', () => {
  const plan = planWith(problem(2), { loaderLayout: true, fanOut: true, tune: false });
  const rel = relays(plan, plan.forward).filter((r) => r.fedIn >= 0);
  assert.ok(rel.length > 0);
  const t = plan.forward.transfers;
  // Move one relay into round 0 (before anything arrived); keep rows sorted by round.
  const row = rel[0]!.row;
  const broken = structuredClone(plan);
  const bt = broken.forward.transfers;
  const cols = ['round', 'src', 'dst', 'kind', 'seq', 'start', 'length'] as const;
  const order = Array.from(t.round.keys()).sort((a, b) => (a === row ? -1 : b === row ? 1 : a - b));
  for (const c of cols) {
    const src = Array.from(t[c]);
    for (let i = 0; i < order.length; i++) (bt[c] as Int32Array | Uint8Array)[i] = src[order[i]!]!;
  }
  bt.round[0] = 0;
  assert.ok(
    validatePlan(broken).issues.some((x) => x.code === 'plan.rule3.senderMissing'),
    'a relay before its data arrived is refused (rule 3)',
  );
});

test('self-tuning: candidates by budget, choice recorded, the least estimate wins, same input same bytes', () => {
  assert.equal(tuneCandidates(16, 200), 4);
  assert.equal(tuneCandidates(128, 200), 2);
  assert.equal(tuneCandidates(256, 200), 1);
  assert.equal(tuneCandidates(4096, 200), 1);
  assert.equal(tuneCandidates(16, 0), 1);
  const p = problem(3);
  const a = planFcp(p, { fanOut: true }).plan;
  const b = planFcp(p, { fanOut: true }).plan;
  assert.equal(planToJson(a), planToJson(b));
  const tuning = a.meta?.tuning as { candidates: { estimateMs: number }[]; chosen: number };
  // Four phase candidates for each block size the budget buys with them (tune-candidates.ts).
  assert.equal(tuning.candidates.length, 4 * blockSizeCandidates(p.world, 200, 4));
  const least = Math.min(...tuning.candidates.map((c) => c.estimateMs));
  assert.equal(tuning.candidates[tuning.chosen]!.estimateMs, least);
  assert.deepEqual(validatePlan(a).issues, []);
  // Without fanOut the tuner tries direct candidates (test/planners/fcp-tune.test.ts), then, across
  // nodes, the chosen one's relay variant and its NIC-swap variant, last (tuner.ts).
  const plain = planFcp(p).plan;
  const plainTuning = plain.meta?.tuning as
    | {
        candidates: { fanOut: boolean; blockSize?: number; coalesce: number; nicSwaps?: boolean }[];
        chosen: number;
      }
    | undefined;
  assert.ok(plainTuning !== undefined);
  assert.ok(plainTuning.candidates.at(-1)!.nicSwaps, 'the NIC-swap variant is planned last');
  const cs = plainTuning.candidates.slice(0, -1);
  assert.ok(cs.every((c) => c.nicSwaps !== true));
  assert.ok(cs.slice(0, -1).every((c) => !c.fanOut));
  assert.ok(cs.at(-1)!.fanOut, 'the relay variant is planned before it');
  // (Same-slot forwarding, same-slot.ts, hands sends over within their rounds: kv rounds stay Δ.)
  const r = validatePlan(plain).report;
  if (!plainTuning.candidates[plainTuning.chosen]!.fanOut)
    assert.equal(r.forward.kvRounds, r.forward.kvDirectDelta);
});

test('bad planBudgetMs and fanOut are option errors', () => {
  for (const [opts, code] of [
    [{ fanOut: true, planBudgetMs: -1 }, 'option.planBudgetMs'],
    [{ fanOut: 'yes' }, 'option.fanOut'],
    [{ tune: 1 }, 'option.tune'],
  ] as const) {
    assert.throws(
      () => planFcp(problem(1), opts as never),
      (e: unknown) => e instanceof FcpError && e.issues.some((i) => i.code === code),
      code,
    );
  }
});
