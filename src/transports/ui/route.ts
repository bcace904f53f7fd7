import { readdirSync, readFileSync } from 'node:fs';
import { extname, join, sep } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sbxPackage } from '../../package-root.js';

/**
 * The dashboard (issue 19) at `/ui`: a few static files built at package build time into
 * `dist/ui/` (by `scripts/build-ui.mjs`), read once, served with a strict CSP. The page holds no
 * data; every API call it makes carries the key the user enters (kept in sessionStorage, sent as
 * `X-API-Key`, never in a URL). Paths outside /api/v1 are outside the auth realm, so /ui loads
 * without a key. The page's ES modules (app.js and, under js/, the typed client it is built on)
 * are served like the rest: only files present in dist/ui when the server starts, by exact name.
 */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The servable files of the asset directory, as `/`-separated relative paths. */
function assetNames(dir: string): Set<string> {
  try {
    const names = readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((n) => n.split(sep).join('/'));
    return new Set(names.filter((n) => Object.hasOwn(TYPES, extname(n))));
  } catch {
    return new Set();
  }
}

export const UI_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src " +
  "'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** Where the built assets live: dist/ui of the package (the same from src/, dist/ and the bundled CLI). */
function assetDir(): string {
  return join(sbxPackage().root, 'dist', 'ui');
}

export function uiRoutes(app: FastifyInstance): void {
  const dir = assetDir();
  const names = assetNames(dir);
  const cache = new Map<string, Buffer | null>();
  const load = (name: string): Buffer | null => {
    if (!cache.has(name)) {
      try {
        cache.set(name, readFileSync(join(dir, name)));
      } catch {
        cache.set(name, null);
      }
    }
    return cache.get(name)!;
  };
  const send = (reply: FastifyReply, name: string) => {
    const body = load(name);
    reply.header('Content-Security-Policy', UI_CSP);
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Referrer-Policy', 'no-referrer');
    reply.header('X-Frame-Options', 'DENY');
    if (body === null) {
      return reply
        .code(404)
        .type('application/json; charset=utf-8')
        .send({
          code: 'not_found',
          message: name === 'index.html' ? 'the dashboard is not built (npm run build)' : `no such dashboard file: ${name}`,
        });
    }
    reply.header('Cache-Control', name === 'index.html' ? 'no-cache' : 'public, max-age=300');
    return reply.code(200).type(TYPES[extname(name)]!).send(body);
  };
  const schema = { hide: true };
  app.get('/ui', { schema }, (_req, reply) => send(reply, 'index.html'));
  app.get('/ui/*', { schema }, (req, reply) => {
    const rest = (req.params as { '*': string })['*'];
    if (rest === '' || rest === 'index.html') return send(reply, 'index.html');
    if (!names.has(rest))
      return reply.code(404).type('application/json; charset=utf-8').send({ code: 'not_found', message: 'no such dashboard file' });
    return send(reply, rest);
  });
}
