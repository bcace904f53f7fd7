/*
 * The firecracker guest agent (sbx-agent --vsock-guest [--port N] | --unix PATH): listens on the
 * guest's vsock port (or, for tests on a host, a unix socket standing in for it) and serves each
 * connection in a process of its own: one operation, then the connection is closed. A malformed
 * frame closes that connection only; the listener keeps serving. docs/providers/firecracker.md.
 */
#define _GNU_SOURCE
#include "guest.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT 1024
#define MAX_HANDLERS 128
#define LINGER_MS 10000

extern char **environ;
char **guest_env;

static int wait_fd(int fd, short events, int timeout_ms) {
  struct pollfd p = {fd, events, 0};
  for (;;) {
    int r = poll(&p, 1, timeout_ms);
    if (r > 0) return 0;
    if (r == 0) return -1;
    if (errno != EINTR) return -1;
  }
}

int io_recv(int fd, void *buf, size_t n, int timeout_ms) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r > 0) { p += r; n -= (size_t)r; continue; }
    if (r == 0) return -1;
    if (errno == EINTR) continue;
    if (errno != EAGAIN || wait_fd(fd, POLLIN, timeout_ms)) return -1;
  }
  return 0;
}

int io_send(int fd, const void *buf, size_t n, int timeout_ms) {
  const unsigned char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) { p += w; n -= (size_t)w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w == 0 || errno != EAGAIN || wait_fd(fd, POLLOUT, timeout_ms)) return -1;
  }
  return 0;
}

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

void frame_prefix(unsigned char p[8], size_t hlen, size_t dlen) {
  for (int i = 0; i < 4; i++) {
    p[i] = (unsigned char)(hlen >> (24 - 8 * i));
    p[4 + i] = (unsigned char)(dlen >> (24 - 8 * i));
  }
}

JVal *recv_header(int fd, uint32_t *dlen, int timeout_ms) {
  unsigned char pre[8];
  if (io_recv(fd, pre, 8, timeout_ms)) return NULL;
  uint32_t hlen = be32(pre);
  *dlen = be32(pre + 4);
  if (hlen > MAX_HEADER || *dlen > MAX_DATA) return NULL;
  char *text = malloc(hlen + 1);
  if (!text || io_recv(fd, text, hlen, IO_TIMEOUT_MS)) { free(text); return NULL; }
  JVal *h = json_parse(text, hlen);
  free(text);
  if (h && h->t != J_OBJ) { json_free(h); return NULL; }
  return h;
}

int skip_data(int fd, uint32_t dlen) {
  char buf[16384];
  while (dlen > 0) {
    size_t n = dlen < sizeof buf ? dlen : sizeof buf;
    if (io_recv(fd, buf, n, IO_TIMEOUT_MS)) return -1;
    dlen -= (uint32_t)n;
  }
  return 0;
}

int send_frame(int fd, const char *header, size_t hlen, const void *data, size_t dlen) {
  unsigned char pre[8];
  frame_prefix(pre, hlen, dlen);
  if (io_send(fd, pre, 8, IO_TIMEOUT_MS) || io_send(fd, header, hlen, IO_TIMEOUT_MS)) return -1;
  return dlen ? io_send(fd, data, dlen, IO_TIMEOUT_MS) : 0;
}

int send_text(int fd, const char *header) { return send_frame(fd, header, strlen(header), NULL, 0); }

int send_error(int fd, const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Buf b = {0};
  buf_puts(&b, "{\"type\":\"error\",\"code\":");
  buf_jstr(&b, code, strlen(code));
  buf_puts(&b, ",\"message\":");
  buf_jstr(&b, msg, strlen(msg));
  buf_puts(&b, "}");
  int r = b.oom ? -1 : send_frame(fd, b.p, b.len, NULL, 0);
  buf_free(&b);
  return r;
}

int send_errno(int fd, int err, const char *path) {
  switch (err) {
    case ENOENT: case ENOTDIR: return send_error(fd, "not_found", "%.900s: no such file or directory", path);
    case EISDIR: return send_error(fd, "bad_request", "%.900s is a directory", path);
    case ENOTEMPTY: return send_error(fd, "conflict", "%.900s is not empty", path);
    case EEXIST: return send_error(fd, "conflict", "%.900s exists", path);
    case EACCES: case EPERM: case EROFS: return send_error(fd, "forbidden", "%.900s: %s", path, strerror(err));
    case EINVAL: case ENAMETOOLONG: case ELOOP: case EXDEV: return send_error(fd, "bad_request", "%.900s: %s", path, strerror(err));
    default: return send_error(fd, "io_error", "%.900s: %s", path, strerror(err));
  }
}

const char *want_path(int fd, const JVal *h, const char *key) {
  const char *p = json_cstr(json_get(h, key));
  if (p && p[0] == '/') return p;
  send_error(fd, "bad_request", "%s must be an absolute path", key);
  return NULL;
}

/*
 * After the answer the connection stays open, taking whatever the host still sends (stdin of a
 * command that has exited, say), until the host closes it: a host writing into a connection the
 * agent had closed would get a reset, and could lose the answer with it. Bounded by LINGER_MS.
 */
static void linger(int fd) {
  char buf[16384];
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    long left = LINGER_MS - ((long)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
    if (left <= 0) return;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n == 0 || errno != EAGAIN || wait_fd(fd, POLLIN, (int)left)) return;
  }
}

/* One connection, one operation. */
static void serve(int fd) {
  uint32_t dlen;
  JVal *h = recv_header(fd, &dlen, FIRST_TIMEOUT_MS);
  if (!h) return; /* a malformed first frame: the connection is closed unanswered */
  if (skip_data(fd, dlen)) { json_free(h); return; }
  const char *op = json_cstr(json_get(h, "op"));
  int broken = 0; /* the host broke the protocol mid-operation: close, do not linger */
  if (!op) send_error(fd, "bad_request", "the first frame names no op");
  else if (!strcmp(op, "ping")) send_text(fd, "{\"type\":\"ok\"}");
  else if (!strcmp(op, "exec")) broken = op_exec(fd, h);
  else if (!strcmp(op, "read")) op_read(fd, h);
  else if (!strcmp(op, "write")) broken = op_write(fd, h);
  else if (!strcmp(op, "stat")) op_stat(fd, h);
  else if (!strcmp(op, "list")) op_list(fd, h);
  else if (!strcmp(op, "delete")) op_delete(fd, h);
  else if (!strcmp(op, "move")) op_move(fd, h);
  else if (!strcmp(op, "chmod")) op_chmod(fd, h);
  else send_error(fd, "bad_request", "unknown op %.100s", op);
  json_free(h);
  if (!broken) linger(fd);
}

static int listen_unix(const char *path) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(path) + 5 >= sizeof addr.sun_path) { errno = ENAMETOOLONG; return -1; }
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s.new", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  unlink(addr.sun_path);
  mode_t old = umask(0177); /* 0600: the agent's own user only */
  int r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
  umask(old);
  /* Bound under a temp name, then renamed: nobody sees a socket that does not listen yet. */
  if (r || listen(fd, 64) || rename(addr.sun_path, path)) { close(fd); return -1; }
  return fd;
}

static int listen_vsock(unsigned port) {
  struct sockaddr_vm addr;
  memset(&addr, 0, sizeof addr);
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_ANY;
  addr.svm_port = port;
  int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) || listen(fd, 64)) { close(fd); return -1; }
  return fd;
}

/* vsock: only the host (CID 2, Firecracker's side of the device) may drive the agent, not a process in the guest. */
static int from_host(int fd) {
  struct sockaddr_vm peer;
  socklen_t len = sizeof peer;
  return getpeername(fd, (struct sockaddr *)&peer, &len) == 0 && peer.svm_family == AF_VSOCK && peer.svm_cid == VMADDR_CID_HOST;
}

static void on_chld(int sig) { (void)sig; }

static int usage(void) {
  fprintf(stderr, "usage: sbx-agent --vsock-guest [--port N] | --unix PATH\n");
  return 2;
}

/* The commands' base environment: the agent's own minus shell leftovers, with a PATH. */
static void base_env(void) {
  size_t n = 0;
  for (char **e = environ; *e; e++) n++;
  guest_env = calloc(n + 2, sizeof *guest_env);
  if (!guest_env) exit(1);
  n = 0;
  int has_path = 0;
  for (char **e = environ; *e; e++) {
    if (!strncmp(*e, "SHLVL=", 6) || !strncmp(*e, "PWD=", 4) || !strncmp(*e, "OLDPWD=", 7) || !strncmp(*e, "_=", 2)) continue;
    has_path |= !strncmp(*e, "PATH=", 5);
    guest_env[n++] = *e;
  }
  if (!has_path) guest_env[n++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

int guest_main(int argc, char **argv) {
  const char *unix_path = NULL;
  int vsock = 0;
  unsigned long port = DEFAULT_PORT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--vsock-guest")) vsock = 1;
    else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
      char *end;
      port = strtoul(argv[++i], &end, 10);
      if (*end || port == 0 || port > 0xffffffffUL) return usage();
    } else if (!strcmp(argv[i], "--unix") && i + 1 < argc) unix_path = argv[++i];
    else return usage();
  }
  if (vsock == !!unix_path) return usage();
  base_env();
  srand((unsigned)getpid() ^ (unsigned)time(NULL));
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_NOCLDSTOP; /* no SA_RESTART: accept returns, and the finished are reaped */
  sigaction(SIGCHLD, &sa, NULL);
  int lfd = vsock ? listen_vsock((unsigned)port) : listen_unix(unix_path);
  if (lfd < 0) {
    fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", vsock ? "vsock" : unix_path, strerror(errno));
    if (vsock) sleep(2); /* init respawns it: not in a hot loop on a kernel without vsock */
    return 1;
  }
  pid_t handlers[MAX_HANDLERS];
  int live = 0;
  for (;;) {
    /* Reap finished handlers (and, as a guest's PID 1, anything else orphaned). */
    pid_t pid;
    while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
      for (int i = 0; i < live; i++)
        if (handlers[i] == pid) { handlers[i] = handlers[--live]; break; }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EINTR && errno != ECONNABORTED) usleep(10000); /* EMFILE and the like: do not spin */
      continue;
    }
    if (live >= MAX_HANDLERS || (vsock && !from_host(fd))) { close(fd); continue; }
    pid = fork();
    if (pid == 0) {
      close(lfd);
      sa.sa_handler = SIG_DFL;
      sigaction(SIGCHLD, &sa, NULL);
      serve(fd);
      _exit(0);
    }
    if (pid > 0) handlers[live++] = pid;
    close(fd);
  }
}
