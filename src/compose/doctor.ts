/**
 * What `sbx doctor`'s local checks take from the composition root (DESIGN.md §2: the CLI reaches
 * adapters only through compose): the provider catalogue that `serve` and `worker` read too.
 */
export { PROVIDER_CATALOGUE, probeEntry, wantedProviders } from '../adapters/providers/catalog.js';
