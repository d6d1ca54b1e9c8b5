/**
 * The torch runtime's command-line options (`fcp run`), declared once (src/core/option-spec.ts):
 * the flags and the docs' table are generated from this list, and runTorch reads its defaults from
 * {@link TORCH_DEFAULTS}.
 */
import type { OptionSpec } from '../../core/option-spec.ts';

/** Defaults of the torch runtime's options that have a fixed value. */
export const TORCH_DEFAULTS = {
  device: 'cpu',
  backend: 'auto',
  kernel: 'auto',
  iters: 1,
  warmup: 0,
  timeoutS: 600,
  peakTflops: 989,
} as const;

/** The torch runtime's options in the order `fcp run --help` lists them. */
export const TORCH_OPTION_SPECS: readonly OptionSpec[] = [
  {
    key: 'nproc',
    owner: 'torch',
    type: 'int',
    defaultDoc: 'the plan world',
    doc: 'processes to start (must equal the plan world)',
  },
  {
    key: 'device',
    owner: 'torch',
    type: 'enum',
    values: ['cpu', 'cuda'],
    placeholder: 'device',
    default: TORCH_DEFAULTS.device,
    doc: 'cpu or cuda',
  },
  {
    key: 'distBackend',
    target: 'backend',
    owner: 'torch',
    type: 'enum',
    values: ['auto', 'gloo', 'nccl', 'gloo-staged'],
    placeholder: 'name',
    default: TORCH_DEFAULTS.backend,
    doc: 'auto, gloo, nccl or gloo-staged (CUDA tensors over gloo)',
  },
  {
    key: 'kernel',
    owner: 'torch',
    type: 'enum',
    values: ['auto', 'math', 'flash', 'cudnn'],
    placeholder: 'name',
    default: TORCH_DEFAULTS.kernel,
    doc: 'auto, math, flash (varlen) or cudnn (dense batches)',
  },
  {
    key: 'mode',
    owner: 'torch',
    type: 'enum',
    values: ['br', 'square'],
    defaultDoc: 'by kernel',
    doc: 'piece decomposition br or square',
  },
  {
    key: 'dtype',
    owner: 'torch',
    type: 'enum',
    values: ['float32', 'bfloat16', 'float16'],
    placeholder: 'dtype',
    defaultDoc: 'float32 on CPU, bfloat16 on CUDA',
    doc: 'float32, bfloat16 or float16',
  },
  {
    key: 'iters',
    owner: 'torch',
    type: 'int',
    default: TORCH_DEFAULTS.iters,
    doc: 'timed iterations (forward + backward)',
  },
  {
    key: 'warmup',
    owner: 'torch',
    type: 'int',
    default: TORCH_DEFAULTS.warmup,
    doc: 'untimed iterations first',
  },
  {
    key: 'timeout',
    target: 'timeoutMs',
    owner: 'torch',
    type: 'number',
    placeholder: 's',
    default: TORCH_DEFAULTS.timeoutS,
    doc: 'end every process and fail after this many seconds',
  },
  {
    key: 'python',
    owner: 'torch',
    type: 'string',
    placeholder: 'path',
    defaultDoc: '$FCP_PYTHON, /usr/bin/python3, python3',
    doc: 'Python interpreter',
  },
  {
    key: 'peakTflops',
    owner: 'torch',
    type: 'number',
    defaultDoc: String(TORCH_DEFAULTS.peakTflops),
    doc: 'GPU peak TFLOP/s for the MFU',
  },
];
