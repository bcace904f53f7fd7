export * from './ip.js';
export * from './rules.js';
