/**
 * Pool previews on docker (DESIGN.md §8): the kernel's socket tables, as a busybox container
 * printed them, parsed; a port is a tenant's only when every socket that could take the
 * connection is its uid's.
 */
import { describe, expect, it } from 'vitest';
import { listenerOwnedBy, parseListeners } from '../../src/adapters/providers/docker/listeners.js';

// `cat /proc/net/tcp /proc/net/tcp6` in a container at 172.17.0.5 (trailing columns cut): the
// header, then per socket its slot, local and remote address, state (0A: listening), the queue and
// timer columns, uid, timeout, inode and reference count.
const row = (sl: number, local: string, remote: string, st: string, uid: number, inode: number) =>
  `   ${sl}: ${local} ${remote} ${st} 00000000:00000000 00:00000000 00000000 ${uid}        0 ${inode} 1`;
const V6_ANY = '0'.repeat(32);
const TABLES = [
  '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
  row(0, '0100007F:2382', '00000000:0000', '0A', 10002, 70957),
  row(1, '00000000:0BB8', '00000000:0000', '0A', 10004, 70958),
  row(2, '050011AC:0FA0', '00000000:0000', '0A', 10005, 70959),
  row(3, '050011AC:1F90', '010011AC:C350', '01', 10009, 70960),
  `  sl  local_address${' '.repeat(25)}remote_address${' '.repeat(24)}st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode`,
  row(0, `${V6_ANY}:1B9E`, `${V6_ANY}:0000`, '0A', 10003, 71029),
  row(1, `${V6_ANY}:1F90`, `${V6_ANY}:0000`, '0A', 10001, 70804),
  row(2, '0000000000000000FFFF0000050011AC:1388', `${V6_ANY}:0000`, '0A', 10006, 70805),
  '',
].join('\n');

describe('docker pool listeners', () => {
  const listeners = parseListeners(TABLES);

  it('parses listening sockets only, IPv4 and IPv6, with port and uid', () => {
    expect(listeners).toEqual([
      { address: '127.0.0.1', port: 9090, uid: 10002 },
      { address: '0.0.0.0', port: 3000, uid: 10004 },
      { address: '172.17.0.5', port: 4000, uid: 10005 },
      { address: '0'.repeat(32), port: 7070, uid: 10003 },
      { address: '0'.repeat(32), port: 8080, uid: 10001 },
      { address: '00000000000000000000ffffac110005', port: 5000, uid: 10006 },
    ]);
  });

  it("a port is the tenant's only when every socket that could take the connection is its uid's", () => {
    const host = '172.17.0.5';
    expect(listenerOwnedBy(listeners, host, 8080, 10001)).toBe(true); // IPv6 wildcard (dual-stack)
    expect(listenerOwnedBy(listeners, host, 8080, 10002)).toBe(false); // another tenant's
    expect(listenerOwnedBy(listeners, host, 3000, 10004)).toBe(true); // IPv4 wildcard
    expect(listenerOwnedBy(listeners, host, 4000, 10005)).toBe(true); // the container's address
    expect(listenerOwnedBy(listeners, host, 5000, 10006)).toBe(true); // IPv4-mapped
    expect(listenerOwnedBy(listeners, host, 9090, 10002)).toBe(false); // loopback only: unreachable, as if nothing listened
    expect(listenerOwnedBy(listeners, host, 1234, 10001)).toBe(false); // nothing listens
    expect(listenerOwnedBy(listeners, '::1', 8080, 10001)).toBe(false); // only IPv4 hosts are judged
    // Two sockets could take it (IPv4 and a dual-stack IPv6 wildcard of another uid): refused.
    const both = [...listeners, { address: '0.0.0.0', port: 8080, uid: 10002 }];
    expect(listenerOwnedBy(both, host, 8080, 10001)).toBe(false);
    expect(listenerOwnedBy(both, host, 8080, 10002)).toBe(false);
  });
});
