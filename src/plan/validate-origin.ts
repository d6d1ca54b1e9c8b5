/**
 * Direct senders (`Phase.kvOrigin`, docs/plan-format.md): one rank per transfer row, the row's own
 * `src` for every row but `kv` ones, and never the row's receiver (the direct graph has no
 * self-loops either). Only the report reads the field (its `kvDirectDelta`); executors ignore it.
 * Plans without the field are unchanged.
 */
import { Kind, type Plan } from './types.ts';
import type { IssueSink } from './validate-issues.ts';

/** Checks both phases' `kvOrigin`; returns false when one is broken (code `plan.kvOrigin`). */
export function checkKvOrigin(plan: Plan, sink: IssueSink): boolean {
  let ok = true;
  for (const name of ['forward', 'backward'] as const) {
    const o = plan[name].kvOrigin;
    if (o === undefined) continue;
    const t = plan[name].transfers;
    const path = `${name}.kvOrigin`;
    if (o.length !== t.src.length) {
      sink.add('plan.kvOrigin', `${path} has ${o.length} entries for ${t.src.length} transfers`, path);
      ok = false;
      continue;
    }
    for (let i = 0; i < o.length; i++) {
      const r = o[i]!;
      let why = '';
      if (r < 0 || r >= plan.world) why = `is ${r}, not a rank of 0..${plan.world - 1}`;
      else if (t.kind[i] !== Kind.kv && r !== t.src[i])
        why = `is ${r} for a non-kv transfer sent by ${t.src[i]}`;
      else if (r === t.dst[i]) why = `is ${r}, the transfer's own receiver`;
      if (why === '') continue;
      sink.add('plan.kvOrigin', `${path}[${i}] ${why}`, path, i);
      ok = false;
    }
  }
  return ok;
}
