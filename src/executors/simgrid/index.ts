/**
 * SimGrid as a second engine for the simulator: the TypeScript side prepares both phases exactly
 * as the built-in engine does (ops with our kernel model's durations, flows with bytes, latency and
 * resources), Python (`python/fcp_simgrid`, SimGrid 3.32's bindings, Debian `python3-simgrid`)
 * replays them on a SimGrid platform with one link per resource, and the times it reports are
 * accounted like ours ({@link phaseRunFromTimes}). So only the network model differs.
 *
 * Models: `cm02` with every correction factor 1 (no latency or bandwidth factor, no weight-S, no
 * TCP window, no cross traffic) is plain max-min fair sharing and must agree with our exact solver;
 * `lv08` (SimGrid's default: Velho and Legrand's TCP correction factors) and `ib` (Vienne et al.'s
 * InfiniBand sharing, which penalises hosts with several concurrent flows) are SimGrid's own.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fail } from '../../core/issues.ts';
import type { Network } from '../../cost/network.ts';
import type { PhaseRun } from '../sim/engine.ts';
import type { PhaseEngine } from '../sim/index.ts';
import type { PreparedPhase } from '../sim/prepare.ts';
import { pythonPackageRoot } from '../torch/python.ts';
import { type PhaseTimes, phaseRunFromTimes } from './accounting.ts';

/** The SimGrid network models `--simgrid-model` accepts. */
export const SIMGRID_MODELS = ['cm02', 'lv08', 'ib'] as const;
/** One of {@link SIMGRID_MODELS}. */
export type SimgridModel = (typeof SIMGRID_MODELS)[number];

const SG_NAME: Record<SimgridModel, string> = { cm02: 'CM02', lv08: 'LV08', ib: 'IB' };

/** Exit codes of `python -m fcp_simgrid.replay` (replay.py). */
const EXIT_NO_SIMGRID = 3;

const probeCache = new Map<string, boolean>();

/**
 * Candidate interpreters: `$FCP_SIMGRID_PYTHON` alone when set (tests point it at an interpreter
 * without SimGrid), else `$FCP_PYTHON`, `/usr/bin/python3` (where Debian's python3-simgrid
 * installs), `python3`.
 */
export function simgridPythonCandidates(): string[] {
  if (process.env.FCP_SIMGRID_PYTHON) return [process.env.FCP_SIMGRID_PYTHON];
  const out: string[] = [];
  if (process.env.FCP_PYTHON) out.push(process.env.FCP_PYTHON);
  out.push('/usr/bin/python3', 'python3');
  return [...new Set(out)];
}

/** The first candidate that can `import simgrid`, or null. */
export function findSimgridPython(): string | null {
  for (const py of simgridPythonCandidates()) {
    let ok = probeCache.get(py);
    if (ok === undefined) {
      ok = false;
      if (!py.includes('/') || existsSync(py)) {
        const r = spawnSync(py, ['-c', 'import simgrid'], { encoding: 'utf8', timeout: 60000 });
        ok = r.status === 0;
      }
      probeCache.set(py, ok);
    }
    if (ok) return py;
  }
  return null;
}

/** Like {@link findSimgridPython}; FcpError `simgrid.missing` naming the package to install. */
export function requireSimgridPython(): string {
  const py = findSimgridPython();
  if (py === null)
    fail(
      'simgrid.missing',
      `no Python with SimGrid found (tried ${simgridPythonCandidates().join(', ')}); install it (Debian: apt-get install python3-simgrid) or set FCP_PYTHON`,
      'engine',
    );
  return py;
}

/** Checks a `--simgrid-model` value. FcpError `option.simgridModel`. */
export function parseSimgridModel(raw: string): SimgridModel {
  const m = raw.toLowerCase();
  if (!(SIMGRID_MODELS as readonly string[]).includes(m))
    fail(
      'option.simgridModel',
      `--simgrid-model must be one of ${SIMGRID_MODELS.join(', ')} (got ${raw})`,
      'simgridModel',
    );
  return m as SimgridModel;
}

/** The tables of one prepared phase the replay needs, as plain arrays. */
function phaseJob(p: PreparedPhase): Record<string, unknown> {
  const a = (x: ArrayLike<number>): number[] => Array.from(x);
  return {
    world: p.world,
    opRank: a(p.opRank),
    opDur: a(p.opDur),
    opWait: a(p.opWait),
    rankOpOff: a(p.rankOpOff),
    rankOps: a(p.rankOps),
    opFlowOff: a(p.opFlowOff),
    opFlows: a(p.opFlows),
    flowSrc: a(p.flowSrc),
    flowDst: a(p.flowDst),
    flowBytes: a(p.flowBytes),
    flowLatency: a(p.flowLatency),
    flowDeps: a(p.flowDeps),
    flowResOff: a(p.flowResOff),
    flowRes: a(p.flowRes),
    streams: p.streams,
    flowStream: a(p.flowStream),
    rankEntryOff: a(p.rankEntryOff),
    entryGroup: a(p.entryGroup),
    entryFlowOff: a(p.entryFlowOff),
    entryFlows: a(p.entryFlows),
  };
}

/** What the replay prints. */
interface ReplayOutput {
  model: string;
  exact: boolean;
  wallMs: number;
  phases: (PhaseTimes & { stuck: [number, number] })[];
}

/**
 * The SimGrid engine for {@link SimOptions.engine}. `model` picks SimGrid's network model; `cm02`
 * runs with every correction factor 1. FcpError `simgrid.missing` when no Python has SimGrid,
 * `option.network` when the cluster asks for our contention model (SimGrid has its own),
 * `simgrid.failed` when the replay fails.
 */
export function simgridEngine(model: SimgridModel): PhaseEngine {
  return {
    name: 'simgrid',
    network: `simgrid-${model}`,
    run(phases: readonly PreparedPhase[], network: Network) {
      if (network.hasContention())
        fail(
          'option.network',
          'the SimGrid engine uses its own network model (--simgrid-model); drop --network contention',
          'network',
        );
      const python = requireSimgridPython();
      const job = {
        model: SG_NAME[model],
        exact: model === 'cm02',
        capacity: Array.from(network.capacity),
        phases: phases.map(phaseJob),
      };
      const t0 = performance.now();
      const r = spawnSync(python, ['-m', 'fcp_simgrid.replay'], {
        input: JSON.stringify(job),
        encoding: 'utf8',
        maxBuffer: 1 << 30,
        env: {
          ...process.env,
          PYTHONPATH: [pythonPackageRoot(), process.env.PYTHONPATH].filter(Boolean).join(':'),
        },
      });
      const wallMs = performance.now() - t0;
      if (r.status === EXIT_NO_SIMGRID)
        fail(
          'simgrid.missing',
          `${python} cannot import simgrid; install it (Debian: apt-get install python3-simgrid)`,
          'engine',
        );
      if (r.status !== 0) {
        const why = (r.stderr ?? '').trim().split('\n').slice(-3).join(' | ') || String(r.error ?? r.signal);
        fail('simgrid.failed', `the SimGrid replay failed (exit ${r.status}): ${why}`, 'engine');
      }
      let out: ReplayOutput;
      try {
        out = JSON.parse(r.stdout) as ReplayOutput;
      } catch {
        return fail('simgrid.failed', 'the SimGrid replay printed no result', 'engine');
      }
      const runs: PhaseRun[] = phases.map((p, i) => phaseRunFromTimes(p, out.phases[i]!));
      return {
        runs,
        info: {
          simgridModel: out.model,
          allFactorsOne: out.exact,
          simgridWallMs: out.wallMs,
          wallMs,
          events: out.phases.map((ph) => ph.events),
        },
      };
    },
  };
}
