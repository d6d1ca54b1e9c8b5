/**
 * One rank of the CPU runtime: interprets its part of a plan (docs/plan-format.md and the
 * plan semantics of the brief) with real data and real messages.
 *
 * Per phase, groups run in order. For group g the rank first runs the compute ops that the
 * group's sends must follow (`sendAfter`), then snapshots every payload it sends in g (so sends of
 * a group read the state at the group's start, as one NCCL group call would), posts them, runs the
 * ops that only wait for earlier groups while the group is in flight, and finally waits for every
 * receive of g (matched by transfer id, whatever order they arrive in) and applies them in
 * transfer-id order, so results are bitwise deterministic. Compute ops run in table order, each
 * after group `after` completed here.
 *
 * The runtime is strict: using or sending data the rank does not hold at that point, a sendAfter
 * that names another rank's op, or a wait that can never be satisfied locally fails with a message
 * naming the rank, the op or transfer and the tokens.
 */
import type { Plan } from '../../plan/types.ts';
import { KIND_NAMES, Kind } from '../../plan/types.ts';
import type { RankTiming } from '../types.ts';
import { attentionBackward } from './kernels/backward.ts';
import { attentionForward, mergeByLse } from './kernels/forward.ts';
import { type AttentionShape, ensureScratch, type KernelScratch } from './kernels/shape.ts';
import {
  applyPayload,
  clearPartial,
  kindAllowed,
  packPayload,
  payloadSize,
  relayNeeds,
  senderNeeds,
} from './payload.ts';
import {
  type FaultInjection,
  type PeerMessage,
  PHASES,
  type RankJob,
  RankState,
  type RowOutputs,
  STATUS_FIELDS,
  Status,
} from './protocol.ts';
import { rankSchedule, type Schedule } from './schedule.ts';
import { describeBits, Has, SeqStore } from './store.ts';

/** An error inside a rank; `where` names the op or transfer. */
export class RankError extends Error {
  override name = 'RankError';
}

/** Interprets one rank's part of a plan; see the module comment. */
export class RankRuntime {
  readonly rank: number;
  private readonly plan: Plan;
  private readonly shape: AttentionShape;
  private readonly causal: boolean;
  private readonly stores: (SeqStore | undefined)[] = [];
  private readonly status: Int32Array;
  private readonly base: number;
  private readonly ports: RankJob['ports'];
  private readonly inject: FaultInjection | undefined;
  private readonly mailbox: [Map<number, Float32Array>, Map<number, Float32Array>] = [new Map(), new Map()];
  private waiting: { phase: number; missing: Set<number>; resolve: () => void } | undefined;
  private scratch: KernelScratch | undefined;
  private taskO = new Float64Array(0);
  private taskLse = new Float64Array(0);
  private readonly qW: number;
  private readonly kW: number;
  /** What the rank is doing, for error messages. */
  where = 'setup';

  constructor(job: RankJob) {
    this.rank = job.rank;
    this.plan = job.plan;
    this.shape = {
      qHeads: job.plan.model.qHeads,
      kvHeads: job.plan.model.kvHeads,
      headDim: job.plan.model.headDim,
    };
    this.causal = job.plan.mask === 'causal';
    this.status = new Int32Array(job.status);
    this.base = job.rank * STATUS_FIELDS;
    this.ports = job.ports;
    this.inject = job.inject;
    this.qW = this.shape.qHeads * this.shape.headDim;
    this.kW = this.shape.kvHeads * this.shape.headDim;
    const ul = this.plan.userLayout;
    for (const inp of job.inputs) {
      const seq = ul.seq[inp.row]!;
      const start = ul.start[inp.row]!;
      const len = ul.length[inp.row]!;
      this.checkRange(seq, start, len, `user layout row ${inp.row}`);
      const st = this.store(seq);
      st.q.set(inp.q, start * this.qW);
      st.k.set(inp.k, start * this.kW);
      st.v.set(inp.v, start * this.kW);
      st.dO.set(inp.dO, start * this.qW);
      st.mark(start, len, Has.user | Has.q | Has.kv);
    }
    const hl = this.plan.homeLayout;
    for (let r = 0; r < hl.rank.length; r++) {
      if (hl.rank[r] !== this.rank) continue;
      this.checkRange(hl.seq[r]!, hl.start[r]!, hl.length[r]!, `home layout row ${r}`);
      this.store(hl.seq[r]!).mark(hl.start[r]!, hl.length[r]!, Has.home);
    }
    this.setStatus(Status.phase, -1);
    this.setStatus(Status.waitingFor, -1);
    this.setStatus(Status.task, -1);
  }

  /** Takes a message from a peer (or from this rank itself for a self-transfer). */
  deliver(msg: PeerMessage): void {
    this.mailbox[msg.phase].set(msg.id, msg.data);
    const w = this.waiting;
    if (!w || w.phase !== msg.phase || !w.missing.delete(msg.id)) return;
    if (w.missing.size === 0) {
      this.waiting = undefined;
      w.resolve();
    } else {
      this.setStatus(Status.missing, w.missing.size);
      this.setStatus(Status.waitingFor, w.missing.values().next().value ?? -1);
    }
  }

  /** Runs one phase; resolves to this rank's timing. */
  async runPhase(phase: 0 | 1): Promise<RankTiming> {
    const t0 = performance.now();
    const timing: RankTiming = { rank: this.rank, computeMs: 0, commMs: 0, idleMs: 0 };
    const name = PHASES[phase];
    this.where = `${name} setup`;
    this.setStatus(Status.phase, phase);
    if (phase === 1) for (const st of this.stores) st?.resetForBackward();
    const sch = rankSchedule(this.plan, phase, this.rank);
    const after = (phase === 0 ? this.plan.forward : this.plan.backward).compute.after;
    let next = 0; // index into sch.ops
    let completed = -1; // last group completed here
    const runUpTo = (last: number, reason: string): void => {
      while (next <= last) {
        const op = sch.ops[next]!;
        if (after[op]! > completed)
          throw new RankError(
            `${name} compute op ${op} waits for group ${after[op]} but must finish before ${reason}; the plan deadlocks (rule 5)`,
          );
        const c0 = performance.now();
        this.runOp(phase, op, next);
        timing.computeMs += performance.now() - c0;
        next++;
      }
    };
    const runReady = (): void => {
      while (next < sch.ops.length && after[sch.ops[next]!]! <= completed) runUpTo(next, 'itself');
    };
    for (let g = 0; g < sch.groups; g++) {
      runUpTo(sch.sendAfterUpTo[g]!, `the sends of group ${g} (sendAfter)`);
      const s0 = performance.now();
      this.postSends(phase, g, sch);
      timing.commMs += performance.now() - s0;
      runReady(); // work that does not depend on group g overlaps its transfers
      const w0 = performance.now();
      await this.receive(phase, g, sch.recvs[g]!);
      const a0 = performance.now();
      timing.idleMs += a0 - w0;
      this.applyReceives(phase, g, sch.recvs[g]!);
      timing.commMs += performance.now() - a0;
      completed = g;
      this.bump();
      runReady();
    }
    runReady(); // a phase without groups still has ops (after -1)
    if (next < sch.ops.length) {
      const op = sch.ops[next]!;
      throw new RankError(
        `${name} compute op ${op} waits for group ${after[op]}, but the phase has only ${sch.groups} groups`,
      );
    }
    this.mailbox[phase].clear();
    this.setStatus(Status.state, phase === 0 ? RankState.phaseDone : RankState.done);
    this.where = `${name} end`;
    const total = performance.now() - t0;
    timing.idleMs += Math.max(0, total - timing.computeMs - timing.commMs - timing.idleMs);
    return timing;
  }

  /** Outputs of this rank's user rows: O, dQ, dK, dV (NaN where nothing delivered them). */
  outputs(): RowOutputs[] {
    const ul = this.plan.userLayout;
    const out: RowOutputs[] = [];
    for (let r = 0; r < ul.rank.length; r++)
      if (ul.rank[r] === this.rank)
        out.push({ row: r, ...this.store(ul.seq[r]!).userOutputs(ul.start[r]!, ul.length[r]!) });
    return out;
  }

  // ---- compute --------------------------------------------------------------------------------

  private runOp(phase: 0 | 1, op: number, position: number): void {
    const name = PHASES[phase];
    const C = (phase === 0 ? this.plan.forward : this.plan.backward).compute;
    this.setStatus(Status.state, RankState.compute);
    this.setStatus(Status.index, op);
    this.where = `${name} compute op ${op}`;
    const inj = this.inject;
    if (inj && inj.phase === phase && inj.op === position) this.fireFault(inj);
    const T = this.plan.tasks;
    const s0 = C.taskOffsets[op]!;
    const s1 = C.taskOffsets[op + 1]!;
    for (let i = s0; i < s1; i++) {
      const t = C.taskIds[i]!;
      if (t < 0 || t >= T.rank.length)
        throw new RankError(`${name} compute op ${op} names task ${t}, which does not exist`);
      const seq = T.seq[t]!;
      const qs = T.qStart[t]!;
      const ql = T.qLength[t]!;
      const ks = T.kvStart[t]!;
      const kl = T.kvLength[t]!;
      this.where = `${name} compute op ${op} (task ${t}: sequence ${seq}, queries [${qs}, ${qs + ql}), keys [${ks}, ${ks + kl}))`;
      this.setStatus(Status.task, t);
      this.checkRange(seq, qs, ql, `task ${t} queries`);
      this.checkRange(seq, ks, kl, `task ${t} keys`);
      if (ql === 0 || kl === 0) continue;
      const st = this.store(seq);
      this.need(st, seq, qs, ql, phase === 0 ? Has.q : Has.q | Has.dO | Has.home, `task ${t} queries`);
      this.need(st, seq, ks, kl, Has.kv, `task ${t} keys`);
      this.scratch = ensureScratch(this.scratch, kl, this.shape.headDim);
      if (phase === 0) {
        if (this.taskO.length < ql * this.qW) this.taskO = new Float64Array(ql * this.qW);
        if (this.taskLse.length < ql * this.shape.qHeads)
          this.taskLse = new Float64Array(ql * this.shape.qHeads);
        attentionForward(
          this.shape,
          this.causal,
          st.q,
          st.k,
          st.v,
          qs,
          ql,
          ks,
          kl,
          this.taskO,
          this.taskLse,
          this.scratch,
        );
        mergeByLse(this.shape, st.o, st.lse, qs, ql, this.taskO, this.taskLse);
      } else {
        attentionBackward(
          this.shape,
          this.causal,
          st.q,
          st.k,
          st.v,
          st.o,
          st.lse,
          st.dO,
          qs,
          ql,
          ks,
          kl,
          st.dq,
          st.dk,
          st.dv,
          this.scratch,
        );
      }
      this.bump();
    }
    this.setStatus(Status.task, -1);
  }

  private fireFault(inj: FaultInjection): void {
    if (inj.action === 'exit') process.exit(7);
    if (inj.action === 'hang') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    throw new RankError('injected fault');
  }

  // ---- transfers ------------------------------------------------------------------------------

  private describeTransfer(phase: 0 | 1, t: number, g: number): string {
    const T = (phase === 0 ? this.plan.forward : this.plan.backward).transfers;
    const s = T.start[t]!;
    return `${PHASES[phase]} group ${g}, transfer ${t} (${KIND_NAMES[T.kind[t]!] ?? `kind ${T.kind[t]}`} ${T.src[t]}->${T.dst[t]}, sequence ${T.seq[t]} [${s}, ${s + T.length[t]!}))`;
  }

  private checkKind(phase: 0 | 1, kind: number): void {
    if (!kindAllowed(phase, kind))
      throw new RankError(
        `transfer kind ${KIND_NAMES[kind] ?? kind} is not allowed in the ${PHASES[phase]} phase`,
      );
  }

  private postSends(phase: 0 | 1, g: number, sch: Schedule): void {
    const T = (phase === 0 ? this.plan.forward : this.plan.backward).transfers;
    this.setStatus(Status.state, RankState.send);
    this.setStatus(Status.index, g);
    const ids = sch.sends[g]!;
    const payloads: Float32Array[] = [];
    // Snapshot every payload first: all sends of a group read the state at the group's start.
    for (const t of ids) {
      this.where = this.describeTransfer(phase, t, g);
      const kind = T.kind[t]!;
      this.checkKind(phase, kind);
      const seq = T.seq[t]!;
      const start = T.start[t]!;
      const len = T.length[t]!;
      this.checkRange(seq, start, len, `transfer ${t}`);
      const dst = T.dst[t]!;
      if (dst !== this.rank && !this.ports[dst])
        throw new RankError(
          `transfer ${t} goes to rank ${dst}, which does not exist (world ${this.plan.world})`,
        );
      const st = this.store(seq);
      // An `out` from a rank that is not the home: a relay sends on what it received as `out`.
      const relayed = kind === Kind.out && st.missing(start, len, Has.home) >= 0;
      const needs = relayed ? relayNeeds(phase) : senderNeeds(phase, kind);
      if (needs.bits !== 0) this.need(st, seq, start, len, needs.bits, needs.what);
      const data = packPayload(phase, kind, st, start, len, relayed);
      payloads.push(data);
    }
    // The sender's partial dK/dV moves with a dkv: zero it once every payload is taken.
    for (const t of ids)
      if (T.kind[t] === Kind.dkv) clearPartial(this.store(T.seq[t]!), T.start[t]!, T.length[t]!);
    for (let i = 0; i < ids.length; i++) {
      const t = ids[i]!;
      const data = payloads[i]!;
      const dst = T.dst[t]!;
      const msg: PeerMessage = { phase, id: t, data };
      if (dst === this.rank) this.deliver(msg);
      else this.ports[dst]!.postMessage(msg, [data.buffer as ArrayBuffer]);
    }
  }

  private receive(phase: 0 | 1, g: number, ids: number[]): Promise<void> {
    const box = this.mailbox[phase];
    const missing = new Set<number>();
    for (const t of ids) if (!box.has(t)) missing.add(t);
    if (missing.size === 0) return Promise.resolve();
    this.where = `${PHASES[phase]} group ${g}, waiting for ${missing.size} transfer(s)`;
    this.setStatus(Status.index, g);
    this.setStatus(Status.missing, missing.size);
    this.setStatus(Status.waitingFor, missing.values().next().value ?? -1);
    this.setStatus(Status.state, RankState.wait);
    return new Promise((resolve) => {
      this.waiting = { phase, missing, resolve };
    });
  }

  private applyReceives(phase: 0 | 1, g: number, ids: number[]): void {
    const T = (phase === 0 ? this.plan.forward : this.plan.backward).transfers;
    const box = this.mailbox[phase];
    this.setStatus(Status.state, RankState.apply);
    this.setStatus(Status.index, g);
    this.setStatus(Status.waitingFor, -1);
    this.setStatus(Status.missing, 0);
    for (const t of ids) {
      this.where = this.describeTransfer(phase, t, g);
      const data = box.get(t)!;
      box.delete(t);
      const kind = T.kind[t]!;
      this.checkKind(phase, kind);
      const seq = T.seq[t]!;
      const start = T.start[t]!;
      const len = T.length[t]!;
      this.checkRange(seq, start, len, `transfer ${t}`);
      const want = payloadSize(phase, kind, len, this.qW, this.kW);
      if (data.length !== want)
        throw new RankError(`transfer ${t} carried ${data.length} floats, expected ${want}`);
      applyPayload(phase, kind, this.store(seq), start, len, data);
    }
  }

  // ---- helpers --------------------------------------------------------------------------------

  private store(seq: number): SeqStore {
    let st = this.stores[seq];
    if (!st) {
      st = new SeqStore(this.plan.sequences[seq]!, this.shape);
      this.stores[seq] = st;
    }
    return st;
  }

  private checkRange(seq: number, start: number, len: number, what: string): void {
    const L = this.plan.sequences[seq];
    if (L === undefined || !Number.isInteger(seq))
      throw new RankError(
        `${what} names sequence ${seq}, which does not exist (${this.plan.sequences.length} sequences)`,
      );
    if (start < 0 || len < 0 || start + len > L)
      throw new RankError(
        `${what}: tokens [${start}, ${start + len}) lie outside sequence ${seq} of length ${L}`,
      );
  }

  private need(st: SeqStore, seq: number, start: number, len: number, bits: number, what: string): void {
    const t = st.missing(start, len, bits);
    if (t < 0) return;
    const lacking = bits & ~st.flags[t]!;
    throw new RankError(
      `rank ${this.rank} lacks ${describeBits(lacking)} of token ${t} of sequence ${seq}, needed for ${what} (tokens [${start}, ${start + len})); the plan does not bring it here in time (rule 3)`,
    );
  }

  private setStatus(field: number, value: number): void {
    Atomics.store(this.status, this.base + field, value);
  }

  private bump(): void {
    Atomics.add(this.status, this.base + Status.progress, 1);
  }
}
