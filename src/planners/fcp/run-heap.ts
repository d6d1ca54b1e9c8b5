/**
 * The available exporting work of one rank in order.ts (orderOps): a binary min-heap of runs, each
 * run one ready group's tasks sorted by (key, id), keyed by its next task's (key, id). Every task of
 * a group arrives at once (the estimate is per group), so the available tasks are whole runs, and
 * the smallest (key, id) among them is the smallest run head: the same order as a heap of tasks
 * ((key, id) is a strict total order), at a heap of at most the groups rather than of the tasks
 * (orderOps of one mode (b) plan at 256 ranks, longtail, 12 captured calls: 80 -> 69 ms).
 */
export class RunHeap {
  /** Per entry (0..size-1): its run's next position in `tasks`, and its end. */
  readonly pos: Int32Array;
  readonly end: Int32Array;
  /** Per entry: its head task's key and id. */
  private readonly hKey: Float64Array;
  private readonly hId: Int32Array;
  /** Entries in the heap. */
  size = 0;

  /**
   * @param runs most runs at once (ready groups plus one)
   * @param tasks the runs' tasks, each run a sorted range of it
   * @param key sort key of every task (ties: id)
   */
  constructor(
    runs: number,
    private readonly tasks: Int32Array,
    private readonly key: Float64Array,
  ) {
    this.pos = new Int32Array(runs);
    this.end = new Int32Array(runs);
    this.hKey = new Float64Array(runs);
    this.hId = new Int32Array(runs);
  }

  /** Entry `from` moved to slot `to` (both sifts). */
  private move(to: number, from: number): void {
    this.pos[to] = this.pos[from]!;
    this.end[to] = this.end[from]!;
    this.hKey[to] = this.hKey[from]!;
    this.hId[to] = this.hId[from]!;
  }

  /** Slot `i` set to a run at `pos` (ending at `end`) whose head is task x of key kx. */
  private set(i: number, pos: number, end: number, kx: number, x: number): void {
    this.pos[i] = pos;
    this.end[i] = end;
    this.hKey[i] = kx;
    this.hId[i] = x;
  }

  private siftDown(pos: number, end: number, kx: number, x: number): void {
    const { hKey, hId } = this;
    const n = this.size;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      let c = l;
      if (l + 1 < n) {
        const k1 = hKey[l + 1]!;
        const k0 = hKey[l]!;
        if (k1 < k0 || (k1 === k0 && hId[l + 1]! < hId[l]!)) c = l + 1;
      }
      const kc = hKey[c]!;
      if (!(kc < kx || (kc === kx && hId[c]! < x))) break;
      this.move(i, c);
      i = c;
    }
    this.set(i, pos, end, kx, x);
  }

  /** Makes the tasks tasks[a..b) (one group's run, sorted) available. */
  push(a: number, b: number): void {
    const x = this.tasks[a]!;
    const kx = this.key[x]!;
    let i = this.size++;
    while (i > 0) {
      const up = (i - 1) >> 1;
      const ky = this.hKey[up]!;
      if (!(kx < ky || (kx === ky && x < this.hId[up]!))) break;
      this.move(i, up);
      i = up;
    }
    this.set(i, a, b, kx, x);
  }

  /** The available task of least (key, id), taken out. */
  pop(): number {
    const top = this.hId[0]!;
    const pos = this.pos[0]! + 1;
    const end = this.end[0]!;
    if (pos < end) {
      const x = this.tasks[pos]!;
      this.siftDown(pos, end, this.key[x]!, x);
    } else if (--this.size > 0) {
      const n = this.size;
      this.siftDown(this.pos[n]!, this.end[n]!, this.hKey[n]!, this.hId[n]!);
    }
    return top;
  }
}
