/** Route documentation fields used by the OpenAPI generator. */
declare module 'fastify' {
  interface FastifySchema {
    tags?: string[];
    summary?: string;
    description?: string;
    /** Leave the route out of the OpenAPI document. */
    hide?: boolean;
  }
}

export {};
