import { Type, type Static, type TSchema } from '@sinclair/typebox';

/** Error body of spec Part 7. Extra members (e.g. timed-out exec output) may follow. */
export const ErrorBody = Type.Object(
  { code: Type.String(), message: Type.String() },
  { $id: 'ErrorBody', additionalProperties: true },
);
export type ErrorBody = Static<typeof ErrorBody>;

export const StringMap = Type.Record(Type.String(), Type.String());
export const Timestamp = Type.String({ format: 'date-time' });
export const Duration = Type.String({ description: 'Go-style duration string, e.g. 30s, 5m, 1h30m' });

export const StatusBody = <T extends string>(status: T) =>
  Type.Object({ status: Type.Literal(status) });

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
