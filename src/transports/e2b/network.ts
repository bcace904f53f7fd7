import type { E2bNetwork, E2bNetworkUpdate } from '../../contracts/e2b-catalog.js';
import { badRequest, SbxError } from '../../core/errors.js';
import { parseRule, type Rule } from '../../core/network/rules.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import type { E2bDeps } from './deps.js';

/** E2B's `ALL_TRAFFIC` (IPv4 everything); its IPv6 twin is taken as the same thing. */
const ALL_TRAFFIC = new Set(['0.0.0.0/0', '::/0']);
/** `${e2b.secrets.NAME}`, as `Secret.fill` writes it. */
const SECRET_REF = /\$\{e2b\.secrets\.([^{}]*)\}/g;

/** What an E2B network option means for an sbx spawn (DESIGN.md §10, §15); empty: the server's default network. */
export interface NetworkChoice {
  network?: 'none' | 'filtered';
  egress?: { allow: string[]; deny: string[] };
  secrets?: string[];
}

/**
 * E2B's network options → sbx's network, egress lists and secret bindings. E2B lets allow rules win
 * over deny rules over an open network; sbx's filtered network denies what no allow rule admits, and
 * admits a name only by a name rule. So:
 * - deny everything (`denyOut` with `ALL_TRAFFIC`, or `allow_internet_access: false`) → `filtered`
 *   with `allowOut` as the allow list (other deny entries add nothing: E2B's allow wins), or `none`
 *   when nothing is allowed and no secret is bound;
 * - `allowOut` alone restricts nothing in E2B → the server's default network;
 * - `denyOut` of some addresses over an open network cannot be enforced for names → 400;
 * - `rules` whose header transforms reference `${e2b.secrets.NAME}` bind the secret NAME (its
 *   hosts must cover the rule's host); a literal header value, an iam token, `maskRequestHost`,
 *   `allowPublicTraffic: false`, `httpsPorts` and `egressProxy` → 400 (E2B's unsupported answer).
 */
export async function networkChoiceOf(
  deps: E2bDeps,
  caller: Caller,
  net: E2bNetwork | undefined,
  allowInternet: boolean | undefined,
): Promise<NetworkChoice> {
  if (net?.maskRequestHost !== undefined) throw unsupported('network.maskRequestHost', 'previews are reached with the Host they are sent');
  if (net?.allowPublicTraffic === false)
    throw unsupported('network.allowPublicTraffic: false', 'sandbox ports are guarded by the envd access token when one is set');
  if (net?.httpsPorts !== undefined && net.httpsPorts.length > 0)
    throw unsupported('network.httpsPorts', 'previews reach sandbox ports over plain HTTP');
  return listsOf(deps, caller, net ?? {}, allowInternet);
}

/** `PUT /e2b/sandboxes/{id}/network` → the egress lists of a filtered sandbox (bindings stay those of the spawn). */
export async function egressUpdateOf(deps: E2bDeps, caller: Caller, body: E2bNetworkUpdate): Promise<{ allow: string[]; deny: string[] }> {
  if (body.rules !== undefined && Object.keys(body.rules).length > 0)
    throw unsupported('network.rules on update', 'secret bindings are fixed when the sandbox is created');
  const choice = await listsOf(deps, caller, body, body.allow_internet_access);
  if (choice.network === undefined)
    throw badRequest(
      'this update would open the network to everything, which a filtered sandbox cannot become: deny ALL_TRAFFIC and list allowOut',
    );
  return choice.egress ?? { allow: [], deny: [] };
}

async function listsOf(
  deps: E2bDeps,
  caller: Caller,
  net: Pick<E2bNetwork, 'allowOut' | 'denyOut' | 'egressProxy' | 'rules'>,
  allowInternet: boolean | undefined,
): Promise<NetworkChoice> {
  if (net.egressProxy != null) throw unsupported('network.egressProxy', 'egress goes through sbx’s own gateway');
  const allow = (net.allowOut ?? []).map((r) => parseRule(r).text);
  const denyOut = (net.denyOut ?? []).map((r) => parseRule(r).text);
  const denyAll = allowInternet === false || denyOut.some((r) => ALL_TRAFFIC.has(r));
  const secrets = await boundSecrets(deps, caller, net.rules);
  if (!denyAll) {
    if (denyOut.length > 0)
      throw unsupported(
        'network.denyOut without ALL_TRAFFIC',
        'an open network with some addresses denied cannot be enforced for host names: deny ALL_TRAFFIC and list allowOut',
      );
    if (secrets.length > 0) throw badRequest('network.rules that use secrets need a filtered network: add denyOut: [ALL_TRAFFIC]');
    // E2B's allow list over an open network restricts nothing.
    return {};
  }
  if (allow.length === 0 && secrets.length === 0) return { network: 'none' };
  return { network: 'filtered', egress: { allow, deny: [] }, ...(secrets.length > 0 ? { secrets } : {}) };
}

/**
 * The secrets a create's `rules` use: every header value must reference at least one secret (a
 * literal value would be a credential in the create call that sbx cannot keep from the sandbox:
 * refused, never put into its environment), and each referenced secret's hosts must cover the rule's host.
 */
async function boundSecrets(deps: E2bDeps, caller: Caller, rules: E2bNetwork['rules']): Promise<string[]> {
  const names: string[] = [];
  for (const [host, list] of Object.entries(rules ?? {})) {
    const target = parseRule(host);
    for (const rule of list) {
      for (const [header, value] of Object.entries(rule.transform?.headers ?? {})) {
        if (value.includes('${e2b.identity.')) throw unsupported('iam tokens in network.rules', 'sbx mints no workload identity tokens');
        const refs = [...value.matchAll(SECRET_REF)].map((m) => m[1] ?? '');
        if (refs.length === 0)
          throw badRequest(
            `network.rules[${JSON.stringify(host)}] header ${JSON.stringify(header)} has a literal value: sbx takes credentials only as ` +
              'secrets (create one with Secret.create and reference it with Secret.fill)',
          );
        for (const name of refs) {
          await checkCovers(deps, caller, name, target);
          if (!names.includes(name)) names.push(name);
        }
      }
    }
  }
  return names;
}

async function checkCovers(deps: E2bDeps, caller: Caller, name: string, target: Rule): Promise<void> {
  if (!deps.secretService) throw new SbxError('not_implemented', 'secrets are not available on this server');
  let hosts: string[];
  try {
    hosts = (await deps.secretService.get(caller, name)).hosts;
  } catch (err) {
    if (err instanceof SbxError && err.code === 'not_found') throw badRequest(`network.rules use secret ${name}, which does not exist`);
    throw err;
  }
  if (!hosts.some((h) => covers(parseRule(h), target)))
    throw badRequest(`secret ${name} may go only to ${hosts.join(', ')}: it cannot be used for ${target.text}`);
}

/** Whether a secret's host rule admits every request a rule's host names (same port or none). */
function covers(host: Rule, target: Rule): boolean {
  if (host.port !== null && host.port !== target.port) return false;
  if (host.kind === 'name') return target.kind === 'name' && target.name === host.name;
  if (host.kind === 'wildcard') {
    if (target.kind === 'name') return target.name.endsWith(`.${host.suffix}`);
    return target.kind === 'wildcard' && (target.suffix === host.suffix || target.suffix.endsWith(`.${host.suffix}`));
  }
  return host.text === target.text;
}

function unsupported(what: string, why: string): SbxError {
  return badRequest(`${what} is not supported by this server: ${why}`);
}
