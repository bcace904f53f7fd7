/** The groups of Provider methods a provider builds as one part each. */
import type { Provider } from '../../../core/ports/index.js';

/** Snapshots, fork images and volumes (DESIGN.md §10, §16): what a provider keeps beside its runtimes. */
export type CatalogMethods = Pick<
  Provider,
  | 'snapshot'
  | 'deleteSnapshot'
  | 'forkImage'
  | 'deleteForkImage'
  | 'listForkImages'
  | 'createVolume'
  | 'deleteVolume'
  | 'volumeSizes'
  | 'listCatalog'
>;
