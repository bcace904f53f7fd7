/** The unit tier's own promise (DESIGN §6): no child process, no listening port (test/helpers/unit-guard.ts). */
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { expect, it } from 'vitest';

it('a child process fails the test that asks for one', () => {
  expect(() => spawn('true')).toThrow(/unit tier starts no child process/);
  expect(() => execFile('true')).toThrow(/integration tier/);
});

it('listening on a port fails the test that asks for one', () => {
  expect(() => createServer().listen(0)).toThrow(/opens no port/);
  expect(() => createNetServer().listen(0, '127.0.0.1')).toThrow(/opens no port/);
});
