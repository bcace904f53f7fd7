/**
 * Small, read-only questions to a Docker engine from `sbx doctor` (no dockerode: doctor stays
 * light): ping, whether an image is present, which images the engine already has.
 */
import { request as httpRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';

export type { DockerEndpoint } from '../../../shared/docker-endpoint.js';
import type { DockerEndpoint } from '../../../shared/docker-endpoint.js';

/** GET `path` on the engine; resolves with the status and body text. */
export function engineGet(endpoint: DockerEndpoint, path: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const base: RequestOptions = { path, method: 'GET', timeout: timeoutMs };
    const onResponse = (res: import('node:http').IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        // The image list of a busy engine can be long: keep the first megabyte.
        if (body.length < 1_048_576) body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    };
    const req =
      endpoint.kind === 'unix'
        ? httpRequest({ ...base, socketPath: endpoint.socketPath }, onResponse)
        : endpoint.tls
          ? httpsRequest(
              {
                ...base,
                host: endpoint.host,
                port: endpoint.port,
                ca: endpoint.tls.ca,
                cert: endpoint.tls.cert,
                key: endpoint.tls.key,
                rejectUnauthorized: endpoint.tls.verify,
              },
              onResponse,
            )
          : httpRequest({ ...base, host: endpoint.host, port: endpoint.port }, onResponse);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** GET /_ping: resolves with the engine's answer (`OK`). */
export async function pingEngine(endpoint: DockerEndpoint, timeoutMs = 2000): Promise<string> {
  const r = await engineGet(endpoint, '/_ping', timeoutMs);
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  return r.body.trim() || 'OK';
}

/** Whether the engine has `image` (a tag or digest reference) locally. */
export async function imagePresent(endpoint: DockerEndpoint, image: string): Promise<boolean> {
  const r = await engineGet(endpoint, `/images/${encodeURI(image)}/json`);
  if (r.status === 200) return true;
  if (r.status === 404) return false;
  throw new Error(`HTTP ${r.status}`);
}

/** Up to `max` tagged images the engine has, newest first (`name:tag`). */
export async function localImages(endpoint: DockerEndpoint, max = 3): Promise<string[]> {
  const r = await engineGet(endpoint, '/images/json');
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  let list: Array<{ RepoTags?: string[] | null; Created?: number }>;
  try {
    list = JSON.parse(r.body) as typeof list;
  } catch {
    return [];
  }
  const tags: Array<{ tag: string; created: number }> = [];
  for (const img of Array.isArray(list) ? list : []) {
    for (const tag of img.RepoTags ?? []) if (tag && !tag.startsWith('<none>')) tags.push({ tag, created: img.Created ?? 0 });
  }
  tags.sort((a, b) => b.created - a.created || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
  return tags.slice(0, max).map((t) => t.tag);
}

/** The OCI runtimes the engine has registered (`runc`, `runsc`, …), sorted. */
export async function engineRuntimes(endpoint: DockerEndpoint): Promise<string[]> {
  const r = await engineGet(endpoint, '/info');
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  try {
    return Object.keys((JSON.parse(r.body) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {}).sort();
  } catch {
    return [];
  }
}
