/**
 * Options and result types of the memory estimate (memory.ts): shared by the estimate and the
 * per-phase walk (memory-phase.ts) so that neither imports the other's values.
 */

/** Compute dtypes of the torch runtime and their bytes per element. */
export const DTYPE_BYTES = { float32: 4, bfloat16: 2, float16: 2 } as const;
/** A compute dtype of the torch runtime. */
export type MemoryDtype = keyof typeof DTYPE_BYTES;
/** Kernel family: `math` (CPU, float32 score matrices) or `gpu` (flash / cuDNN, no score matrix). */
export type MemoryKernel = 'math' | 'gpu';

/** What the estimate is for. */
export interface MemoryOptions {
  dtype: MemoryDtype;
  kernel: MemoryKernel;
  /** Attention layers sharing one FcpAttention per step (each keeps its forward state). */
  layers: number;
  /**
   * Where message buffers live: `device` (default; LocalComm, NCCL, gloo on CPU tensors) or `host`
   * (comm.StagedComm: CUDA tensors over gloo through host copies, so a group's buffers are on the
   * device only while it is packed and unpacked).
   */
  messages?: MemoryMessages;
}

/** Where the runtime's message buffers live (see MemoryOptions.messages). */
export type MemoryMessages = 'device' | 'host';

/** One rank's estimate; every field but the token counts is in bytes. */
export interface RankMemory {
  rank: number;
  qTokens: number;
  kvTokensForward: number;
  kvTokensBackward: number;
  /** Forward state kept for the backward, per layer. */
  keptPerLayer: number;
  /** Largest K/V buffer (own and received tokens) of the two phases. */
  kvResident: number;
  /** Largest float32 accumulators (O/LSE or dQ/dK/dV with their incoming buffers). */
  accumulators: number;
  /** Query slots with a float32 forward accumulator row (fused.prepare_merges); tokens. */
  accumulatorRowsForward: number;
  messagesForward: number;
  messagesBackward: number;
  workspaceForward: number;
  workspaceBackward: number;
  /** Peak of one forward call (its own kept state included). */
  forward: number;
  /** Peak of one backward call beyond its layer's kept state. */
  backward: number;
  /** Peak of a step of `layers` layers. */
  peak: number;
}
