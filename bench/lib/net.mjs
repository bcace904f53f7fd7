// Helpers shared by the benchmarks (a folder of its own: bench/run.mjs runs every bench/*.mjs).
import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 now. */
export const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
