/**
 * The rows of a layout grouped by sequence, as a type of its own: blocks.ts sizes blocks from the
 * user rows and layout.ts builds them, so both import it from here (no import cycle).
 */

/** Rows of a layout grouped by sequence: rows of s are off[s]..off[s+1]-1, ascending start. */
export interface SeqRows {
  readonly off: Int32Array;
  readonly rank: Int32Array;
  readonly start: Int32Array;
  readonly length: Int32Array;
}
