import { sbxPackage } from './package-root.js';

/** The package version (from package.json, found from src/, dist/ or the bundled CLI alike). */
export const VERSION: string = sbxPackage().version;
