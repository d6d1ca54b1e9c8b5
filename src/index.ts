/**
 * The fcp library: plan a batch, check the plan, run or simulate it.
 *
 * ```ts
 * import { resolveProblem, getPlanner, validatePlan, simulatePlan, resolveCluster } from 'fcp';
 * const problem = resolveProblem({ batch: 'longtail', world: 64 });
 * const plan = getPlanner('fcp').plan(problem);
 * const { issues, report } = validatePlan(plan);
 * const sim = simulatePlan(plan, { cluster: resolveCluster('hopper-ib') });
 * ```
 */
export { GENERATOR_NAMES, generateBatch } from './batch/generators.ts';
export { parseBatchText, readBatchFile } from './batch/read.ts';
export * from './core/index.ts';
export { executorNames, getExecutor } from './executors/registry.ts';
export { type SimOptions, type SimResult, simulatePlan } from './executors/sim/index.ts';
export type * from './executors/types.ts';
export { getPlanner, plannerNames, registerPlanner } from './experiments/strategies.ts';
export * from './model/attention.ts';
export { expandChunks } from './plan/expand.ts';
export { planFromJson, planToJson, readPlan, writePlan } from './plan/io.ts';
export { evenUserLayout } from './plan/layout.ts';
export { formatReport, type PlanReport } from './plan/report.ts';
export * from './plan/types.ts';
export { type ValidationResult, validatePlan } from './plan/validate.ts';
export type { Planner, PlannerOptions } from './planners/types.ts';
export { CLUSTER_NAMES, CLUSTER_PRESETS, type ClusterSpec, resolveCluster } from './problem/cluster.ts';
export { type Problem, type ProblemOptions, resolveProblem } from './problem/problem.ts';
