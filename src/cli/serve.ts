/**
 * `fcp serve`: a long-lived planner. It reads one JSON request per line on stdin and answers one
 * JSON line per request on stdout, in order, so that a training loop (python/fcp_torch/serve_client.py)
 * can plan batch k+1 while batch k trains, without paying Node's start-up per batch.
 *
 * Request:  {"id": 7, "strategy": "fcp", "batch": [lengths] | "longtail", "world": 8,
 *            "tokensPerRank"?, "seed"?, "mask"?, "model"?: {qHeads, kvHeads, headDim, bytesPerElement},
 *            "gpusPerNode"?, "memoryTokens"?, "options"?: {blockSize, coalesce, ...},
 *            "output"?: "plan.json[.gz]", "validate"?: true}
 * Answer:   {"id": 7, "ok": true, "strategy", "world", "sequences", "planMs", "path"} when `output` is
 *           given (the plan is written atomically there), else {..., "plan": {...}} inline;
 *           {"id": 7, "ok": false, "error": {"code", "message"}} for a bad request.
 * Also {"op": "ping"} -> {"ok": true, "op": "ping"}, and {"op": "shutdown"} (or end of input) stops.
 */
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import { FcpError } from '../core/issues.ts';
import { planToJson, writePlan } from '../plan/io.ts';
import type { ModelShape } from '../plan/types.ts';
import { validatePlan } from '../plan/validate.ts';
import { getPlanner } from '../experiments/strategies.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { type ProblemOptions, resolveProblem } from '../problem/problem.ts';

/** One request line, parsed. */
export interface ServeRequest {
  id?: unknown;
  op?: 'plan' | 'ping' | 'shutdown';
  strategy?: string;
  batch?: string | number[];
  world?: number;
  tokensPerRank?: number;
  seed?: number;
  mask?: string;
  model?: Partial<ModelShape>;
  gpusPerNode?: number;
  memoryTokens?: number;
  options?: PlannerOptions;
  output?: string;
  validate?: boolean;
}

const errorLine = (id: unknown, code: string, message: string): string =>
  JSON.stringify({ id: id ?? null, ok: false, error: { code, message } });

/** Answers one request line; null for `shutdown`. Never throws. */
export function handleServeLine(line: string): string | null {
  let req: ServeRequest;
  try {
    req = JSON.parse(line) as ServeRequest;
  } catch (e) {
    return errorLine(null, 'serve.json', `not a JSON request: ${(e as Error).message}`);
  }
  if (typeof req !== 'object' || req === null || Array.isArray(req))
    return errorLine(null, 'serve.json', 'a request must be a JSON object');
  const op = req.op ?? 'plan';
  if (op === 'shutdown') return null;
  if (op === 'ping') return JSON.stringify({ id: req.id ?? null, ok: true, op: 'ping' });
  if (op !== 'plan')
    return errorLine(req.id, 'serve.op', `unknown op ${JSON.stringify(op)}; use plan, ping or shutdown`);
  try {
    const po: ProblemOptions = {};
    if (req.batch !== undefined) po.batch = req.batch;
    if (req.world !== undefined) po.world = req.world;
    if (req.tokensPerRank !== undefined) po.tokensPerRank = req.tokensPerRank;
    if (req.seed !== undefined) po.seed = req.seed;
    if (req.mask !== undefined) po.mask = req.mask;
    if (req.gpusPerNode !== undefined) po.gpusPerNode = req.gpusPerNode;
    if (req.memoryTokens !== undefined) po.memoryTokens = req.memoryTokens;
    if (req.model !== undefined) {
      const m = req.model;
      if (m.qHeads !== undefined) po.qHeads = m.qHeads;
      if (m.kvHeads !== undefined) po.kvHeads = m.kvHeads;
      if (m.headDim !== undefined) po.headDim = m.headDim;
      if (m.bytesPerElement !== undefined) po.bytesPerElement = m.bytesPerElement;
    }
    const problem = resolveProblem(po);
    const planner = getPlanner(req.strategy ?? 'fcp');
    const t0 = performance.now();
    const plan = planner.plan(problem, req.options ?? {});
    const planMs = performance.now() - t0;
    if (req.validate) {
      const { issues } = validatePlan(plan);
      if (issues.length > 0)
        return errorLine(
          req.id,
          'serve.invalidPlan',
          `the ${planner.name} plan breaks ${issues[0]!.code}: ${issues[0]!.message}`,
        );
    }
    const head = {
      id: req.id ?? null,
      ok: true,
      strategy: plan.strategy,
      world: plan.world,
      sequences: plan.sequences.length,
      planMs,
    };
    if (req.output !== undefined) {
      writePlan(req.output, plan);
      return JSON.stringify({ ...head, path: req.output });
    }
    // The plan is spliced in as text: re-parsing a large plan only to print it again would double the cost.
    return `${JSON.stringify(head).slice(0, -1)},"plan":${planToJson(plan)}}`;
  } catch (e) {
    if (e instanceof FcpError) return errorLine(req.id, e.code, e.issues.map((i) => i.message).join('; '));
    return errorLine(req.id, 'serve.internal', (e as Error).message ?? String(e));
  }
}

/** Serves requests from `input` to `output` until shutdown or end of input. */
export async function serve(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const rl = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    const answer = handleServeLine(line);
    if (answer === null) break;
    if (!output.write(`${answer}\n`)) await new Promise((r) => output.once('drain', r));
  }
  rl.close();
}

/** Registers `fcp serve`. */
export function register(program: Command): void {
  program
    .command('serve')
    .description('long-lived planner: JSON-line plan requests on stdin, one JSON answer per line on stdout')
    .action(async () => {
      process.stderr.write('fcp serve: ready (one JSON request per line; {"op":"shutdown"} to stop)\n');
      await serve(process.stdin, process.stdout);
    });
}
