/**
 * Where a Docker engine is: the one shape config resolves (config/docker-endpoint.ts), the docker
 * adapter connects to, and `sbx doctor` asks.
 */

/**
 * TLS for a TCP engine. `ca`, `cert` and `key` are PEM *contents* (read once, at resolution), not
 * paths; absent `ca` with `verify` means the system's trusted roots. `verify: false` skips the
 * server certificate check (DOCKER_TLS without DOCKER_TLS_VERIFY, a context's SkipTLSVerify).
 */
export interface DockerTls {
  ca?: string;
  cert?: string;
  key?: string;
  verify: boolean;
}

/**
 * Where the Docker engine is, chosen as the docker CLI chooses it. `source` names what chose it:
 * `providers.docker.socket_path`, `providers.docker.host`, `DOCKER_HOST`, `docker context "NAME"`
 * or `default`; `description` is one human line such as `unix:///var/run/docker.sock (DOCKER_HOST)`.
 */
export type DockerEndpoint =
  | { kind: 'unix'; socketPath: string; source: string; description: string }
  | { kind: 'tcp'; host: string; port: number; tls: DockerTls | null; source: string; description: string };
