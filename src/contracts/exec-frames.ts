/**
 * The binary exec stream's wire constants, in a module of their own that imports nothing: the
 * typed client (browser build included) and the server share them without the schema library.
 */
// A streamed exec asked for with `Accept: application/octet-stream` answers frames instead of NDJSON:
// 1 byte stream id, 4 bytes big-endian length, then that many bytes. stdout and stderr frames carry
// the raw output (no text decoding, no base64); the stream ends with one exit frame (JSON
// `{exit_code, duration, timed_out?}`) or, when sbx itself failed after the headers, one error frame
// (JSON `{code, message}`). NDJSON stays the default.

/** The media type a client asks for (Accept) and the answer carries (Content-Type). */
export const EXEC_BINARY_MEDIA_TYPE = 'application/octet-stream';
/** Stream ids of the binary exec frames. */
export const EXEC_FRAME = { stdout: 1, stderr: 2, exit: 3, error: 4 } as const;
/** Bytes of a frame header: the stream id and the length. */
export const EXEC_FRAME_HEADER = 5;
