/**
 * The transport seam of the client: how one HTTP request travels. `Http` (http.ts) builds the URL,
 * the headers (credential rules included) and the body, and maps answers to SbxError; a transport
 * only moves bytes. Two exist: undici (undici-transport.ts, the default in Node: keep-alive agent)
 * and fetch (fetch-transport.ts: browsers and Node alike). Nothing here is Node-only.
 */

/** One request as the transport sends it: absolute URL, final headers (lower-case names). */
export interface TransportRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
}

/** A response body: read once, whole (`text`, `arrayBuffer`) or as byte chunks (`for await`). */
export interface ResponseBody extends AsyncIterable<Uint8Array> {
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
  /** Stops reading and releases the connection; harmless when already consumed. */
  cancel(): void;
}

export interface TransportResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string | string[] | undefined>;
  body: ResponseBody;
}

export interface Transport {
  /** Sent as `User-Agent` when set (a browser sets its own). */
  readonly userAgent?: string;
  /**
   * Sends a request and answers whatever the status. A network failure rejects with the
   * underlying error (the client maps it to `unavailable`); an abort rejects as the signal says.
   */
  request(req: TransportRequest): Promise<TransportResponse>;
  /** Releases pooled connections so a process can exit. */
  close?(): Promise<void>;
}
