/**
 * Worker thread of `fcp plan`'s re-plan without the locality tie-break (locality.ts): its
 * workerData is the planner's name, the problem and the options; it plans with `noLocality` and
 * posts the plan's reshuffle bytes (or the planner's coded error) back, then ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { FcpError } from '../core/issues.ts';
import { type FromLocalityWorker, reshuffleWithoutLocality, type ToLocalityWorker } from './locality.ts';

const port = parentPort;
if (port === null) throw new Error('locality-worker.ts runs as a worker thread');
const job = workerData as ToLocalityWorker;
let out: FromLocalityWorker;
try {
  out = { type: 'result', bytes: reshuffleWithoutLocality(job.planner, job.problem, job.options) };
} catch (e) {
  out =
    e instanceof FcpError
      ? { type: 'error', issues: [...e.issues] }
      : { type: 'crash', message: e instanceof Error ? (e.stack ?? e.message) : String(e) };
}
port.postMessage(out);
