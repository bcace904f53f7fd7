import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import {
  E2bNewSecret,
  E2bSecret,
  E2bSecretsQuery,
  E2bSecretUpdate,
  type E2bNewSecret as NewSecret,
  type E2bSecret as Secret,
  type E2bSecretsQuery as SecretsQuery,
  type E2bSecretUpdate as SecretUpdate,
} from '../../contracts/e2b-catalog.js';
import { E2B_NEXT_TOKEN_HEADER } from '../../contracts/e2b.js';
import { badRequest, SbxError } from '../../core/errors.js';
import type { SecretService, SecretView } from '../../core/secrets/service.js';
import type { E2bDeps } from './deps.js';

const hide = true;
const Params = Type.Object({ secretID: Type.String({ minLength: 1, maxLength: 256 }) });
type ById = { Params: { secretID: string } };

/** The metadata key that carries a secret's hosts: sbx sends a value only to the hosts its secret names (DESIGN.md §15). */
export const HOSTS_KEY = 'hosts';

/** `a.example.com, *.b.example.com` → the list (separated by commas or spaces); absent → null. */
function hostsOf(metadata: Record<string, string> | undefined): string[] | null {
  const raw = metadata?.[HOSTS_KEY];
  if (raw === undefined) return null;
  return raw.split(/[\s,]+/).filter((h) => h !== '');
}

/**
 * E2B's Secret: the id is the name (sbx keys secrets by owner and name); sbx keeps no versions,
 * so `currentVersion` is always 1; `metadata` is `{hosts}`, the hosts the value may go to.
 */
function present(v: SecretView): Secret {
  return {
    secretID: v.name,
    name: v.name,
    currentVersion: 1,
    metadata: { [HOSTS_KEY]: v.hosts.join(',') },
    createdAt: v.created_at,
    updatedAt: v.updated_at,
  };
}

/**
 * E2B's `Secret` (create, update, get, list, destroy) over sbx's owner-scoped secrets (DESIGN.md
 * §15), in the caller's own namespace. E2B's secrets have no hosts; sbx's must: they come from
 * `metadata: {hosts: "api.example.com,…"}` (else 400). Values go in and never come out.
 */
export function e2bSecretRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  const secrets = (): SecretService => {
    if (!deps.secretService) throw new SbxError('not_implemented', 'secrets are not available on this server');
    return deps.secretService;
  };

  scope.post<{ Body: NewSecret }>(
    '/secrets',
    { schema: { hide, body: E2bNewSecret, response: { 201: E2bSecret } } },
    async (request, reply) => {
      const hosts = hostsOf(request.body.metadata);
      if (hosts === null)
        throw badRequest(
          'secrets on this server need the hosts their value may go to: ' +
            `pass metadata: { ${HOSTS_KEY}: "api.example.com" } (egress rules, comma-separated)`,
        );
      const { name, value } = request.body;
      return reply.code(201).send(present(await secrets().create(deps.callerOf(request), { name, value, hosts })));
    },
  );

  // Sorted by name; `nextToken` is the last name of the page before.
  scope.get<{ Querystring: SecretsQuery }>(
    '/secrets',
    { schema: { hide, querystring: E2bSecretsQuery, response: { 200: Type.Array(E2bSecret) } } },
    async (request, reply) => {
      const caller = deps.callerOf(request);
      // An admin lists its own namespace here, as any caller: E2B's list is the project's.
      const all = (await secrets().list(caller)).filter(
        (s) => s.owner_id === caller.owner_id && (request.query.nextToken === undefined || s.name > request.query.nextToken),
      );
      const limit = request.query.limit ?? 100;
      const page = all.slice(0, limit);
      if (all.length > limit) reply.header(E2B_NEXT_TOKEN_HEADER, page[page.length - 1]!.name);
      return page.map(present);
    },
  );

  scope.get<ById>('/secrets/:secretID', { schema: { hide, params: Params, response: { 200: E2bSecret } } }, async (request) =>
    present(await secrets().get(deps.callerOf(request), request.params.secretID)),
  );

  scope.post<ById & { Body: SecretUpdate }>(
    '/secrets/:secretID',
    { schema: { hide, params: Params, body: E2bSecretUpdate, response: { 200: E2bSecret } } },
    async (request) => {
      const hosts = hostsOf(request.body.metadata);
      const body = { value: request.body.value, ...(hosts !== null ? { hosts } : {}) };
      return present(await secrets().update(deps.callerOf(request), request.params.secretID, body));
    },
  );

  scope.delete<ById>('/secrets/:secretID', { schema: { hide, params: Params } }, async (request, reply) => {
    await secrets().remove(deps.callerOf(request), request.params.secretID);
    return reply.code(204).send();
  });
}
