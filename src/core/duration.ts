/** Durations where a bad one is the caller's fault: the pure parsing lives in src/shared/duration.ts. */
import { durationProblem, tryParseDuration } from '../shared/duration.js';
import { badRequest } from './errors.js';

/** Parses a duration or throws `bad_request` naming the field. */
export function parseDuration(input: string, field = 'duration'): number {
  const problem = durationProblem(input, field);
  if (problem !== null) throw badRequest(problem);
  return tryParseDuration(input)!;
}
