/**
 * Stopping the server has a deadline: a connection that never finishes a request (here one that
 * sends nothing at all, as a browser's speculative preconnect does) is cut once it passes, instead
 * of holding the stop until Node's own request timeout a minute later.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';

describe('close deadline', () => {
  it('a silent connection does not hold the stop past the deadline', async () => {
    const srv = await startTestServer({}, { closeDeadlineMs: 300 });
    const { port } = new URL(srv.url);
    const sock = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
    sock.on('error', () => undefined);
    const started = Date.now();
    await srv.close();
    await closed;
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 20_000);
});
