/** PostgreSQL for the suites that need it: SBX_TEST_POSTGRES_DSN (scripts/test-postgres-up.sh prints one). */
import pg from 'pg';

export const POSTGRES_DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';

/** Runs one statement on its own connection. */
export async function sql(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_DSN });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** The DSN with a search_path that puts every table in `schema` (a fresh one per suite). */
export function dsnInSchema(schema: string): string {
  return `${POSTGRES_DSN}${POSTGRES_DSN.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}
