/**
 * The network a spawn or template gets (DESIGN.md §10): `none`, `bridge` or `filtered` with its
 * egress lists; defaults and precedence applied here, once, for both.
 */
import { badRequest, SbxError } from '../errors.js';
import { parseEgress, type EgressLists } from '../network/rules.js';
import type { CoreSettings } from '../settings.js';
import type { SpawnInput } from './spawn-request.js';
/** A network a spawn or template may name (DESIGN.md §10): `none`, `bridge` or `filtered`. */
export function parseNetwork(network: string): 'none' | 'bridge' | 'filtered' {
  if (network !== 'none' && network !== 'bridge' && network !== 'filtered')
    throw badRequest(`network must be none, bridge or filtered, got ${JSON.stringify(network)}`);
  return network;
}

/**
 * A network with its egress lists (DESIGN.md §10): `egress` given without `network` means
 * `filtered`; beside `none`/`bridge` it is a 400. Lists are checked up front (400 naming the rule).
 * A filtered network without lists of its own gets `defaults.egress` only when it came from
 * `defaults.network`; otherwise it starts with empty lists (nothing allowed).
 */
export function networkWithEgress(
  network: string | undefined,
  egress: unknown,
): { network: 'none' | 'bridge' | 'filtered' | undefined; egress: EgressLists | null } {
  const chosen = network !== undefined ? parseNetwork(network) : egress !== undefined && egress !== null ? 'filtered' : undefined;
  if (egress !== undefined && egress !== null && chosen !== 'filtered')
    throw badRequest(`egress rules need network "filtered", not "${chosen}"`);
  const lists = egress !== undefined && egress !== null ? parseEgress(egress) : null;
  return { network: chosen, egress: lists };
}

/** A spawn's network and lists: its own, else `defaults.network` (with `defaults.egress` for filtered). */
export function spawnEgress(
  input: SpawnInput,
  d: CoreSettings['defaults'],
  pooled: boolean,
): { network: 'none' | 'bridge' | 'filtered' | null; egress: EgressLists | null } {
  const given = networkWithEgress(input.network, input.egress);
  let network = given.network ?? null;
  let egress = given.egress;
  if (network === null && d.network) {
    network = parseNetwork(d.network);
    if (network === 'filtered') egress = parseEgress(d.egress ?? { allow: [], deny: [] });
  }
  if (network === 'filtered') egress ??= { allow: [], deny: [] };
  else egress = null;
  if (network !== null && pooled)
    throw new SbxError('not_implemented', "pool sandboxes share their runtime's network: a network per spawn needs pool mode off");
  return { network, egress };
}
