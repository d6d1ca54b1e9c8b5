export * from './assert.ts';
export * from './data-dir.ts';
export * from './files.ts';
export * from './int-column.ts';
export * from './issues.ts';
export * from './rng.ts';
export * from './stats.ts';
