/**
 * Where FCP's compute ops are cut (order.ts, orderOps): how long an op of exporting work may run
 * before its pushes leave, and the measured exceptions that let it run longer (a push unit's tasks
 * together, a launch batch completed, a rank's end still far).
 */

/**
 * Longest compute op of the exporting work, ms: pushes leave after at most this much compute (the
 * phases pass it to orderOps, order.ts; grid-tasks.ts cuts longer rectangles so that a single task
 * never makes a longer op).
 */
export const MAX_OP_MS = 2;

/**
 * How much longer than `maxOpMs` an op of exporting work may grow while its tasks feed the same
 * push (orderOps; measured in phase-ops.ts, buildPhaseOps).
 */
export const UNIT_OP_FACTOR = 2;

/**
 * Share of a rank's work still to come that an op of exporting work may reach in the backward when
 * it waits for no later group (orderOps): ops long where the rank's end is far, `maxOpMs` near it.
 * Measured (simulated, fluid, hopper-ib, `npx tsx bench/quality-ab.ts [--loader-layout] --worlds
 * 16,32,64,128,256`, B - A backward MFU, seeds 1-3): 0.05 +0.0020, 0.1 +0.0028, 0.2 +0.0023, 0.4
 * -0.0014 in mode (b); letting such an op also wait for a later group lost 0.026 at 0.1. Held-out
 * and the other settings: docs/results.md, "Session 21".
 */
export const TAIL_FRACTION = 0.1;

/**
 * How far past its cut (`maxOpMs`, or UNIT_OP_FACTOR x that inside a push unit) an op of exporting
 * work may grow to bring a batch of one launch shape to a power of two (orderOps, `shape`). In the
 * backward at 256 ranks a 2048 x 2048 square takes about 0.7 ms, so ops cut at 2 ms held three
 * squares, two launches (2 + 1), and ranks holding more such ops paid up to 12 ms of launches
 * against a mean of 7 ms: half of the simulated backward compute imbalance (`longtail` seed 3, mode
 * (b): 3.7% with launches, 1.9% without; `npx tsx bench/launch-share.ts --loader-layout --batch
 * longtail --world 256 --seed 3 --strategies fcp`). Completing the fourth square: 3.7% -> 1.9%
 * with launches, backward launch share 3.6% -> 2.4%.
 */
export const POW2_OP_FACTOR = 1.5;
