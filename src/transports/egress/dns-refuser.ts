import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';

/**
 * The DNS server of filtered sandboxes (DESIGN.md §10): on the gateway address, UDP and TCP 53,
 * it answers every query REFUSED (names are resolved by the gateway, never by the sandbox, so
 * DNS cannot carry data out). Malformed packets are dropped.
 */
export class DnsRefuser {
  private udp: UdpSocket | null = null;
  private tcp: Server | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly host: string,
    private readonly port = 53,
  ) {}

  async start(): Promise<void> {
    const udp = createSocket('udp4');
    udp.on('message', (msg, rinfo) => {
      const reply = refused(msg);
      if (reply) udp.send(reply, rinfo.port, rinfo.address);
    });
    udp.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(this.port, this.host, () => resolve());
    });
    this.udp = udp;
    const tcp = createServer((sock) => {
      this.sockets.add(sock);
      sock.on('close', () => this.sockets.delete(sock));
      sock.on('error', () => sock.destroy());
      sock.setTimeout(10_000, () => sock.destroy());
      let buf = Buffer.alloc(0);
      sock.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        if (buf.length > 66_000) return sock.destroy();
        while (buf.length >= 2) {
          const len = buf.readUInt16BE(0);
          if (buf.length < 2 + len) break;
          const reply = refused(buf.subarray(2, 2 + len));
          buf = buf.subarray(2 + len);
          if (!reply) return sock.destroy();
          const framed = Buffer.alloc(2 + reply.length);
          framed.writeUInt16BE(reply.length, 0);
          reply.copy(framed, 2);
          sock.write(framed);
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(this.port, this.host, () => resolve());
    });
    this.tcp = tcp;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.udp ? this.udp.close(() => resolve()) : resolve()));
    await new Promise<void>((resolve) => (this.tcp ? this.tcp.close(() => resolve()) : resolve()));
    this.udp = null;
    this.tcp = null;
  }
}

/** A REFUSED answer to a query: its id and question, QR set, RCODE 5; null for what is not a query. */
export function refused(msg: Buffer): Buffer | null {
  if (msg.length < 12 || msg.length > 65_535) return null;
  if (msg[2]! & 0x80) return null; // a response, not a query
  const qdcount = msg.readUInt16BE(4);
  // The question section, when it parses, is echoed; otherwise the header alone.
  let end = 12;
  let ok = qdcount === 1;
  if (ok) {
    while (end < msg.length && msg[end] !== 0) {
      const len = msg[end]!;
      if (len > 63) {
        ok = false;
        break;
      }
      end += 1 + len;
    }
    end += 1 + 4;
    if (end > msg.length) ok = false;
  }
  const out = Buffer.from(msg.subarray(0, ok ? end : 12));
  out[2] = 0x80 | (msg[2]! & 0x79); // QR, opcode and RD kept
  out[3] = 0x05; // RCODE REFUSED
  out.writeUInt16BE(ok ? 1 : 0, 4);
  out.writeUInt16BE(0, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(0, 10);
  return out;
}
