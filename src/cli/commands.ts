/**
 * Every CLI command, one module each under src/cli/; each exports `register(program)`.
 * Add a command by importing its register function here.
 */
import type { Command } from 'commander';
import { register as registerComparePlans } from './compare-plans.ts';

/** Registers one command on the program. */
export type RegisterCommand = (program: Command) => void;

export const COMMANDS: RegisterCommand[] = [registerComparePlans];
