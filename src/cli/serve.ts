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
import { z } from 'zod';
import { FcpError } from '../core/issues.ts';
import { checkOutputFile } from '../core/outputs.ts';
import { getPlanner } from '../experiments/strategies.ts';
import { planToJson, writePlan } from '../plan/io.ts';
import { validatePlan } from '../plan/validate.ts';
import type { PlannerOptions } from '../planners/types.ts';
import { type ProblemOptions, resolveProblem } from '../problem/problem.ts';
import { addOutputOptions, outputOf } from './output.ts';

const int = z.number().int();
const modelSchema = z.strictObject({
  qHeads: int.optional(),
  kvHeads: int.optional(),
  headDim: int.optional(),
  bytesPerElement: int.optional(),
});

/**
 * Planner options a request may carry: the fields of {@link PlannerOptions}, nothing else (a
 * misspelt `blokSize` is an error, not a silently ignored field). Values are checked by the planners.
 */
const plannerOptionsSchema = z.strictObject({
  blockSize: z.number().optional(),
  tolerance: z.number().optional(),
  coalesce: z.number().optional(),
  commCoalesce: z.number().optional(),
  pushCoalesce: z.number().optional(),
  noPipeline: z.boolean().optional(),
  rounds: z.enum(['matching', 'naive']).optional(),
  noReshuffleOverlap: z.boolean().optional(),
  noLocality: z.boolean().optional(),
  fixedBlocks: z.boolean().optional(),
  tile: z.number().optional(),
  minTile: z.number().optional(),
  balance: z.enum(['time', 'pairs']).optional(),
  loaderLayout: z.boolean().optional(),
  chunkSize: z.number().optional(),
  overlapDegree: z.number().optional(),
  hideTailReduce: z.boolean().optional(),
  magiBackend: z.enum(['a2av', 'native']).optional(),
  ringVariant: z.enum(['p2p', 'a2a+p2p', 'all_gather']).optional(),
  a2aDegree: z.number().optional(),
  a2aSplitTokens: z.number().optional(),
  bytescaleSizing: z.enum(['memory', 'work']).optional(),
  bytescalePacking: z.enum(['tokens', 'work']).optional(),
  bytescalePow2: z.boolean().optional(),
});

/**
 * A request line. Every field is optional, none may be null, and unknown fields are refused:
 * requests are checked as strictly as command-line options.
 */
export const serveRequestSchema = z.strictObject({
  id: z.union([z.string(), z.number(), z.null()]).optional(),
  op: z.enum(['plan', 'ping', 'shutdown']).optional(),
  strategy: z.string().optional(),
  batch: z
    .union([z.string(), z.array(z.number())], {
      error: 'must be a generator name, a batch file or an array of lengths',
    })
    .optional(),
  world: int.optional(),
  tokensPerRank: int.optional(),
  seed: int.optional(),
  mask: z.string().optional(),
  model: modelSchema.optional(),
  gpusPerNode: int.optional(),
  memoryTokens: int.optional(),
  cluster: z.string().optional(),
  options: plannerOptionsSchema.optional(),
  output: z.string().min(1).optional(),
  validate: z.boolean().optional(),
});

/** One request line, parsed. */
export type ServeRequest = z.infer<typeof serveRequestSchema>;

const errorLine = (id: unknown, code: string, message: string): string =>
  JSON.stringify({ id: id ?? null, ok: false, error: { code, message } });

/** The first problem zod found, as a code and a message naming the field. */
function requestError(err: z.ZodError): { code: string; message: string } {
  const i = err.issues[0]!;
  const at = i.path.join('.');
  if (i.code === 'unrecognized_keys') {
    const where = at === '' ? 'request' : `"${at}"`;
    const shape =
      at === 'options'
        ? plannerOptionsSchema.shape
        : at === 'model'
          ? modelSchema.shape
          : serveRequestSchema.shape;
    return {
      code: 'serve.field.unknown',
      message: `unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => JSON.stringify(k)).join(', ')} in the ${where}; known: ${Object.keys(shape).join(', ')}`,
    };
  }
  return { code: 'serve.field.type', message: `field "${at}": ${i.message}` };
}

/** Answers one request line; null for `shutdown`. Never throws. */
export function handleServeLine(line: string): string | null {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (e) {
    return errorLine(null, 'serve.json', `not a JSON request: ${(e as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return errorLine(null, 'serve.json', 'a request must be a JSON object');
  const rawId = (raw as { id?: unknown }).id;
  const parsed = serveRequestSchema.safeParse(raw);
  if (!parsed.success) {
    const { code, message } = requestError(parsed.error);
    return errorLine(typeof rawId === 'string' || typeof rawId === 'number' ? rawId : null, code, message);
  }
  const req = parsed.data;
  const op = req.op ?? 'plan';
  if (op === 'shutdown') return null;
  if (op === 'ping') return JSON.stringify({ id: req.id ?? null, ok: true, op: 'ping' });
  try {
    const po: ProblemOptions = {};
    if (req.batch !== undefined) po.batch = req.batch;
    if (req.world !== undefined) po.world = req.world;
    if (req.tokensPerRank !== undefined) po.tokensPerRank = req.tokensPerRank;
    if (req.seed !== undefined) po.seed = req.seed;
    if (req.mask !== undefined) po.mask = req.mask;
    if (req.gpusPerNode !== undefined) po.gpusPerNode = req.gpusPerNode;
    if (req.memoryTokens !== undefined) po.memoryTokens = req.memoryTokens;
    if (req.cluster !== undefined) po.cluster = req.cluster;
    if (req.model !== undefined) {
      const m = req.model;
      if (m.qHeads !== undefined) po.qHeads = m.qHeads;
      if (m.kvHeads !== undefined) po.kvHeads = m.kvHeads;
      if (m.headDim !== undefined) po.headDim = m.headDim;
      if (m.bytesPerElement !== undefined) po.bytesPerElement = m.bytesPerElement;
    }
    const problem = resolveProblem(po);
    const planner = getPlanner(req.strategy ?? 'fcp');
    if (req.output !== undefined) checkOutputFile(req.output, 'output');
    const t0 = performance.now();
    const plan = planner.plan(problem, definedOnly(req.options ?? {}) as PlannerOptions);
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

/** `o` without its undefined fields (exactOptionalPropertyTypes). */
function definedOnly(o: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/** Serves requests from `input` to `output` until shutdown or end of input. */
export async function serve(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): Promise<void> {
  const rl = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  // A client that closes our stdout (EPIPE) is gone: nobody reads answers any more, so stop quietly
  // instead of dying of an unhandled 'error' event.
  let closed = false;
  let wake: (() => void) | undefined;
  const onError = (): void => {
    closed = true;
    wake?.();
  };
  output.on('error', onError);
  try {
    for await (const line of rl) {
      if (closed) break;
      if (line.trim() === '') continue;
      const answer = handleServeLine(line);
      if (answer === null) break;
      if (!output.write(`${answer}\n`) && !closed)
        await new Promise<void>((r) => {
          wake = r;
          output.once('drain', r);
        });
      if (closed) break;
    }
  } finally {
    rl.close();
  }
}

/** Registers `fcp serve`. */
export function register(program: Command): void {
  const cmd = program
    .command('serve')
    .description('long-lived planner: JSON-line plan requests on stdin, one JSON answer per line on stdout');
  // stdout is the protocol (JSON lines already): no --json or --csv.
  addOutputOptions(cmd, {});
  cmd.action(async (opts: Record<string, unknown>) => {
    outputOf('serve', opts).note('ready (one JSON request per line; {"op":"shutdown"} to stop)');
    await serve(process.stdin, process.stdout);
  });
}
