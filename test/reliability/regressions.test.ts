/**
 * Regression tests of the reliability issue (TypeScript part): each case failed before its fix
 * (simulate ran invalid plans, serve wrapped lengths and dropped fields, --out deleted folders,
 * writes replaced links and FIFOs, /proc targets spun, limits were missing, the report overflowed the
 * stack, commander's errors had no code, binary batch files echoed their bytes).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'node:test';
import { parseBatchText, readBatchFile } from '../../src/batch/read.ts';
import { handleServeLine } from '../../src/cli/serve.ts';
import { checkOutputFolder, writeOutputFile } from '../../src/core/outputs.ts';
import { simulatePlan } from '../../src/executors/sim/index.ts';
import { getPlanner } from '../../src/experiments/strategies.ts';
import { SMALL_MODEL } from '../../src/model/attention.ts';
import { writePlan } from '../../src/plan/io.ts';
import { validatePlan } from '../../src/plan/validate.ts';
import { resolveProblem } from '../../src/problem/problem.ts';
import { imbalanceSpec } from '../../src/report/charts/imbalance.ts';
import { mfuSpec } from '../../src/report/charts/mfu.ts';
import { codeOf } from '../helpers/errors.ts';
import { run } from '../report/fixtures.ts';

const fcp = (args: string[], cwd = process.cwd()) =>
  spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, '../../src/cli.ts'), ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
  });
const codeLine = (stderr: string): string | undefined => /^fcp: error: ([\w.]+)/.exec(stderr)?.[1];

const small = () =>
  getPlanner('fcp').plan(resolveProblem({ batch: [90, 40], world: 2, model: SMALL_MODEL }), {
    blockSize: 16,
  });

test('simulate refuses an invalid plan with the validator code (item 3)', () => {
  const p = small();
  p.forward.compute.taskOffsets = Int32Array.from(p.forward.compute.taskOffsets).reverse();
  assert.equal(
    codeOf(() => simulatePlan(p)),
    'plan.structure.offsets',
  );
  const q = small();
  q.forward.transfers.src[0] = 7;
  assert.equal(
    codeOf(() => simulatePlan(q)),
    'plan.structure.rank',
  );
});

test('the validator bounds world, model and sequences (item 9)', () => {
  const codes = (f: (p: ReturnType<typeof small>) => void): string[] => {
    const p = small();
    f(p);
    return validatePlan(p).issues.map((i) => i.code);
  };
  assert.ok(codes((p) => Object.assign(p, { world: 1_000_000 })).includes('plan.limit.world'));
  assert.ok(codes((p) => Object.assign(p, { world: 2147483647 })).includes('plan.limit.world'));
  assert.ok(
    codes((p) => Object.assign(p, { model: { ...p.model, qHeads: 5, kvHeads: 2 } })).includes(
      'plan.structure.model',
    ),
  );
  assert.deepEqual(
    codes(() => {}),
    [],
  );
});

test('limits are checked up front with limit.* codes (item 8)', () => {
  assert.equal(
    codeOf(() => resolveProblem({ batch: [1e9], world: 8 })),
    'limit.sequenceLength',
  );
  assert.equal(
    codeOf(() => resolveProblem({ batch: [2147483647], world: 8 })),
    'limit.sequenceLength',
  );
  assert.equal(
    codeOf(() => resolveProblem({ tokensPerRank: 2e9 })),
    'limit.tokensPerRank',
  );
  assert.equal(
    codeOf(() => resolveProblem({ world: 65536, tokensPerRank: 1024 })),
    'limit.world',
  );
  const p = resolveProblem({ world: 8 });
  assert.equal(
    codeOf(() => getPlanner('fcp').plan(p, { blockSize: 1 })),
    'limit.blocksPerSequence',
  );
  assert.equal(
    codeOf(() => getPlanner('fcp').plan(p, { tile: 1 })),
    'limit.blocksPerSequence',
  );
  assert.equal(
    codeOf(() => getPlanner('magi').plan(p, { chunkSize: 1 })),
    'limit.blocksPerSequence',
  );
});

test('token counts and step counts of planner options are bounded above (session 40)', () => {
  // These planned as usual before (a tile or chunk longer than the batch cuts nothing, and the
  // step loops end once no step helps), so a typo such as 1e300 went unnoticed.
  const p = resolveProblem({ world: 8, tokensPerRank: 1024 });
  const cases: [string, Record<string, unknown>, string][] = [
    ['fcp', { tile: 1e300 }, 'limit.pieceSize'],
    ['fcp', { minTile: 2 ** 29 }, 'limit.pieceSize'],
    ['fcp', { minBlockSize: 1e300 }, 'limit.pieceSize'],
    ['fcp', { blockSize: 2 ** 29 }, 'limit.pieceSize'],
    ['fcp', { refineSteps: 1e300 }, 'limit.steps'],
    ['fcp', { phaseSwaps: 2 ** 21 }, 'limit.steps'],
    ['magi', { chunkSize: 1e300 }, 'limit.pieceSize'],
    ['ring', { ringVariant: 'a2a+p2p', a2aDegree: 4, a2aSplitTokens: 1e300 }, 'limit.pieceSize'],
  ];
  for (const [s, o, code] of cases)
    assert.equal(
      codeOf(() => getPlanner(s).plan(p, o)),
      code,
      `${s} ${JSON.stringify(o)}`,
    );
  // At the bounds themselves they still plan.
  const atBounds: Record<string, unknown> = { tile: 2 ** 28, phaseSwaps: 2 ** 20 };
  assert.doesNotThrow(() => getPlanner('fcp').plan(p, atBounds));
  assert.doesNotThrow(() => getPlanner('magi').plan(p, { chunkSize: 2 ** 28 }));
});

test('serve validates requests like CLI options (items 4, 12)', () => {
  const code = (req: unknown): string =>
    JSON.parse(handleServeLine(JSON.stringify(req))!).error?.code ?? 'ok';
  assert.equal(code({ batch: [4294967301], world: 2 }), 'limit.sequenceLength');
  assert.equal(code({ batch: [3000000000], world: 2 }), 'limit.sequenceLength');
  assert.equal(code({ worlds: 4 }), 'serve.field.unknown');
  assert.equal(code({ options: { blokSize: 64 } }), 'serve.field.unknown');
  assert.equal(code({ batch: null }), 'serve.field.type');
  assert.equal(code({ model: null }), 'serve.field.type');
  assert.equal(code({ output: 5 }), 'serve.field.type');
  assert.equal(code({ op: 'ping' }), 'ok');
});

test('serve ends quietly when its client closes stdout (EPIPE, item 12)', async () => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, '../../src/cli.ts'), 'serve'],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let err = '';
  child.stderr.on('data', (b) => {
    err += b;
  });
  child.stdout.destroy(); // the client stops reading
  child.stdin.write('{"batch":[100],"world":2}\n{"batch":[100],"world":2}\n');
  child.stdin.end();
  const rc = await new Promise<number | null>((r) => child.on('close', r));
  assert.equal(rc, 0, err);
  assert.doesNotMatch(err, /Error|at /);
});

test('output folders: never another folder, the cwd, or a file; /proc fails at once (items 6, 10)', () => {
  const d = mkdtempSync(join(tmpdir(), 'fcp-out-'));
  const kind = { option: '--out', what: 'test output', isOwn: () => false };
  mkdirSync(join(d, 'user'));
  writeFileSync(join(d, 'user', 'keep.txt'), 'mine');
  writeFileSync(join(d, 'file.txt'), 'mine');
  assert.equal(
    codeOf(() => checkOutputFolder(join(d, 'user'), kind)),
    'io.write',
  );
  assert.equal(
    codeOf(() => checkOutputFolder(join(d, 'file.txt'), kind)),
    'io.write',
  );
  assert.equal(
    codeOf(() => checkOutputFolder(process.cwd(), kind)),
    'io.write',
  );
  const t0 = performance.now();
  assert.equal(
    codeOf(() => checkOutputFolder('/proc/fcp-x/y', kind)),
    'io.write',
  );
  assert.ok(performance.now() - t0 < 2000);
  assert.equal(readFileSync(join(d, 'user', 'keep.txt'), 'utf8'), 'mine');
  assert.equal(checkOutputFolder(join(d, 'new', 'deeper'), kind), join(d, 'new', 'deeper'));
});

test('compare --out and verify --dump refuse a user folder before any work (items 6, 10)', () => {
  const d = mkdtempSync(join(tmpdir(), 'fcp-cmp-'));
  writeFileSync(join(d, 'keep.txt'), 'mine');
  const r = fcp(['compare', '--strategies', 'fcp', '--world', '8', '--out', d]);
  assert.equal(r.status, 2);
  assert.equal(codeLine(r.stderr), 'io.write');
  assert.equal(readFileSync(join(d, 'keep.txt'), 'utf8'), 'mine');
  const v = fcp(['verify', '--world', '2', '--tokens-per-rank', '64', '--dump', '/proc/fcp-x']);
  assert.equal(v.status, 2);
  assert.equal(codeLine(v.stderr), 'io.write');
});

test('atomic writes go through symlinks and to FIFOs and devices (item 7)', () => {
  const d = mkdtempSync(join(tmpdir(), 'fcp-w-'));
  writeFileSync(join(d, 'target.json'), 'old');
  symlinkSync('target.json', join(d, 'link.json'));
  writeOutputFile(join(d, 'link.json'), 'new');
  assert.ok(lstatSync(join(d, 'link.json')).isSymbolicLink());
  assert.equal(readFileSync(join(d, 'target.json'), 'utf8'), 'new');
  writeOutputFile('/dev/null', 'x');
  assert.ok(lstatSync('/dev/null').isCharacterDevice());
  assert.equal(
    codeOf(() => writeOutputFile(d, 'x')),
    'io.write',
  );
  assert.equal(
    codeOf(() => writeOutputFile('/proc/fcp-x', 'x')),
    'io.write',
  );
});

test('report charts of 1000+ runs have bounded sort lists (item 13)', () => {
  const runs = Array.from({ length: 1500 }, (_, i) => run(i % 2 ? 'ring' : 'fcp', i % 5));
  const sortOf = (spec: object): unknown[] =>
    (spec as { encoding: { x: { sort: unknown[] } } }).encoding.x.sort;
  assert.deepEqual(sortOf(imbalanceSpec(runs)), ['fcp', 'ring']);
  assert.ok(sortOf(mfuSpec(runs)).length <= 2);
});

test('commander errors are one coded line, exit 2', () => {
  for (const [args, code] of [
    [['frob'], 'cli.unknownCommand'],
    [['plan', '--frob'], 'cli.unknownOption'],
    [['plan', '--world'], 'cli.missingValue'],
    [['validate', 'a', 'b'], 'cli.extraArgument'],
  ] as const) {
    const r = fcp([...args]);
    assert.equal(r.status, 2, args.join(' '));
    assert.equal(codeLine(r.stderr), code);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  }
});

test('batch files: huge numbers and binary bytes are one coded line', () => {
  assert.equal(
    codeOf(() => parseBatchText(`${'1'.repeat(100000)}\n`)),
    'batch.length.tooLarge',
  );
  const d = mkdtempSync(join(tmpdir(), 'fcp-b-'));
  const bin = Buffer.alloc(2000);
  for (let i = 0; i < bin.length; i++) bin[i] = (i * 131) % 256;
  writeFileSync(join(d, 'b'), bin);
  assert.equal(
    codeOf(() => readBatchFile(join(d, 'b'))),
    'batch.binary',
  );
  assert.ok(!existsSync(join(d, 'nothing')));
});

test('verify on an invalid plan prints one coded line', () => {
  const d = mkdtempSync(join(tmpdir(), 'fcp-v-'));
  const p = small();
  p.forward.transfers.length[0] = 0;
  writePlan(join(d, 'bad.json'), p);
  const r = fcp(['verify', '--plan', join(d, 'bad.json')]);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(codeLine(r.stderr) ?? '', /^plan\./);
});
