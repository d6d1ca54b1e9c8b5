/**
 * Import rules of src/ (run by `npm run deps`, in .ci/run). Data flows one way:
 * batch -> problem -> planner -> plan -> validator -> executor -> report, so each top-level folder
 * may import only the folders listed below it here, and no module takes part in an import cycle.
 */
const LAYERS = [
  'core', // assertions, coded errors, files, seeded random numbers
  'model', // attention shape and arithmetic (pairs, FLOPs, bytes per token)
  'batch', // batch generators and readers
  'plan', // the plan file, its reader/writer, the validator
  'problem', // the problem a planner solves, with the cluster spec
  'cost', // kernel and network costs
  'planners', // FCP and the baselines
  'executors', // sim, cpu, torch, simgrid
  'report', // rendering only: results in, HTML and plots out
  'experiments', // demo, sweeps, verify: planners + executors together, results out
  'cli', // parsing and printing
];

const above = (i) => LAYERS.slice(i + 1);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'an import cycle makes the layers meaningless',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...LAYERS.slice(0, -1).map((layer, i) => ({
      name: `layer-${layer}`,
      severity: 'error',
      comment: `src/${layer} may import only layers below it (${LAYERS.slice(0, i).join(', ') || 'none'})`,
      from: { path: `^src/${layer}/` },
      to: { path: `^src/(${above(i).join('|')})/` },
    })),
    {
      name: 'planners-not-executors',
      severity: 'error',
      comment: 'a planner never runs a plan: estimators are injected where planners are registered',
      from: { path: '^src/planners/' },
      to: { path: '^src/executors/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // TypeScript 7 has no compiler API for the cruiser; swc parses the sources (type imports count).
    parser: 'swc',
    exclude: { path: '(^|/)node_modules/' },
  },
};
