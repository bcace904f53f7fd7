// Summaries the benches' tables show.

/** The p-th percentile of `xs`; the median; milliseconds as the tables show them. */
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
export const median = (xs) => pct(xs, 50);
export const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`);
