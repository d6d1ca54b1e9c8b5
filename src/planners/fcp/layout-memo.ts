/**
 * Results of one layout that no phase knob changes, computed on first use and shared by the
 * self-tuner's candidates (tuner.ts, tunedPipeline), which differ only in `coalesce` and `fanOut`
 * (pipeline.ts, runPhases). Only what depends on neither, nor on the group placer that `coalesce`
 * shapes, belongs here: the `kv` sender choice (a function of the layout, `homesReady` and
 * `fanOut`, transfers/fetch.ts) and the colouring of a whole direct `kv` graph (of its edges and
 * the `rounds` mode). Callers never write into what they get back.
 *
 * In mode (b) at 256 ranks two of the three candidates per layout plan without relays, so each
 * layout chooses the direct senders and colours their graph once instead of twice (longtail, seed
 * 1: sender choices and colourings 96 -> 83 ms per plan, best of 5).
 */
import type { KvEdges } from './transfers/fetch.ts';
import type { Colouring } from './transfers/rounds.ts';

/** The shared results of one layout (module comment). */
export class LayoutMemo {
  private readonly senders = new Map<string, KvEdges>();
  private readonly colourings = new Map<KvEdges, Map<string, Colouring>>();

  /** The `kv` edges chosen with these flags: `choose()` on the first call, then the same object. */
  senderChoice(homesReady: boolean, fanOut: boolean, choose: () => KvEdges): KvEdges {
    const key = `${homesReady} ${fanOut}`;
    let edges = this.senders.get(key);
    if (edges === undefined) {
      edges = choose();
      this.senders.set(key, edges);
    }
    return edges;
  }

  /**
   * The colouring of all of `edges` (no relays) in `rounds` mode: `colour()` on the first call for
   * that edge object, then the same colouring.
   */
  directColouring(edges: KvEdges, rounds: string, colour: () => Colouring): Colouring {
    let byMode = this.colourings.get(edges);
    if (byMode === undefined) {
      byMode = new Map();
      this.colourings.set(edges, byMode);
    }
    let c = byMode.get(rounds);
    if (c === undefined) {
      c = colour();
      byMode.set(rounds, c);
    }
    return c;
  }
}
