/**
 * The corrupted-plan corpus (scripts/corrupt-plans.ts) against every executor: each plan the reader
 * or the validator rejects must be refused with a code, before any work, by `validate`, `simulate`,
 * `verify --plan` and `run --backend torch`, and nothing may hang (a bound per case). A fixed-size
 * seeded sample runs here; `npx tsx scripts/corrupt-plans.ts --out DIR` writes the full corpus.
 * Counts (tried / refused with a code / ran) are printed per executor.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'node:test';
import { corruptPlans } from '../../scripts/corrupt-plans.ts';
import { verifyPlan } from '../../src/cli/verify.ts';
import { FcpError } from '../../src/core/issues.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { readPlan } from '../../src/plan/io.ts';
import type { Plan } from '../../src/plan/types.ts';
import { validatePlan } from '../../src/plan/validate.ts';

/** Most milliseconds one library call may take on a corrupted plan (they refuse in microseconds). */
const CASE_MS = 5000;
/** Plans sampled for the CLI runs (each starts Node, and `run` may start Python). */
const CLI_SAMPLE = 3;

interface Tally {
  tried: number;
  refused: number;
  ran: number;
}
const tally = (): Tally => ({ tried: 0, refused: 0, ran: 0 });

const dir = mkdtempSync(join(tmpdir(), 'fcp-corpus-'));
const corpus = corruptPlans(7, 12).map((c, i) => {
  const file = join(dir, `${i}.json`);
  writeFileSync(file, c.bytes);
  let plan: Plan | undefined;
  let readCode: string | undefined;
  try {
    plan = readPlan(file);
  } catch (e) {
    assert.ok(e instanceof FcpError, `reader crashed on ${c.mutation}: ${String(e)}`);
    readCode = e.code;
  }
  return { ...c, file, plan, readCode };
});

/** Runs `f` and classifies it; fails the test on an uncoded error or a slow case. */
async function attempt(t: Tally, what: string, f: () => unknown): Promise<void> {
  t.tried++;
  const t0 = performance.now();
  try {
    await f();
    t.ran++;
  } catch (e) {
    assert.ok(e instanceof FcpError, `${what}: not a coded error: ${String(e)}`);
    t.refused++;
  }
  const ms = performance.now() - t0;
  assert.ok(ms < CASE_MS, `${what} took ${ms.toFixed(0)} ms`);
}

test('every corrupted plan is refused with a code by validate, simulate and verify (library)', async () => {
  const counts = { validate: tally(), simulate: tally(), verify: tally() };
  let invalid = 0;
  let stillValid = 0;
  for (const c of corpus) {
    const what = `${c.strategy}${c.world}: ${c.mutation}`;
    if (!c.plan) {
      // The reader refused it with a code: every executor reads through it, so all refuse.
      for (const k of Object.keys(counts) as (keyof typeof counts)[]) {
        counts[k].tried++;
        counts[k].refused++;
      }
      invalid++;
      continue;
    }
    const plan = c.plan;
    const t0 = performance.now();
    const { issues } = validatePlan(plan);
    assert.ok(performance.now() - t0 < CASE_MS, `validate took too long on ${what}`);
    if (issues.length === 0) {
      stillValid++; // a mutation that kept the plan valid (e.g. a duplicated sendAfter row)
      continue;
    }
    invalid++;
    counts.validate.tried++;
    counts.validate.refused++;
    await attempt(counts.simulate, `simulate ${what}`, () => simulatePlan(plan));
    await attempt(counts.verify, `verify ${what}`, () => verifyPlan(plan));
  }
  console.log(
    `corpus: ${corpus.length} plans, ${invalid} invalid, ${stillValid} still valid (skipped); per executor tried / refused with a code / ran: ${Object.entries(
      counts,
    )
      .map(([k, t]) => `${k} ${t.tried}/${t.refused}/${t.ran}`)
      .join(', ')}`,
  );
  assert.ok(invalid >= 100, `only ${invalid} invalid plans`);
  for (const [k, t] of Object.entries(counts)) assert.equal(t.ran, 0, `${k} ran ${t.ran} invalid plans`);
});

test('a sample of corrupted plans is refused with a code by the CLI (validate, simulate, verify --plan, run --backend torch)', () => {
  const invalid = corpus.filter((c) => !c.plan || validatePlan(c.plan).issues.length > 0);
  // Evenly spread over the corpus: reader refusals and validator refusals both appear.
  const sample = Array.from(
    { length: CLI_SAMPLE },
    (_, i) => invalid[Math.floor((i * invalid.length) / CLI_SAMPLE)]!,
  );
  const cli = join(import.meta.dirname, '../../src/cli.ts');
  const counts: Record<string, Tally> = {};
  for (const c of sample) {
    const runs: [string, string[]][] = [
      ['validate', ['validate', c.file]],
      ['simulate', ['simulate', c.file]],
      ['verify', ['verify', '--plan', c.file]],
      ['run-torch', ['run', '--backend', 'torch', '--nproc', String(c.world), c.file]],
    ];
    for (const [name, args] of runs) {
      counts[name] ??= tally();
      const t = counts[name];
      t.tried++;
      const r = spawnSync(process.execPath, ['--import', 'tsx', cli, ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.notEqual(r.signal, 'SIGTERM', `${name} hung on ${c.mutation}`);
      // validate reports a broken rule with exit 1 and lists it; everything else is one coded line, exit 2.
      const coded = /^fcp: error: [\w.]+/m.test(r.stderr) || (name === 'validate' && r.status === 1);
      if (coded && r.status !== 0) t.refused++;
      else t.ran++;
      assert.ok(
        coded && r.status !== 0,
        `${name} on ${c.mutation}: exit ${r.status}, ${r.stderr.slice(0, 300)}`,
      );
    }
  }
  console.log(
    `corpus CLI sample: tried / refused with a code / ran: ${Object.entries(counts)
      .map(([k, t]) => `${k} ${t.tried}/${t.refused}/${t.ran}`)
      .join(', ')}`,
  );
});
