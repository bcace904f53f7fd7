/**
 * Lease fencing on the worker's RPC (DESIGN.md §7 "Fencing"): every method's call — the envelope's
 * and the interactive exec's upgrade alike — is judged here, before anything runs, by the one
 * table of which methods carry a lease (`RPC_LEASE_POLICY`) and the worker's domain rule
 * (core/worker/fencing.ts).
 */
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { RPC_LEASE_POLICY, RpcLease, rpcLeaseResource, type RpcMethod } from '../../../contracts/worker-rpc.js';
import { badRequest } from '../../../core/errors.js';
import { fence } from '../../../core/worker/fencing.js';
import type { RpcServerDeps } from './deps.js';

const leaseCheck = TypeCompiler.Compile(RpcLease) as unknown as TypeCheck<TSchema>;

/** The call's lease once judged and recorded (null when served without one); 400/403 otherwise. */
export function fenceCall(
  deps: RpcServerDeps,
  method: RpcMethod,
  params: Record<string, unknown>,
  lease: RpcLease | undefined,
): RpcLease | null {
  return fence({
    policy: RPC_LEASE_POLICY[method],
    lease,
    resourceId: rpcLeaseResource(method, params),
    workerId: deps.workerId,
    now: deps.clock.now(),
    ledger: deps.state,
  });
}

/** The lease header of the interactive exec (JSON), or undefined when absent; malformed → 400. */
export function leaseHeader(value: string | string[] | undefined): RpcLease | undefined {
  if (value === undefined) return undefined;
  let lease: unknown;
  try {
    lease = JSON.parse(Array.isArray(value) ? (value[0] ?? '') : value);
  } catch {
    throw badRequest('the lease header is not JSON');
  }
  if (!leaseCheck.Check(lease)) throw badRequest('the lease header is not a lease');
  return lease as RpcLease;
}
