/**
 * Pause and resume of a sandbox on a remote worker (DESIGN.md §16, §7): `worker.pause` and
 * `worker.resume` over the real RPC, lease-fenced; the worker's status reports `paused`.
 */
import { describe, expect, it } from 'vitest';
import { RPC_LEASE_POLICY } from '../../src/contracts/worker-rpc.js';
import { call } from '../helpers/http.js';
import { useProviderServer } from '../helpers/provider-server.js';
import { pauseContract } from './pause.contract.js';

describe('pause and resume on a remote worker', () => {
  const srv = useProviderServer('worker');

  pauseContract(() => srv());

  it('pause and resume are lease-fenced; the worker reports the runtime paused', async () => {
    expect(RPC_LEASE_POLICY['worker.pause']).toBe('required');
    expect(RPC_LEASE_POLICY['worker.resume']).toBe('required');
    const cp = srv();
    const id = await cp.spawn();
    await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/pause`);
    const rec = (await cp.plane.deps.store.getSandbox(id))!;
    const remote = await cp.plane.deps.sandboxes.deps.locator.provider(rec);
    expect(await remote.status(rec.runtime_id!)).toBe('paused');
    // GET asks the worker (spec 4.11 rule 8): a paused runtime is no error.
    expect((await call(cp.url, 'GET', `/api/v1/sandboxes/${id}`)).body.state).toBe('paused');
    await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/resume`);
    expect(await remote.status(rec.runtime_id!)).toBe('running');
  }, 60_000);
});
