import { formatDuration } from '../../shared/duration.js';
import type { Clock } from '../ports/index.js';

export type RateLimitKeyBy = 'owner' | 'api_key' | 'ip';

/** Spec 8 rate-limit keys, durations already in ms. */
export interface RateLimitSettings {
  enabled: boolean;
  requests_per_minute: number;
  burst: number;
  key_by: RateLimitKeyBy;
  bucket_ttl_ms: number;
  cleanup_interval_ms: number;
}

/** Outcome of one request against its bucket. */
export interface RateDecision {
  allowed: boolean;
  /** `X-RateLimit-Limit`: the configured requests per minute. */
  limit: number;
  /** `X-RateLimit-Remaining`: whole tokens left after this request. */
  remaining: number;
  /** `Retry-After` seconds when limited (integer ≥ 1); 0 when allowed. */
  retry_after_s: number;
  /** Limited, and the bucket's previous request was allowed: the moment worth one event. */
  first_denial: boolean;
}

/** Diagnostics `rate_limit` member (spec 2.15). */
export interface RateLimitStats {
  enabled: boolean;
  requests_per_minute: number;
  burst: number;
  key_by: RateLimitKeyBy;
  active_buckets: number;
  allowed_total: number;
  limited_total: number;
  evicted_total: number;
  bucket_ttl: string;
  cleanup_interval: string;
}

interface Bucket {
  tokens: number;
  /** Clock ms of the last refill (= last request). */
  last: number;
  /** The last request was refused. */
  throttled: boolean;
}

/**
 * In-memory token buckets (spec 8): `burst` tokens per bucket, refilled continuously at
 * `requests_per_minute`. Keys are opaque digests chosen by the transport (it hashes identities
 * before they get here), so nothing in memory or in `stats()` names an owner, key or address.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private allowed = 0;
  private limited = 0;
  private evicted = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly settings: RateLimitSettings,
    private readonly clock: Clock,
  ) {}

  get enabled(): boolean {
    return this.settings.enabled;
  }

  /** Takes one token from the bucket of `keyDigest`. */
  take(keyDigest: string): RateDecision {
    const { burst, requests_per_minute: rpm } = this.settings;
    const now = this.clock.now().getTime();
    const perMs = rpm / 60_000;
    let b = this.buckets.get(keyDigest);
    if (!b) {
      b = { tokens: burst, last: now, throttled: false };
      this.buckets.set(keyDigest, b);
    } else {
      b.tokens = Math.min(burst, b.tokens + Math.max(0, now - b.last) * perMs);
      b.last = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      b.throttled = false;
      this.allowed++;
      return { allowed: true, limit: rpm, remaining: Math.floor(b.tokens), retry_after_s: 0, first_denial: false };
    }
    this.limited++;
    const first_denial = !b.throttled;
    b.throttled = true;
    const waitMs = perMs > 0 ? (1 - b.tokens) / perMs : 60_000;
    return { allowed: false, limit: rpm, remaining: 0, retry_after_s: Math.max(1, Math.ceil(waitMs / 1000)), first_denial };
  }

  /** Drops buckets idle for longer than `bucket_ttl`; returns how many. */
  prune(): number {
    const cutoff = this.clock.now().getTime() - this.settings.bucket_ttl_ms;
    let n = 0;
    for (const [k, b] of this.buckets) {
      if (b.last <= cutoff) {
        this.buckets.delete(k);
        n++;
      }
    }
    this.evicted += n;
    return n;
  }

  /** Starts the pruning timer (unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer || this.settings.cleanup_interval_ms <= 0) return;
    this.timer = setInterval(() => this.prune(), this.settings.cleanup_interval_ms);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  stats(): RateLimitStats {
    const s = this.settings;
    return {
      enabled: s.enabled,
      requests_per_minute: s.requests_per_minute,
      burst: s.burst,
      key_by: s.key_by,
      active_buckets: this.buckets.size,
      allowed_total: this.allowed,
      limited_total: this.limited,
      evicted_total: this.evicted,
      bucket_ttl: formatDuration(s.bucket_ttl_ms),
      cleanup_interval: formatDuration(s.cleanup_interval_ms),
    };
  }
}
