import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSbx } from './run-sbx.js';

describe('sbx serve with a blank key', () => {
  it('exits 3 before listening and names the key, not its value', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-cli-serve-blank-'));
    try {
      const r = await runSbx(['serve', '--port', '0'], {
        cwd: dir,
        env: {
          HOME: dir,
          SVC_AUTH_ENABLED: 'true',
          SVC_AUTH_API_KEY: '   ',
          SVC_PROVIDERS_DEFAULT: 'mock',
          SVC_DATABASE_PATH: join(dir, 'sbx.db'),
        },
      });
      expect(r.code).toBe(3);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^sbx: invalid configuration/);
      expect(r.stderr).toContain('auth.api_key: is blank (only whitespace); set a real value or remove the key (from SVC_AUTH_API_KEY)');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
