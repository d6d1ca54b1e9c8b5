/**
 * The problem's command-line options (batch, world, model shape, cluster), declared once
 * (src/core/option-spec.ts) with the defaults resolveProblem fills in ({@link PROBLEM_DEFAULTS},
 * Llama-3-70B attention): `addProblemOptions` (src/cli/common.ts) and the README's table are
 * generated from this list. Commands may change a default (`compare`'s list of worlds, `verify`'s
 * small model); docs/cli.md says where.
 */
import { GENERATOR_NAMES } from '../batch/generators.ts';
import type { OptionSpec } from '../core/option-spec.ts';
import { LLAMA3_70B } from '../model/attention.ts';
import { CLUSTER_NAMES } from './cluster.ts';
import { PROBLEM_DEFAULTS as D } from './problem.ts';

/** The problem's options in the order `--help` lists them. */
export const PROBLEM_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'batch',
    owner: 'problem',
    type: 'string',
    placeholder: 'name|path',
    default: D.batch,
    doc: `generator (${GENERATOR_NAMES.join(', ')}) or a batch file (one length per line, a JSON array, or JSON lines with a length field)`,
  },
  { key: 'world', owner: 'problem', type: 'int', default: D.world, doc: 'number of ranks (GPUs)' },
  {
    key: 'tokensPerRank',
    owner: 'problem',
    type: 'int',
    default: D.tokensPerRank,
    doc: 'tokens per rank of a generated batch',
  },
  { key: 'seed', owner: 'problem', type: 'int', default: D.seed, doc: 'random seed' },
  {
    key: 'mask',
    owner: 'problem',
    type: 'enum',
    values: ['causal', 'full'],
    placeholder: 'mask',
    default: D.mask,
    doc: 'causal or full',
  },
  {
    key: 'qHeads',
    owner: 'problem',
    type: 'int',
    default: LLAMA3_70B.qHeads,
    passDefault: false,
    doc: 'query heads',
  },
  {
    key: 'kvHeads',
    owner: 'problem',
    type: 'int',
    default: LLAMA3_70B.kvHeads,
    passDefault: false,
    doc: 'key/value heads',
  },
  {
    key: 'headDim',
    owner: 'problem',
    type: 'int',
    default: LLAMA3_70B.headDim,
    passDefault: false,
    doc: 'head dimension',
  },
  { key: 'gpusPerNode', owner: 'problem', type: 'int', default: D.gpusPerNode, doc: 'GPUs per node' },
  {
    key: 'cluster',
    owner: 'problem',
    type: 'enum',
    values: CLUSTER_NAMES,
    placeholder: 'preset',
    default: D.cluster,
    doc: `cluster the plan is for; planners that model time plan for its links (${CLUSTER_NAMES.join(', ')})`,
  },
  {
    key: 'memoryTokens',
    owner: 'problem',
    type: 'int',
    defaultDoc: '1.5x tokens per rank',
    doc: 'memory capacity per rank in tokens',
  },
];
