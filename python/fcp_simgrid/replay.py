"""Replay of prepared fcp phases through SimGrid's network models (see __init__.py).

Execution rules (the same as src/executors/sim/engine.ts): per rank a compute stream (ops in table
order; op i also waits for the end of group entry ``opWait[i]`` on its rank) and a comm stream
(group entries in order; an entry starts when the previous one on that rank ended and ends when all
its flows are done; with ``streams`` 2, a phase under ``pushStream``, a rank's pushes run their own
entries on a second comm stream). A flow is released when both its ranks have entered its group and its
sendAfter ops have ended; then SimGrid moves it (route latency, then bytes under the chosen model).

One controller actor drives everything: compute ops are timers it keeps itself (they use no
network), flows are ``Comm.sendto_async`` activities it waits on with ``Comm.wait_any_for``.

Input (stdin, JSON): {"model": "CM02"|"LV08"|"IB", "exact": bool, "capacity": [bytes per ms per
resource], "phases": [prepared phase tables]}. Output (stdout, JSON): per phase the start and end
times (ms) of every op, flow and entry, and the counts of SimGrid events.
"""
import heapq
import json
import os
import sys
import time

EXIT_NO_SIMGRID = 3
EXIT_BAD_INPUT = 4


def _fail(code, msg):
    sys.stderr.write(f"fcp_simgrid: {msg}\n")
    sys.exit(code)


try:
    import simgrid as sg
except ImportError as e:  # pragma: no cover - exercised from the TypeScript side
    _fail(EXIT_NO_SIMGRID, f"cannot import simgrid ({e}); install the Debian package python3-simgrid")

MODELS = ("CM02", "LV08", "IB")


def _config(model, exact):
    args = ["fcp-simgrid", f"--cfg=network/model:{model}", "--log=root.thresh:critical",
            # Full re-solves of the sharing system: SimGrid's default lazy updates drift by up to
            # ~3e-4 of a makespan on our plans, and a referee should be exact.
            "--cfg=network/optim:Full",
            # Our links are one per direction and NCCL over RDMA has no TCP acknowledgements or
            # window: no reverse cross traffic and no TCP window bound in any model.
            "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0"]
    if exact:
        # Every correction factor off: SimGrid's solver alone, which should be exactly max-min fair.
        args += ["--cfg=network/latency-factor:1", "--cfg=network/bandwidth-factor:1",
                 "--cfg=network/weight-S:0"]
    # Extra SimGrid flags for experiments (e.g. FCP_SIMGRID_CFG="--cfg=network/optim:Lazy").
    args += [a for a in os.environ.get("FCP_SIMGRID_CFG", "").split() if a]
    return args


class Phase:
    """State of one phase's replay."""

    def __init__(self, p):
        self.p = p
        self.world = p["world"]
        n_ops = len(p["opRank"])
        n_flows = len(p["flowSrc"])
        n_entries = len(p["entryGroup"])
        self.need = [2 + d for d in p["flowDeps"]]
        self.pending = [p["entryFlowOff"][e + 1] - p["entryFlowOff"][e] for e in range(n_entries)]
        # entries per (rank, stream) slot streams * rank + stream (src/executors/sim/prepare.ts)
        self.streams = p.get("streams", 1)
        self.flow_stream = p.get("flowStream") or [0] * n_flows
        self.cur_entry = list(p["rankEntryOff"][: self.streams * self.world])
        self.next_op = list(p["rankOpOff"][: self.world])
        self.busy = [False] * self.world
        nan = float("nan")
        self.op_start = [nan] * n_ops
        self.op_end = [nan] * n_ops
        self.flow_ready = [nan] * n_flows
        self.flow_end = [nan] * n_flows
        self.entry_start = [nan] * n_entries
        self.entry_end = [nan] * n_entries
        self.done_flows = 0
        self.done_ops = 0


def run(job):
    model = job["model"]
    if model not in MODELS:
        _fail(EXIT_BAD_INPUT, f"unknown SimGrid model {model!r}; choose one of {', '.join(MODELS)}")
    engine = sg.Engine(_config(model, bool(job.get("exact"))))
    cap = job["capacity"]
    phases = job["phases"]
    world = phases[0]["world"]
    zone = sg.NetZone.create_full_zone("fcp")
    hosts = [zone.create_host(f"r{r}", 1e9).seal() for r in range(world)]
    # The controller lives on a host of its own (it sends nothing itself).
    ctl = zone.create_host("control", 1e9).seal()
    links = {}

    def link(res):
        ln = links.get(res)
        if ln is None:
            # capacity is bytes per ms; SimGrid wants bytes per second.
            ln = zone.create_link(f"res{res}", [cap[res] * 1e3]).set_latency(0).seal()
            links[res] = ln
        return ln

    def lat_link(s, d, ms):
        # The route's latency on a link of its own: FATPIPE (not shared) and far faster than any
        # real link. One per (src, dst) pair: a latency link shared by many routes would tie all
        # their flows into one component of SimGrid's sharing system and make every update global.
        ln = zone.create_link(f"lat{s}-{d}", [1e15]).set_latency(ms * 1e-3)
        ln.set_sharing_policy(sg.Link.SharingPolicy.FATPIPE, None)
        return ln.seal()

    routes = {}
    for p in phases:
        off, res, lat = p["flowResOff"], p["flowRes"], p["flowLatency"]
        for f, (s, d) in enumerate(zip(p["flowSrc"], p["flowDst"])):
            key = (s, d)
            path = (tuple(res[off[f]: off[f + 1]]), lat[f])
            old = routes.get(key)
            if old is None:
                routes[key] = path
            elif old != path:
                _fail(EXIT_BAD_INPUT, f"flows {s} -> {d} disagree on their route")
    for (s, d), (rs, lat) in routes.items():
        route = [sg.LinkInRoute(link(r)) for r in rs] + [sg.LinkInRoute(lat_link(s, d, lat))]
        zone.add_route(hosts[s].netpoint, hosts[d].netpoint, None, None, route, False)
    zone.seal()

    out = []

    def controller():
        for p in phases:
            t0 = sg.Engine.clock
            st = Phase(p)
            events = _replay(st, hosts)
            def ms(xs):
                # Times relative to the phase's start, ms; null for what never happened.
                return [None if x != x else (x - t0) * 1e3 for x in xs]

            out.append({
                "opStart": ms(st.op_start),
                "opEnd": ms(st.op_end),
                "flowReady": ms(st.flow_ready),
                "flowEnd": ms(st.flow_end),
                "entryStart": ms(st.entry_start),
                "entryEnd": ms(st.entry_end),
                "events": events,
                "stuck": [len(p["opRank"]) - st.done_ops, len(p["flowSrc"]) - st.done_flows],
            })

    sg.Actor.create("controller", ctl, controller)
    wall = time.perf_counter()
    engine.run()
    return {"model": model, "exact": bool(job.get("exact")), "wallMs": (time.perf_counter() - wall) * 1e3,
            "phases": out, "simgrid": list(sg.simgrid_version) if hasattr(sg, "simgrid_version") else None}


def _replay(st, hosts):
    """Runs one phase from the current clock; returns the number of events handled."""
    p = st.p
    op_rank, op_dur, op_wait = p["opRank"], p["opDur"], p["opWait"]
    rank_op_off, rank_ops = p["rankOpOff"], p["rankOps"]
    op_flow_off, op_flows = p["opFlowOff"], p["opFlows"]
    fsrc, fdst, fbytes = p["flowSrc"], p["flowDst"], p["flowBytes"]
    rank_entry_off, entry_flow_off, entry_flows = p["rankEntryOff"], p["entryFlowOff"], p["entryFlows"]
    timers = []  # (end time s, op): compute ops use no network, so they are the controller's timers
    comms = []
    comm_flow = []
    events = 0

    def now():
        return sg.Engine.clock

    def release(f):
        st.need[f] -= 1
        if st.need[f] == 0:
            st.flow_ready[f] = now()
            comms.append(sg.Comm.sendto_async(hosts[fsrc[f]], hosts[fdst[f]], int(round(fbytes[f]))))
            comm_flow.append(f)

    def try_start_op(r):
        if st.busy[r] or st.next_op[r] >= rank_op_off[r + 1]:
            return
        op = rank_ops[st.next_op[r]]
        w = op_wait[op]
        if w >= 0 and st.entry_end[w] != st.entry_end[w]:  # NaN: entry not ended yet
            return
        st.busy[r] = True
        t = now()
        st.op_start[op] = t
        heapq.heappush(timers, (t + op_dur[op] * 1e-3, op))

    def enter(s):
        e = st.cur_entry[s]
        if e >= rank_entry_off[s + 1]:
            return
        st.entry_start[e] = now()
        for k in range(entry_flow_off[e], entry_flow_off[e + 1]):
            release(entry_flows[k])

    def finish_flow(f):
        st.flow_end[f] = now()
        st.done_flows += 1
        for r in (fsrc[f], fdst[f]):
            s = st.streams * r + st.flow_stream[f]
            e = st.cur_entry[s]
            st.pending[e] -= 1
            if st.pending[e] == 0:
                st.entry_end[e] = now()
                st.cur_entry[s] += 1
                enter(s)
                try_start_op(r)

    def finish_op(op):
        r = op_rank[op]
        st.busy[r] = False
        st.op_end[op] = now()
        st.done_ops += 1
        st.next_op[r] += 1
        for k in range(op_flow_off[op], op_flow_off[op + 1]):
            release(op_flows[k])
        try_start_op(r)

    for s in range(st.streams * st.world):
        enter(s)
    for r in range(st.world):
        try_start_op(r)
    while comms or timers:
        events += 1
        if comms:
            if timers:
                i = sg.Comm.wait_any_for(comms, max(0.0, timers[0][0] - now()))
            else:
                i = sg.Comm.wait_any(comms)
            if i >= 0:
                f = comm_flow[i]
                # Swap-remove: the order of the list does not matter to SimGrid.
                comms[i] = comms[-1]
                comm_flow[i] = comm_flow[-1]
                comms.pop()
                comm_flow.pop()
                finish_flow(f)
                continue
        else:
            sg.this_actor.sleep_until(timers[0][0])
        t = now()
        # Timers due now (a relative tolerance absorbs the rounding of clock + (end - clock)).
        while timers and timers[0][0] <= t + 1e-12 * max(1.0, t):
            _, op = heapq.heappop(timers)
            finish_op(op)
    return events


def main():
    try:
        job = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        _fail(EXIT_BAD_INPUT, f"the job on stdin is not JSON: {e}")
    res = run(job)
    sys.stdout.write(json.dumps(res))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
