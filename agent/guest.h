/*
 * The firecracker guest agent: sbx-agent's second mode (docs/providers/firecracker.md, DESIGN §12).
 * One operation per connection; frames `[u32 BE header length][u32 BE data length][JSON header][data]`.
 */
#ifndef SBX_AGENT_GUEST_H
#define SBX_AGENT_GUEST_H
#include <stddef.h>
#include <stdint.h>
#include "common.h"
#include "json.h"

#define MAX_HEADER (1u << 20)
#define MAX_DATA (4u << 20)
#define CHUNK (256u << 10)       /* file data per frame */
#define FIRST_TIMEOUT_MS 30000   /* the first frame of a connection */
#define IO_TIMEOUT_MS 60000      /* any later read or write that makes no progress */

/* guest.c: blocking frame I/O on the connection (non-blocking fd, every wait bounded). */
int io_recv(int fd, void *buf, size_t n, int timeout_ms);
int io_send(int fd, const void *buf, size_t n, int timeout_ms);
/* The next frame's header (an object); NULL at the end, on a timeout or a malformed frame. */
JVal *recv_header(int fd, uint32_t *dlen, int timeout_ms);
int skip_data(int fd, uint32_t dlen);
void frame_prefix(unsigned char p[8], size_t hlen, size_t dlen);
int send_frame(int fd, const char *header, size_t hlen, const void *data, size_t dlen);
int send_text(int fd, const char *header);
int send_error(int fd, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An errno as the protocol's error: not_found, bad_request, conflict, forbidden, or io_error. */
int send_errno(int fd, int err, const char *path);
/* The absolute path in h[key], or NULL after answering bad_request. */
const char *want_path(int fd, const JVal *h, const char *key);

/* guest-files.c */
void op_stat(int fd, const JVal *h);
void op_list(int fd, const JVal *h);
void op_delete(int fd, const JVal *h);
void op_move(int fd, const JVal *h);
void op_chmod(int fd, const JVal *h);
void op_read(int fd, const JVal *h);
/* -1: the host went away or broke the protocol (the connection is just closed). */
int op_write(int fd, const JVal *h);

/* guest-exec.c: the commands' base environment is the agent's own (set by guest_main). */
extern char **guest_env;
/* -1: the host went away or broke the protocol (the command is killed, the connection just closed). */
int op_exec(int fd, const JVal *h);
#endif
