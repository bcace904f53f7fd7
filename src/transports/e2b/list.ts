import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import {
  E2B_NEXT_TOKEN_HEADER,
  E2bListedSandbox,
  E2bListQuery,
  E2bListV2Query,
  type E2bListQuery as ListQuery,
  type E2bListV2Query as ListV2Query,
} from '../../contracts/e2b.js';
import { badRequest } from '../../core/errors.js';
import type { SandboxRecord } from '../../core/ports/index.js';
import type { Caller } from '../../core/sandboxes/caller.js';
import { decodeCursor, encodeCursor, type ListPosition } from '../../core/sandboxes/cursor.js';
import type { E2bDeps } from './deps.js';
import { DEFAULT_TEMPLATE, matchesMetadata, parseMetadataFilter, parseStateFilter, presentListed } from './mapping.js';

const hide = true;

/**
 * `GET /e2b/sandboxes` (v1: every live sandbox the caller sees, `metadata` filter) and
 * `GET /e2b/v2/sandboxes` (E2B's paginated list: `state`, `metadata`, `template`, `startedAfter`,
 * `limit` 1–100, `nextToken`; the next page's token in `x-next-token`). Visibility is the native
 * list's (core `SandboxService.page`): ownership applies in the store query.
 */
export function e2bListRoutes(scope: FastifyInstance, deps: E2bDeps): void {
  scope.get<{ Querystring: ListQuery }>(
    '/sandboxes',
    { schema: { hide, querystring: E2bListQuery, response: { 200: Type.Array(E2bListedSandbox) } } },
    async (request) => {
      const filter = parseMetadataFilter(request.query.metadata);
      const recs = await deps.sandboxes.list(deps.callerOf(request));
      return recs.filter((r) => matchesMetadata(r, filter)).map(presentListed);
    },
  );

  scope.get<{ Querystring: ListV2Query }>(
    '/v2/sandboxes',
    { schema: { hide, querystring: E2bListV2Query, response: { 200: Type.Array(E2bListedSandbox) } } },
    async (request, reply) => {
      const q = request.query;
      if (q.order === 'desc') throw badRequest('order desc is not supported by this server: sandboxes are listed oldest first');
      const states = parseStateFilter(q.state);
      const metadata = parseMetadataFilter(q.metadata);
      const startedAfter = q.startedAfter !== undefined ? Date.parse(q.startedAfter) : undefined;
      if (startedAfter !== undefined && Number.isNaN(startedAfter)) throw badRequest('startedAfter must be an RFC 3339 time');
      const after = q.nextToken !== undefined ? decodeCursor(deps.installationSecret, q.nextToken) : undefined;
      const keep = (r: SandboxRecord) =>
        (r.state === 'paused' ? states.paused : states.running) &&
        matchesMetadata(r, metadata) &&
        (q.template === undefined || (r.template ?? DEFAULT_TEMPLATE) === q.template) &&
        (startedAfter === undefined || Date.parse(r.created_at) > startedAfter);
      const page = await filteredPage(deps, deps.callerOf(request), q.limit ?? 100, after, keep);
      if (page.next) reply.header(E2B_NEXT_TOKEN_HEADER, encodeCursor(deps.installationSecret, page.next));
      return page.items.map(presentListed);
    },
  );
}

/**
 * Up to `limit` sandboxes that pass `keep`, in the native list's keyset order after `after`,
 * reading the native pages one after another until the page is full or none remain; `next` names
 * the last row looked at while more may follow.
 */
async function filteredPage(
  deps: E2bDeps,
  caller: Caller,
  limit: number,
  after: ListPosition | undefined,
  keep: (r: SandboxRecord) => boolean,
): Promise<{ items: SandboxRecord[]; next: ListPosition | null }> {
  const items: SandboxRecord[] = [];
  let position = after;
  for (;;) {
    const page = await deps.sandboxes.page(caller, { limit, ...(position ? { after: position } : {}) });
    for (let i = 0; i < page.items.length; i++) {
      const rec = page.items[i]!;
      if (!keep(rec)) continue;
      items.push(rec);
      if (items.length === limit) {
        const more = i < page.items.length - 1 || page.next !== null;
        return { items, next: more ? { created_at: rec.created_at, id: rec.id } : null };
      }
    }
    if (!page.next) return { items, next: null };
    position = page.next;
  }
}
