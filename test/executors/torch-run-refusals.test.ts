/**
 * `fcp run` refuses bad input up front with one coded line and exit 2, before reading the plan
 * (options, output target) or before starting anything (an invalid plan): issue 11 item 2 and its
 * "unclear messages" of `fcp run`. The Python interpreter is set to one that cannot start
 * (`--python /nonexistent`) wherever the refusal must come first: a run that got as far as looking
 * for Python would answer `run.noTorch` instead.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { planToJson, writePlan } from '../../src/plan/io.ts';
import type { FcpPlannerOptions } from '../../src/planners/fcp/options.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { cli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fcp-run-refusals-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Expects exit 2 and exactly one line `fcp: error: CODE...` on stderr, nothing on stdout. */
async function refused(args: string[], code: string): Promise<string> {
  const r = await cli(args);
  assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}\n${r.err}${r.out}`);
  const lines = r.err.trimEnd().split('\n');
  assert.equal(lines.length, 1, `${args.join(' ')}: more than one line:\n${r.err}`);
  assert.ok(lines[0]!.startsWith(`fcp: error: ${code}`), `${args.join(' ')}: ${lines[0]} is not ${code}`);
  assert.equal(r.out, '');
  return lines[0]!;
}

// phaseSwaps 0: a plan with `kv` and `dkv` transfers to break (mode (a)'s per-phase exchanges
// may leave every sequence of so small a batch whole on one rank).
const options: FcpPlannerOptions = { blockSize: 16, coalesce: 2, phaseSwaps: 0 };
const plan = getPlanner('fcp').plan(
  resolveProblem({ batch: [70, 9, 33, 120, 4, 60, 1, 47], world: 4, model: SMALL_MODEL }),
  options,
);
const good = join(dir, 'good.json');
writePlan(good, plan);

type Columns = Record<string, (number | string)[]>;
interface PlanJson {
  forward: { transfers: Columns; sendAfter: Columns };
  backward: { transfers: Columns; sendAfter: Columns };
}
const fresh = (): PlanJson => JSON.parse(planToJson(plan)) as PlanJson;

/** Drops transfer row `i` of a phase, renumbering the sendAfter pairs that refer to later rows. */
function dropTransfer(p: PlanJson, phase: 'forward' | 'backward', i: number): void {
  const ph = p[phase];
  for (const c of Object.values(ph.transfers)) c.splice(i, 1);
  const sa = ph.sendAfter;
  const keep = sa.transfer!.map((t, k) => (t === i ? -1 : k)).filter((k) => k >= 0);
  sa.compute = keep.map((k) => sa.compute![k]!);
  sa.transfer = keep.map((k) => sa.transfer![k]!).map((t) => ((t as number) > i ? (t as number) - 1 : t));
}

function broken(name: string, edit: (p: PlanJson) => void): string {
  const p = fresh();
  edit(p);
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(p));
  return path;
}

const firstOfKind = (p: PlanJson, phase: 'forward' | 'backward', kind: string): number => {
  const i = p[phase].transfers.kind!.indexOf(kind);
  assert.ok(i >= 0, `the plan has a ${phase} ${kind} transfer`);
  return i;
};

describe('fcp run refuses an invalid plan before starting anything', () => {
  const cases: [string, (p: PlanJson) => void][] = [
    ['drop a dkv transfer', (p) => dropTransfer(p, 'backward', firstOfKind(p, 'backward', 'dkv'))],
    ['drop a kv transfer', (p) => dropTransfer(p, 'forward', firstOfKind(p, 'forward', 'kv'))],
    ['drop an out transfer', (p) => dropTransfer(p, 'forward', firstOfKind(p, 'forward', 'out'))],
    [
      'drop a sendAfter',
      (p) => {
        const sa = p.backward.sendAfter;
        const k = sa.transfer!.findIndex((t) => p.backward.transfers.kind![t as number] === 'dkv');
        sa.transfer!.splice(k, 1);
        sa.compute!.splice(k, 1);
      },
    ],
    ['a transfer with src -1', (p) => (p.forward.transfers.src![0] = -1)],
    ['a transfer with dst = world', (p) => (p.forward.transfers.dst![0] = 4)],
  ];
  for (const [name, edit] of cases)
    it(`${name}: a plan.* code, exit 2, no process started`, async () => {
      const path = broken(name.replaceAll(' ', '-'), edit);
      const line = await refused(['run', '--backend', 'torch', '--python', '/nonexistent', path], 'plan.');
      assert.match(line, /nothing was run/);
      // the in-process runtimes refuse the same plan too
      await refused(['run', '--backend', 'cpu', path], 'plan.');
      await refused(['run', '--backend', 'sim', path], 'plan.');
    });

  it('--print-torchrun refuses an invalid plan too', async () => {
    const path = broken('print', (p) => (p.forward.transfers.src![0] = -1));
    await refused(['run', '--print-torchrun', path], 'plan.structure');
  });
});

describe('fcp run options are checked up front', () => {
  const cases: [string[], string][] = [
    [['--print-torchrun', '--nnodes', '0'], 'option.nnodes'],
    [['--print-torchrun', '--nproc-per-node', '0'], 'option.nprocPerNode'],
    [['--print-torchrun', '--master-port', '99999'], 'option.masterPort'],
    [['--print-torchrun', '--master-port', '0'], 'option.masterPort'],
    [['--timeout', '0.2'], 'option.timeout'],
    [['--timeout', '1e12'], 'option.timeout'],
    [['--backend', 'sim', '--timeout', '0'], 'option.timeout'],
    [['--iters', '0'], 'option.iters'],
    [['--iters', '1000000000'], 'option.iters'],
    [['--nproc', '0'], 'option.nproc'],
    [['--peak-tflops', '-1'], 'option.peakTflops'],
    [['--max-error', '-1'], 'option.maxError'],
    [['--backend', 'sim', '--check'], 'run.check'],
    [['--backend', 'gpu'], 'option.backend'],
  ];
  for (const [args, code] of cases)
    it(`${args.join(' ')} -> ${code}`, async () => {
      const line = await refused(['run', ...args, '--python', '/nonexistent', good], code);
      assert.doesNotMatch(line, /NaN|Infinity|within 0 s/);
    });

  it('-o targets are checked before the run: a folder, a missing folder, a non-regular file', async () => {
    const folder = join(dir, 'afolder');
    mkdirSync(folder, { recursive: true });
    await refused(['run', '--python', '/nonexistent', '-o', folder, good], 'option.output');
    await refused(
      ['run', '--python', '/nonexistent', '-o', join(dir, 'missing', 'r.json'), good],
      'option.output',
    );
    await refused(['run', '--python', '/nonexistent', '-o', '/dev/null', good], 'option.output');
  });
});

describe('fcp run --backend sim', () => {
  it('prints simulated numbers and no [object Object]', async () => {
    const out = join(dir, 'sim.json');
    const r = await cli(['run', '--backend', 'sim', '-o', out, good]);
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(r.out, /object Object/);
    assert.match(r.out, /simulated/);
    assert.ok(JSON.parse(readFileSync(out, 'utf8')));
  });
});
