"""fcp_simgrid: replays the phases of an fcp plan through SimGrid (a second, independent network engine).

The TypeScript side (src/executors/simgrid) prepares everything but the network: compute ops with
their modelled durations, flows with bytes, latency and the capacity-limited resources they cross,
and the group structure. This package builds a SimGrid platform with one link per resource, starts
each flow as a SimGrid communication when the plan's rules release it, and reports when every op
and flow started and ended. Run as ``python3 -m fcp_simgrid.replay`` with the JSON job on stdin.
"""

__version__ = "0.1.0"
