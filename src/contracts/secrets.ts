import { Type, type Static } from '@sinclair/typebox';
import { Timestamp } from './common.js';

/** Secrets the sandbox never sees (DESIGN.md §15). Names, values and hosts are checked by core (400 naming the rule). */
const NAME_RULE =
  '[A-Z_][A-Z0-9_]{0,63}; refused: HTTP_PROXY, HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, ' +
  'REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, PATH, HOME, LD_*';
const VALUE = 'the secret: at most 64 KiB (UTF-8), no CR, LF or NUL (it is sent in HTTP header values); stored encrypted, never answered';
const HOSTS = 'egress rules (host name, *.name, address or CIDR, optional :port) naming where the value may be sent; 1 to 64';

export const SecretName = Type.String({ minLength: 1, maxLength: 64, description: NAME_RULE });

/** Names a spawn or template binds: each `NAME` holds a placeholder in the sandbox; needs network `filtered`. */
export const SecretBindings = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  maxItems: 64,
  description:
    "sbx extension: secrets to bind (names in the spawning owner's namespace); each variable NAME holds a placeholder " +
    'inside the sandbox, the egress gateway puts the value into requests to the secret\'s hosts; needs network "filtered"',
});

export const CreateSecretRequest = Type.Object(
  {
    name: Type.String({ maxLength: 256, description: NAME_RULE }),
    value: Type.String({ description: VALUE }),
    hosts: Type.Array(Type.String(), { description: HOSTS }),
    allow_plain_http: Type.Optional(
      Type.Boolean({ description: 'also put the value into plain-HTTP requests (it then crosses the wire in clear); default false' }),
    ),
  },
  { additionalProperties: false },
);
export type CreateSecretRequest = Static<typeof CreateSecretRequest>;

export const UpdateSecretRequest = Type.Object(
  {
    value: Type.Optional(Type.String({ description: VALUE })),
    hosts: Type.Optional(Type.Array(Type.String(), { description: HOSTS })),
    allow_plain_http: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type UpdateSecretRequest = Static<typeof UpdateSecretRequest>;

/** A secret as answered: never its value. */
export const Secret = Type.Object(
  {
    name: Type.String(),
    owner_id: Type.Union([Type.String(), Type.Null()], { description: 'the owner whose namespace holds it; null: no owner' }),
    hosts: Type.Array(Type.String()),
    allow_plain_http: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
    fingerprint: Type.String({ description: 'first 8 hex of a keyed hash of the value: changes when the value does' }),
  },
  { $id: 'Secret' },
);
export type Secret = Static<typeof Secret>;

export const SecretOwnerQuery = Type.Object(
  { owner_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "admins: another owner's namespace" })) },
  { additionalProperties: false },
);
export type SecretOwnerQuery = Static<typeof SecretOwnerQuery>;

/** A sandbox's bound secrets with their values, for the egress gateway of the worker that runs it (worker credentials). */
export const WorkerSandboxSecrets = Type.Object({
  secrets: Type.Array(
    Type.Object({
      name: Type.String(),
      placeholder: Type.String(),
      value: Type.String(),
      hosts: Type.Array(Type.String()),
      allow_plain_http: Type.Boolean(),
    }),
  ),
});
export type WorkerSandboxSecrets = Static<typeof WorkerSandboxSecrets>;
