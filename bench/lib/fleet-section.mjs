// The markdown section of bench/fleet.mjs (printed, and kept in SCALE.md under "Fleet").
const f = (x, d = 1) => Number(x).toFixed(d);

const sat = (r) => {
  // The load at which one control plane saturates: the first concurrency whose throughput gains
  // under 10 % over the previous step.
  for (let i = 1; i < r.load.length; i++) if (r.load[i].rate < r.load[i - 1].rate * 1.1) return r.load[i - 1];
  return r.load[r.load.length - 1];
};
/** A markdown table row (one line: a row cannot wrap). */
const tableRow = (cells) => `| ${cells.join(' | ')} |`;
const HEADS = [
  'workers',
  'heartbeats/s',
  'placement p50 / p99 ms',
  'to the worker p50 / p99 ms',
  'CPU ms per spawn',
  'row writes per spawn',
  'RSS MB',
  'reconcile pass s (RPC calls)',
];
const fleetRow = (r) =>
  tableRow([
    r.workers,
    f(r.hbRate, 0),
    `${f(r.decide50)} / **${f(r.decide99)}**`,
    `${f(r.place50)} / ${f(r.place99)}`,
    f(r.cpuPerSpawnMs),
    f(r.writesPerSpawn),
    f(r.rss, 0),
    `**${f(r.reconcile.passS)}** (${f(r.reconcile.callsPerPass, 0)})`,
  ]);
const loadRow = (r) => tableRow([r.workers, ...r.load.map((l) => `${f(l.rate, 0)}/s, ${f(l.p50)} / ${f(l.p99)}, ${f(l.cpu, 2)}`)]);

/** The section for `results` (one per fleet size) of a run with `live` sandboxes and `spawns` a sample. */
export function renderFleetSection({ results, live, spawns, probeS, pinned }) {
  const asked = results.map((r) => r.reconcile.asked.toLocaleString('en')).join(' / ');
  const last = results[results.length - 1];
  return `## fleet

One \`sbx serve\` (pure control plane, PostgreSQL) with simulated workers (\`node bench/fleet.mjs\`): each
worker has its own id and signed token, heartbeats over the real route and answers the real worker
RPC from memory. ${live.toLocaleString('en')} live sandboxes spread over the workers; ${spawns} spawns a sample, each
with an \`X-User-ID\` of 500 owners. Control plane on CPU 0, simulator on CPU 1${pinned ? '' : ' (not pinned: taskset missing or one CPU)'};
PostgreSQL shares both.
One spawn at a time: placement = the control plane's own timing of its placement decision (reading
the workers and their live counts, choosing; diagnostics \`scheduler.placement_p50_ms\`/\`_p99_ms\`);
to the worker = request sent → the chosen worker's \`worker.spawn\` arrives (HTTP, admission with
its transaction, placement, the lease). Writes per spawn = PostgreSQL row inserts, updates and
deletes per spawn (\`pg_stat_user_tables\`). Target (DESIGN §13): placement p99 ≤ 20 ms at 1,000 workers.

${tableRow(HEADS)}
|---|---|---|---|---|---|---|---|
${results.map(fleetRow).join('\n')}

Reconcile pass = one pass of remote reconciliation over every live remote sandbox (${asked}; each
worker asked with \`worker.status_batch\`, up to 1,000 sandboxes a call), timed as ${probeS} s of back-to-back passes
(period 1 s) ÷ the passes completed. Target: within the 30 s period.

Throughput as spawns in flight grow (spawns/s, p50 / p99 ms, control-plane CPU in cores):

| workers | ${results[0].load.map((l) => `${l.conc} in flight`).join(' | ')} |
|---|${results[0].load.map(() => '---').join('|')}|
${results.map(loadRow).join('\n')}

Saturation: ${results.map((r) => `${r.workers} workers at about ${f(sat(r).rate, 0)} spawns/s (${sat(r).conc} in flight)`).join('; ')}.

What a bigger fleet needs:
- More spawns per second: one control plane spends the CPU per spawn above on one core, so it
  saturates at the rate shown; replicas on one PostgreSQL (README "High availability") each add a
  core. What they then share is one short transaction per spawn under the admission lock, and the
  event journal's serialized appends.
- Reconciliation asks each worker once per 1,000 of its sandboxes (\`worker.status_batch\`; one call
  per sandbox only to a worker without it): a pass over ${live.toLocaleString('en')} remote sandboxes takes
  ${f(last.reconcile.passS)} s at ${last.workers} workers (one call per sandbox, before: about 68 s). What
  grows with the fleet is the walk over the live rows in pages of 500 and one row update per change.
- Past what one PostgreSQL writes (the row writes per spawn above, plus one per heartbeat): a
  sharded store, or a scheduler such as Kubernetes placing runtimes with sbx as the API in front.
`;
}
