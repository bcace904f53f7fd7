import { Type, type Static, type TSchema } from '@sinclair/typebox';

/** Error body of spec Part 7. Extra members (e.g. timed-out exec output) may follow. */
export const ErrorBody = Type.Object({ code: Type.String(), message: Type.String() }, { $id: 'ErrorBody', additionalProperties: true });
export type ErrorBody = Static<typeof ErrorBody>;

/**
 * Largest value an integer request field may carry: both stores keep such fields in 32-bit
 * INTEGER columns (PostgreSQL would refuse a larger one with a 500), so the schema refuses it first.
 */
export const MAX_INT32 = 2_147_483_647;

export const StringMap = Type.Record(Type.String(), Type.String());
export const Timestamp = Type.String({ format: 'date-time' });
export const Duration = Type.String({ description: 'Go-style duration string, e.g. 30s, 5m, 1h30m' });

export const StatusBody = <T extends string>(status: T) => Type.Object({ status: Type.Literal(status) });

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** The static type of a schema, re-exported so the client library needs no schema-library import. */
export type { Static } from '@sinclair/typebox';
