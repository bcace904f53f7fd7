import { PerformanceObserver } from 'node:perf_hooks';
import { formatDuration } from '../../../shared/duration.js';

let gcCycles = 0;
let observer: PerformanceObserver | undefined;

/** Starts counting garbage collections (once per process); harmless to call again. */
export function startGcCounter(): void {
  if (observer) return;
  observer = new PerformanceObserver((list) => {
    gcCycles += list.getEntries().length;
  });
  observer.observe({ entryTypes: ['gc'] });
}

export interface ProcessStats {
  uptime: string;
  uptime_seconds: number;
  /** Go's goroutine count has no Node twin: active handles and requests keeping the loop busy. */
  goroutines: number;
  memory: { alloc: number; sys: number; heap_alloc: number; gc_cycles: number };
}

/** Process facts for diagnostics and JSON metrics (spec 2.15 `process`, 2.16). */
export function processStats(startedAt: number): ProcessStats {
  startGcCounter();
  const mem = process.memoryUsage();
  const uptimeMs = Math.max(0, Date.now() - startedAt);
  return {
    uptime: formatDuration(Math.floor(uptimeMs / 1000) * 1000),
    uptime_seconds: Math.floor(uptimeMs / 1000),
    goroutines: activeResources(),
    memory: {
      // Go's Alloc/HeapAlloc are live heap bytes; Sys is what the runtime took from the OS.
      alloc: mem.heapUsed + mem.external,
      sys: mem.rss,
      heap_alloc: mem.heapUsed,
      gc_cycles: gcCycles,
    },
  };
}

function activeResources(): number {
  const p = process as NodeJS.Process & { getActiveResourcesInfo?: () => string[] };
  return typeof p.getActiveResourcesInfo === 'function' ? p.getActiveResourcesInfo().length : 0;
}

const GOARCH: Record<string, string> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' };

/** Diagnostics `build`: version, OS and architecture in Go's words (`linux`, `amd64`), plus the runtime. */
export function buildInfo(version: string): { version: string; goos: string; goarch: string; runtime: string } {
  return {
    version,
    goos: process.platform === 'win32' ? 'windows' : process.platform,
    goarch: GOARCH[process.arch] ?? process.arch,
    runtime: `node ${process.version}`,
  };
}
