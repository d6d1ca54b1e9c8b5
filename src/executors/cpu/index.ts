/** The CPU reference runtime: executor, worker pool and kernels. */
export { CPU_DEFAULTS, type CpuRunOptions, cpuExecutor } from './executor.ts';
export { attentionBackward } from './kernels/backward.ts';
export { attentionForward, mergeByLse } from './kernels/forward.ts';
export { type AttentionShape, createScratch, type KernelScratch } from './kernels/shape.ts';
export { CpuWorkerPool } from './pool.ts';
export type { FaultInjection } from './protocol.ts';
