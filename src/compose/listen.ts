/** Listening on an address given as text (`server.preview_addr`). */

/** Listens on `host:port` (`[v6]:port`, or `:port` for every address). */
export function listenOn(server: import('node:http').Server, addr: string): Promise<void> {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(addr.trim());
  if (!m) return Promise.reject(new Error(`server.preview_addr must be host:port, got ${JSON.stringify(addr)}`));
  const host = m[1] ?? (m[2] || '0.0.0.0');
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(m[3]), host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
