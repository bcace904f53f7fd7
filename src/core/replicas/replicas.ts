/**
 * Replicas on one database (DESIGN.md §7 "Replicas"): each replica keeps a `replica:<id>` lease
 * live (its admission slots count only while it does; its local worker, registered under its id,
 * is reachable only while it does), and each leader task runs on one replica at a time under
 * `leader:<task>`.
 * A task's pass gets a signal that aborts as soon as the replica may have lost the lease, which is
 * before any other replica can take it over (a lease not renewed within its TTL is treated as lost).
 * On a store of one process's own (SQLite) the replica is simply the leader of everything.
 */
import type { Clock, LeaseStore } from '../ports/index.js';

export interface LeaderTask {
  name: string;
  everyMs: number;
  run(signal: AbortSignal): Promise<unknown>;
}

export interface ReplicaOptions {
  leases: LeaseStore;
  clock: Clock;
  replicaId: string;
  /** Lease TTL; a dead holder's task is taken over within about this long. */
  ttlMs: number;
  /** False for a store that only this process uses: no leases, every task is ours. */
  shared: boolean;
  warn(fields: Record<string, unknown>, msg: string): void;
}

/** Lease names outside the worker lease namespace: workers may never renew these. */
export const CONTROL_PLANE_LEASE = /^(leader:|replica:|local-worker$)/;
/** Leader tasks, in the order diagnostics shows them (warm pools run with the local worker, not as a leader task). */
export const LEADER_TASKS = ['reaper', 'reconcile'] as const;

interface TaskState {
  task: LeaderTask;
  held: boolean;
  generation: number;
  lastRun: number;
  running: AbortController | null;
}

export class Replicas {
  private readonly tasks = new Map<string, TaskState>();
  private timer: NodeJS.Timeout | undefined;
  /** The tick in flight, if any (close waits for it). */
  private ticking: Promise<void> | null = null;
  private lastRenewOk = 0;
  private closed = false;

  constructor(private readonly o: ReplicaOptions) {}

  get id(): string {
    return this.o.replicaId;
  }

  get shared(): boolean {
    return this.o.shared;
  }

  private now(): number {
    return this.o.clock.now().getTime();
  }

  /** How often leases are renewed and free ones tried: a tenth of the TTL (at least 200 ms). */
  get tickMs(): number {
    return Math.max(200, Math.floor(this.o.ttlMs / 10));
  }

  /** Registers this replica (every replica may run its own local worker, under its own id). */
  async start(): Promise<void> {
    if (!this.o.shared) return;
    await this.o.leases.acquireLease(`replica:${this.id}`, this.id, this.o.ttlMs, this.o.clock.now());
    this.lastRenewOk = performance.now();
  }

  /** True while `replicaId`'s lease is live (a replica killed with -9 stops being live within one TTL). */
  async isLive(replicaId: string): Promise<boolean> {
    if (!this.o.shared) return replicaId === this.id;
    const lease = await this.o.leases.getLease(`replica:${replicaId}`);
    return lease !== null && Date.parse(lease.expires_at) > this.now();
  }

  /** Adds a leader task and begins ticking (the first tick runs at once). */
  addTask(task: LeaderTask): void {
    this.tasks.set(task.name, { task, held: !this.o.shared, generation: 0, lastRun: 0, running: null });
    if (!this.timer && !this.closed) {
      this.timer = setInterval(
        () => void this.tick(),
        this.o.shared ? this.tickMs : Math.min(...[...this.tasks.values()].map((t) => t.task.everyMs), 1000),
      );
      this.timer.unref();
      void this.tick();
    }
  }

  /** True when this replica currently leads `name`. */
  leads(name: string): boolean {
    return this.tasks.get(name)?.held ?? false;
  }

  /** Leaders as the lease table has them: the holder replica of each task, null when none. */
  async leaders(names: readonly string[]): Promise<Record<string, string | null>> {
    const out: Record<string, string | null> = {};
    const now = this.now();
    for (const name of names) {
      if (!this.o.shared) {
        out[name] = this.tasks.has(name) ? this.id : null;
        continue;
      }
      const lease = await this.o.leases.getLease(`leader:${name}`);
      out[name] = lease && Date.parse(lease.expires_at) > now ? lease.holder_id : null;
    }
    return out;
  }

  /** The replicas whose lease is live, sorted. */
  async live(): Promise<string[]> {
    if (!this.o.shared) return [this.id];
    const now = this.now();
    return (await this.o.leases.listLeases())
      .filter((l) => l.resource_id.startsWith('replica:') && Date.parse(l.expires_at) > now)
      .map((l) => l.resource_id.slice('replica:'.length))
      .sort();
  }

  tick(): Promise<void> {
    if (this.ticking !== null) return this.ticking;
    if (this.closed) return Promise.resolve();
    const run = (async () => {
      if (this.o.shared) await this.renew();
      if (this.closed) return;
      for (const st of this.tasks.values()) this.maybeRun(st);
    })();
    this.ticking = run.finally(() => (this.ticking = null));
    return this.ticking;
  }

  private async renew(): Promise<void> {
    const at = this.o.clock.now();
    try {
      await this.o.leases.acquireLease(`replica:${this.id}`, this.id, this.o.ttlMs, at);
      for (const st of this.tasks.values()) {
        const lease = await this.o.leases.acquireLease(`leader:${st.task.name}`, this.id, this.o.ttlMs, at);
        // Fencing: a generation that jumped means someone else held the lease in between.
        const continuous = lease !== null && st.held && lease.generation === st.generation + 1;
        if (!continuous) this.abort(st);
        st.held = lease !== null;
        st.generation = lease?.generation ?? 0;
      }
      this.lastRenewOk = performance.now();
    } catch (err) {
      // Database away: leadership lapses before anyone else could take it over.
      if (performance.now() - this.lastRenewOk > this.o.ttlMs / 2) {
        for (const st of this.tasks.values()) {
          if (st.held) this.o.warn({ task: st.task.name, err: String(err) }, 'leader lease could not be renewed; pausing the task');
          this.abort(st);
          st.held = false;
        }
      }
    }
  }

  private abort(st: TaskState): void {
    st.running?.abort();
    st.running = null;
  }

  private maybeRun(st: TaskState): void {
    if (!st.held || st.running || this.closed) return;
    // Periods on the monotonic stopwatch: a clock step neither skips nor doubles a pass.
    if (performance.now() - st.lastRun < st.task.everyMs && st.lastRun > 0) return;
    st.lastRun = performance.now();
    const ctl = new AbortController();
    st.running = ctl;
    st.task
      .run(ctl.signal)
      .catch((err: unknown) => this.o.warn({ task: st.task.name, err: String(err) }, `${st.task.name} pass failed`))
      .finally(() => {
        if (st.running === ctl) st.running = null;
      });
  }

  /** Stops the tasks and gives every lease back so another replica takes over at once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const st of this.tasks.values()) this.abort(st);
    if (!this.o.shared) return;
    // A renewal in flight would take the leases again after they are given back.
    await this.ticking?.catch(() => undefined);
    const names = [...[...this.tasks.keys()].map((n) => `leader:${n}`), `replica:${this.id}`];
    for (const name of names) await this.o.leases.releaseLease(name, this.id).catch(() => undefined);
  }
}
