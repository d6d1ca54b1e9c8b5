import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FcpError } from '../../src/core/issues.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { planFromJson, planToJson, readPlan, writePlan } from '../../src/plan/io.ts';
import { evenUserLayout } from '../../src/plan/layout.ts';
import { emptyPhase, Kind, type Plan } from '../../src/plan/types.ts';
import { resolveProblem } from '../../src/problem/problem.ts';

function tinyPlan(): Plan {
  const layout = evenUserLayout([5, 3], 2);
  const fwd = emptyPhase();
  fwd.transfers = {
    round: Int32Array.of(0),
    src: Int32Array.of(1),
    dst: Int32Array.of(0),
    kind: Uint8Array.of(Kind.kv),
    seq: Int32Array.of(0),
    start: Int32Array.of(4),
    length: Int32Array.of(1),
  };
  fwd.groupOfRound = Int32Array.of(0);
  return {
    format: 'fcp-plan/1',
    strategy: 'test',
    world: 2,
    mask: 'causal',
    model: { qHeads: 4, kvHeads: 2, headDim: 8, bytesPerElement: 4 },
    sequences: Int32Array.of(5, 3),
    userLayout: layout,
    homeLayout: layout,
    tasks: {
      rank: Int32Array.of(0),
      seq: Int32Array.of(0),
      qStart: Int32Array.of(0),
      qLength: Int32Array.of(4),
      kvStart: Int32Array.of(0),
      kvLength: Int32Array.of(4),
    },
    forward: fwd,
    backward: emptyPhase(),
    meta: { note: 'x' },
  };
}

test('a plan round-trips through JSON and gzip byte for byte', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-'));
  const plan = tinyPlan();
  const text = planToJson(plan);
  assert.match(text, /"kind":\["kv"\]/);
  for (const name of ['p.json', 'p.json.gz']) {
    writePlan(join(dir, name), plan);
    assert.equal(planToJson(readPlan(join(dir, name))), text);
  }
});

test('a phase running its pushes on a second stream keeps the flag through JSON', () => {
  const plan = tinyPlan();
  plan.backward.pushStream = true;
  const text = planToJson(plan);
  assert.match(text, /"pushStream":true/);
  const back = planFromJson(JSON.parse(text));
  assert.equal(back.backward.pushStream, true);
  assert.equal(back.forward.pushStream, undefined);
  assert.equal(planToJson(back), text);
});

test('readPlan rejects other format versions, bad JSON and missing tables with codes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-'));
  const json = JSON.parse(planToJson(tinyPlan()));
  const code = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      assert.ok(e instanceof FcpError);
      return e.code;
    }
    assert.fail('expected FcpError');
  };
  assert.equal(
    code(() => planFromJson({ ...json, format: 'fcp-plan/2' })),
    'plan.format',
  );
  assert.equal(
    code(() => planFromJson({ ...json, tasks: undefined })),
    'plan.schema',
  );
  assert.equal(
    code(() => planFromJson({ ...json, tasks: { ...json.tasks, qStart: [1.5] } })),
    'plan.schema',
  );
  assert.equal(
    code(() => planFromJson({ ...json, tasks: { ...json.tasks, qStart: [] } })),
    'plan.schema',
  );
  assert.equal(
    code(() => planFromJson({ ...json, backward: { ...json.backward, pushStream: 1 } })),
    'plan.schema',
  );
  writeFileSync(join(dir, 'bad.json'), '{"format": ');
  assert.equal(
    code(() => readPlan(join(dir, 'bad.json'))),
    'plan.json',
  );
  assert.equal(
    code(() => readPlan(join(dir, 'none.json'))),
    'io.read',
  );
});

test('writePlan leaves no partial file when the target is not writable', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fcp-'));
  const target = join(dir, 'missing-dir', 'plan.json');
  assert.throws(
    () => writePlan(target, tinyPlan()),
    (e: unknown) => e instanceof FcpError && e.code === 'io.write',
  );
  assert.equal(existsSync(target), false);
  assert.ok(readFileSync !== undefined);
});

/** JSON.stringify of a plan with its columns as plain arrays (kinds by name): what planToJson writes. */
function reference(plan: unknown): string {
  const names = ['in', 'kv', 'out', 'dkv'];
  return JSON.stringify(plan, (key, value: unknown) => {
    if (!ArrayBuffer.isView(value)) return value;
    const arr = value as unknown as ArrayLike<number>;
    return key === 'kind' ? Array.from(arr, (c) => names[c] ?? `?${c}`) : Array.from(arr);
  });
}

test('planToJson writes exactly what JSON.stringify writes with columns as arrays', () => {
  const plan = tinyPlan();
  assert.equal(planToJson(plan), reference(plan));
  // Every strategy's plans (columns of every typed-array kind the planners write, nested meta).
  for (const name of ['fcp', 'ring', 'bytescale', 'wlb', 'magi'])
    for (const world of [4, 16]) {
      const p = getPlanner(name).plan(
        resolveProblem({ batch: 'longtail', world, tokensPerRank: 2048, seed: 2 }),
        {},
      );
      assert.equal(planToJson(p), reference(p), `${name} ${world}`);
    }
  // A float column with values JSON writes as null, an empty column, negative zero, an unknown kind.
  const odd = {
    ...plan,
    meta: {
      f: Float64Array.of(1.5, Number.NaN, -0, Number.POSITIVE_INFINITY),
      e: new Int32Array(0),
      z: Float32Array.of(-0),
      v: new DataView(new ArrayBuffer(4)),
      nested: [Uint8Array.of(1, 2), { kind: Uint8Array.of(1) }],
    },
  };
  odd.forward = { ...odd.forward, transfers: { ...odd.forward.transfers, kind: Uint8Array.of(7) } };
  assert.equal(planToJson(odd as Plan), reference(odd));
  assert.match(planToJson(odd as Plan), /"f":\[1\.5,null,0,null\]/);
  // A string of the plan holding the column marker itself: written plainly, still the same bytes.
  const marked = { ...plan, meta: { note: '\u0001fcp-column\u0001', n: Int32Array.of(3) } };
  assert.equal(planToJson(marked), reference(marked));
});
