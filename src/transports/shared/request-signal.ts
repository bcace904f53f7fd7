import type { FastifyReply } from 'fastify';

/** An AbortSignal that fires when the client goes away before the response is finished. */
export function abortOnClose(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort(new Error('client disconnected'));
  });
  return ac.signal;
}
