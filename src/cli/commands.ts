/**
 * Every CLI command, one module each under src/cli/; each exports `register(program)`.
 * Add a command by importing its register function here.
 */
import type { Command } from 'commander';
import { register as registerCompare } from './compare.ts';
import { register as registerComparePlans } from './compare-plans.ts';
import { register as registerDemo } from './demo.ts';
import { register as registerPlan } from './plan.ts';
import { register as registerReport } from './report.ts';
import { register as registerRun } from './run.ts';
import { register as registerServe } from './serve.ts';
import { register as registerSimulate } from './simulate.ts';
import { register as registerValidate } from './validate.ts';
import { register as registerVerify } from './verify.ts';

/** Registers one command on the program. */
export type RegisterCommand = (program: Command) => void;

export const COMMANDS: RegisterCommand[] = [
  registerPlan,
  registerComparePlans,
  registerVerify,
  registerValidate,
  registerSimulate,
  registerCompare,
  registerDemo,
  registerReport,
  registerRun,
  registerServe,
];
