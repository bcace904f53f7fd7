export * from './common.js';
export * from './sandboxes.js';
export * from './exec.js';
export * from './files.js';
export * from './templates.js';
export * from './quotas.js';
export * from './system.js';
export * from './admin.js';
