import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ErrorBody } from '../../../contracts/common.js';
import { serveExecSocket } from '../../shared/exec-socket.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { sendError } from '../errors.js';

export const EXEC_WS_PATH = '/api/v1/sandboxes/:id/exec/ws';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });

const DESCRIPTION = [
  'Upgrade to a WebSocket (JSON text frames). Client messages: `{type:"start", command, args, env, workdir, ' +
    'timeout, mode, tty, cols, rows, binary}`',
  '(first; a plain exec request without `type` is a start), `{type:"stdin", data, encoding?: "utf8"|"base64"}`, `{type:"stdin_eof"}`,',
  '`{type:"resize", cols, rows}`, `{type:"signal", signal}`. Server messages: `{type:"stdout"|"stderr", data}` (with `binary`, output that',
  'is not valid UTF-8 comes as `{type, data: <base64>, encoding:"base64"}`: an sbx extension for byte-exact output), then',
  '`{type:"exit", exit_code, duration, timed_out?}` or `{type:"error", code, message}`, after which the server closes the socket.',
  'Limits, ownership, events and console capture are those of the HTTP exec; closing the socket kills the command.',
].join(' ');

/**
 * The WebSocket exec (DESIGN.md §3 "WebSocket exec"): the same ExecService as the HTTP exec, with
 * stdin, resizes and signals as live streams into the provider. Auth, rate limits and the id
 * check run on the upgrade request (a refusal is a plain HTTP answer); everything after the
 * upgrade is reported in messages.
 */
export function execWsRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.route<{ Params: { id: string } }>({
    method: 'GET',
    url: EXEC_WS_PATH,
    schema: {
      tags: ['exec'],
      summary: 'Run a command over a WebSocket: live stdin, terminal, resize, signals',
      description: DESCRIPTION,
      params: IdParams,
      response: {
        101: { description: 'Switching Protocols: the exec session runs over the WebSocket (messages above)' },
        400: ErrorBody,
        426: ErrorBody,
        429: ErrorBody,
      },
    },
    // A plain GET (no Upgrade header).
    handler: async (_request, reply) => {
      reply.header('Upgrade', 'websocket');
      reply.header('Connection', 'Upgrade');
      return sendError(reply, 426, 'bad_request', 'this endpoint is a WebSocket: send an Upgrade: websocket request');
    },
    wsHandler: (socket: WebSocket, raw: FastifyRequest) => {
      const request = raw as FastifyRequest<{ Params: { id: string } }>;
      const caller = callerOf(request);
      serveExecSocket(socket, (input, signal) => deps.exec.start(request.params.id, input, caller, signal), {
        onInternalError: (err) => request.log.error({ err }, 'websocket exec failed'),
      });
    },
  });
}
