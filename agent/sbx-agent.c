/*
 * sbx-agent: the in-sandbox agent of the sbx docker provider (docs/agent.md).
 *
 * Started beside PID 1 in a sandbox container, as the container's own user. Listens on a unix
 * socket (argv[1]) and serves a multiplexed framed protocol: exec (argv, env, cwd, stdin, signals
 * to the process group and to every process carrying the exec's marker, output with per-stream
 * credit, exit code), and file read / write (temp file + rename) / stat in one round trip.
 *
 * Frame: [u32 len][u32 stream id][u8 type][payload], little-endian, len = 5 + payload length.
 * C99 + POSIX/Linux, libc only; built static (gcc -static -O2).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "watch.h"

extern char **environ;

#define VERSION 2 /* 2: WATCH */
#define MAX_FRAME (1u << 20) + 4096u /* payload bound host -> agent */
#define WINDOW (2u << 20)            /* unacknowledged output bytes per stream */
#define BACKLOG (4u << 20)           /* queued bytes per connection before streams pause */
/* After the command itself exited, its output is read until it has been quiet this long (or for
   at most QUIET_CAP_MS): then the exec is answered, whatever a process it left running (`server &`)
   still holds open. Those pipes are drained and discarded, never closed, so no SIGPIPE kills it. */
#define QUIET_MS 200
#define QUIET_CAP_MS 2000
#define MAX_DRAINS 256
#define CHUNK 65536
#define MAX_CONNS 8
#define MAX_STREAMS 256

enum { T_EXEC = 1, T_STDIN = 2, T_EOF = 3, T_SIGNAL = 4, T_CREDIT = 5, T_READ = 16, T_WRITE = 17, T_WDATA = 18, T_WEND = 19, T_STAT = 20, T_CANCEL = 21, T_WATCH = 22 };
enum { R_HELLO = 128, R_STARTED = 129, R_STDOUT = 130, R_STDERR = 131, R_EXIT = 132, R_ERROR = 133, R_SIZE = 134, R_DATA = 135, R_END = 136, R_STAT = 137, R_STDIN_ACK = 138, R_WEVENT = 139 };

typedef struct {
  int fd;
  unsigned char *in;
  size_t in_len, in_cap;
  unsigned char *out;
  size_t out_len, out_off, out_cap;
} Conn;

typedef struct {
  int used, kind; /* 1 exec, 2 read, 3 write, 4 watch */
  int conn;
  uint32_t id;
  /* exec */
  pid_t pid;
  int fds[2];   /* stdout, stderr; -1 when at EOF */
  int in_fd;    /* stdin pipe, -1 closed */
  unsigned char *pend; /* stdin bytes not yet written */
  size_t pend_len, pend_off;
  int eof_wanted, exited, status;
  long long exit_ms, quiet_since; /* monotonic ms: when the command exited, when output last came */
  char marker[96];
  /* read / write */
  int fd, dirfd;
  uint64_t left;
  uint32_t unacked;
  unsigned mode;
  char tmp[64], base[256];
  /* watch */
  Watch *watch;
} Stream;

static Conn conns[MAX_CONNS];
static int root_fd = -1; /* "/": where watches walk from (watch.c) */
static Stream streams[MAX_STREAMS];
static int listen_fd = -1, chld_pipe[2];
/* --once (a user agent, docs/agent.md): serve one connection, exit when it closes (or none comes in 10 s). */
static int once_mode, served;
/* Output pipes of commands already answered, still held by what they left running. */
static int drains[MAX_DRAINS];

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
static char **base_env;
static char token[128];

static void put32(unsigned char *p, uint32_t v) { p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24; }
static void put64(unsigned char *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static uint32_t get32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static int reserve(unsigned char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 65536;
  while (n < need) n *= 2;
  unsigned char *b = realloc(*buf, n);
  if (!b) return -1;
  *buf = b;
  *cap = n;
  return 0;
}

/* Queues one frame; two payload parts so data need not be copied twice. */
static void send_frame(int ci, uint32_t id, int type, const void *a, size_t alen, const void *b, size_t blen) {
  Conn *c = &conns[ci];
  if (c->fd < 0) return;
  if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
  if (reserve(&c->out, &c->out_cap, c->out_len + 9 + alen + blen)) return;
  unsigned char *p = c->out + c->out_len;
  put32(p, (uint32_t)(5 + alen + blen));
  put32(p + 4, id);
  p[8] = (unsigned char)type;
  if (alen) memcpy(p + 9, a, alen);
  if (blen) memcpy(p + 9 + alen, b, blen);
  c->out_len += 9 + alen + blen;
}

static void send_error(int ci, uint32_t id, uint32_t stage, uint32_t err, uint64_t extra) {
  unsigned char p[16];
  put32(p, stage);
  put32(p + 4, err);
  put64(p + 8, extra);
  send_frame(ci, id, R_ERROR, p, 16, NULL, 0);
}

static Stream *find(int ci, uint32_t id) {
  for (int i = 0; i < MAX_STREAMS; i++)
    if (streams[i].used && streams[i].conn == ci && streams[i].id == id) return &streams[i];
  return NULL;
}

static Stream *alloc_stream(int ci, uint32_t id, int kind) {
  if (find(ci, id)) return NULL;
  for (int i = 0; i < MAX_STREAMS; i++)
    if (!streams[i].used) {
      Stream *s = &streams[i];
      memset(s, 0, sizeof *s);
      s->used = 1;
      s->kind = kind;
      s->conn = ci;
      s->id = id;
      s->fds[0] = s->fds[1] = s->in_fd = s->fd = s->dirfd = -1;
      return s;
    }
  return NULL;
}

static void closefd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void free_stream(Stream *s) {
  closefd(&s->fds[0]);
  closefd(&s->fds[1]);
  closefd(&s->in_fd);
  closefd(&s->fd);
  if (s->kind == 3 && s->tmp[0] && s->dirfd >= 0) unlinkat(s->dirfd, s->tmp, 0);
  closefd(&s->dirfd);
  free(s->pend);
  if (s->watch) { watch_close(s->watch); free(s->watch); s->watch = NULL; }
  s->used = 0;
}

/* Sends sig to the exec's process group and to every process whose environment holds its marker. */
static void signal_tree(Stream *s, int sig) {
  if (s->pid > 0 && !s->exited) kill(-s->pid, sig);
  if (!s->marker[0]) return;
  size_t mlen = strlen(s->marker);
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  static char buf[65536];
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    for (ssize_t i = 0; i < n;) {
      size_t l = strlen(buf + i);
      if (l == mlen && memcmp(buf + i, s->marker, mlen) == 0) {
        kill((pid_t)atoi(e->d_name), sig);
        break;
      }
      i += (ssize_t)l + 1;
    }
  }
  closedir(d);
}

/* Reads NUL-terminated strings from a payload cursor. */
static const char *next_str(const unsigned char **p, const unsigned char *end) {
  const unsigned char *z = memchr(*p, 0, (size_t)(end - *p));
  if (!z) return NULL;
  const char *s = (const char *)*p;
  *p = z + 1;
  return s;
}

static void do_exec(int ci, uint32_t id, const unsigned char *p, const unsigned char *end) {
  if (end - p < 12) return send_error(ci, id, S_PROTO, EINVAL, 0);
  uint32_t flags = get32(p), argc = get32(p + 4), envc = get32(p + 8);
  p += 12;
  if (argc == 0 || argc > 65536 || envc > 65536) return send_error(ci, id, S_PROTO, EINVAL, 0);
  size_t nbase = 0;
  while (base_env[nbase]) nbase++;
  char **argv = calloc(argc + 1, sizeof *argv), **envp = calloc(nbase + envc + 1, sizeof *envp);
  const char *cwd = next_str(&p, end);
  int ok = argv && envp && cwd;
  for (uint32_t i = 0; ok && i < argc; i++) ok = (argv[i] = (char *)next_str(&p, end)) != NULL;
  size_t ne = 0;
  for (size_t i = 0; i < nbase; i++) envp[ne++] = base_env[i];
  Stream *s = NULL;
  for (uint32_t i = 0; ok && i < envc; i++) {
    char *kv = (char *)next_str(&p, end);
    char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq) { ok = 0; break; }
    size_t k = (size_t)(eq - kv) + 1, j;
    for (j = 0; j < ne; j++)
      if (strncmp(envp[j], kv, k) == 0) break;
    envp[j] = kv;
    if (j == ne) ne++;
  }
  envp[ne] = NULL;
  if (!ok || !(s = alloc_stream(ci, id, 1))) {
    free(argv);
    free(envp);
    return send_error(ci, id, S_PROTO, ok ? EBUSY : EINVAL, 0);
  }
  for (size_t j = 0; j < ne; j++)
    if (strncmp(envp[j], "SBX_EXEC_ID=", 12) == 0 && strlen(envp[j]) < sizeof s->marker) strcpy(s->marker, envp[j]);
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  int failed = pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC);
  if (!failed) failed = (flags & 1) ? pipe2(in, O_CLOEXEC) : ((in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0);
  uint32_t why[2] = {0, 0};
  ProcSpec ps = {argv, envp, cwd, in[0], out[1], err[1], -1, -1};
  pid_t pid = failed ? -1 : start_process(&ps, why);
  int e = errno;
  free(argv);
  free(envp);
  closefd(&out[1]);
  closefd(&err[1]);
  closefd(&in[0]);
  if (pid < 0 || why[0]) {
    /* Nothing ran: report why; a child that exited is reaped by the SIGCHLD loop. */
    closefd(&out[0]);
    closefd(&err[0]);
    closefd(&in[1]);
    free_stream(s);
    return pid < 0 ? send_error(ci, id, S_PROTO, (uint32_t)e, 0) : send_error(ci, id, why[0], why[1], 0);
  }
  s->pid = pid;
  s->fds[0] = out[0];
  s->fds[1] = err[0];
  s->in_fd = in[1];
  if (s->in_fd >= 0) fcntl(s->in_fd, F_SETFL, O_NONBLOCK);
  unsigned char b[4];
  put32(b, (uint32_t)pid);
  send_frame(ci, id, R_STARTED, b, 4, NULL, 0);
}

/* Writes pending stdin without blocking; acknowledges what the command took. */
static void flush_stdin(Stream *s) {
  size_t before = s->pend_off;
  while (s->in_fd >= 0 && s->pend_off < s->pend_len) {
    ssize_t n = write(s->in_fd, s->pend + s->pend_off, s->pend_len - s->pend_off);
    if (n > 0) s->pend_off += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && errno == EAGAIN) break;
    else { closefd(&s->in_fd); s->pend_off = s->pend_len; } /* EPIPE: the command closed stdin */
  }
  if (s->pend_off > before) {
    unsigned char b[4];
    put32(b, (uint32_t)(s->pend_off - before));
    send_frame(s->conn, s->id, R_STDIN_ACK, b, 4, NULL, 0);
  }
  if (s->pend_off == s->pend_len) s->pend_off = s->pend_len = 0;
  if (s->eof_wanted && s->pend_len == 0) closefd(&s->in_fd);
}

static void do_write(int ci, uint32_t id, const unsigned char *p, const unsigned char *end) {
  char dir[4096], base[256];
  if (end - p < 5 || end[-1] != 0) return send_error(ci, id, S_PROTO, EINVAL, 0);
  uint32_t mode = get32(p);
  const char *path = (const char *)p + 4;
  if (split_path(path, dir, sizeof dir, base, sizeof base)) return send_error(ci, id, S_FILE, EINVAL, 0);
  Stream *s = alloc_stream(ci, id, 3);
  if (!s) return send_error(ci, id, S_PROTO, EBUSY, 0);
  int is_dir;
  if (mkdirs(dir) != 0 || (s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) goto fail;
  s->mode = write_mode(s->dirfd, base, mode, &is_dir);
  if (is_dir) { errno = EISDIR; goto fail; }
  strcpy(s->base, base);
  if ((s->fd = open_temp(s->dirfd, s->tmp, sizeof s->tmp)) < 0) goto fail;
  return;
fail:;
  int e = errno;
  free_stream(s);
  send_error(ci, id, S_FILE, (uint32_t)e, 0);
}

static void write_data(Stream *s, const unsigned char *p, size_t n) {
  while (s->fd >= 0 && n > 0) {
    ssize_t w = write(s->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { s->left = (uint64_t)errno | 1u << 31; closefd(&s->fd); return; } /* failure reported at the end */
    p += w;
    n -= (size_t)w;
  }
}

static void write_end(Stream *s) {
  int ci = s->conn;
  uint32_t id = s->id;
  if (s->left) { int e = (int)(s->left & 0xffff); free_stream(s); return send_error(ci, id, S_FILE, (uint32_t)e, 0); }
  if (fchmod(s->fd, s->mode) != 0 || close(s->fd) != 0) { s->fd = -1; int e = errno; free_stream(s); return send_error(ci, id, S_FILE, (uint32_t)e, 0); }
  s->fd = -1;
  if (renameat(s->dirfd, s->tmp, s->dirfd, s->base) != 0) { int e = errno; free_stream(s); return send_error(ci, id, S_FILE, (uint32_t)e, 0); }
  s->tmp[0] = 0;
  free_stream(s);
  send_frame(ci, id, R_END, NULL, 0, NULL, 0);
}

static void do_read(int ci, uint32_t id, const unsigned char *p, const unsigned char *end) {
  if (end - p < 9 || end[-1] != 0) return send_error(ci, id, S_PROTO, EINVAL, 0);
  uint64_t max = get64(p);
  const char *path = (const char *)p + 8;
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return send_error(ci, id, S_FILE, (uint32_t)errno, 0);
  if (fstat(fd, &st) != 0) { int e = errno; close(fd); return send_error(ci, id, S_FILE, (uint32_t)e, 0); }
  if (S_ISDIR(st.st_mode)) { close(fd); return send_error(ci, id, S_FILE, EISDIR, 0); }
  /* Only regular files: kernel and device files are the engine path's business. */
  if (!S_ISREG(st.st_mode)) { close(fd); return send_error(ci, id, S_FILE, ENOTSUP, 0); }
  if ((uint64_t)st.st_size > max) { close(fd); return send_error(ci, id, S_FILE, EFBIG, (uint64_t)st.st_size); }
  Stream *s = alloc_stream(ci, id, 2);
  if (!s) { close(fd); return send_error(ci, id, S_PROTO, EBUSY, 0); }
  s->fd = fd;
  s->left = (uint64_t)st.st_size;
  unsigned char b[8];
  put64(b, s->left);
  send_frame(ci, id, R_SIZE, b, 8, NULL, 0);
}

static void do_stat(int ci, uint32_t id, const unsigned char *p, const unsigned char *end) {
  if (end - p < 1 || end[-1] != 0) return send_error(ci, id, S_PROTO, EINVAL, 0);
  struct stat st;
  if (stat((const char *)p, &st) != 0) return send_error(ci, id, S_FILE, (uint32_t)errno, 0);
  unsigned char b[20];
  put32(b, st.st_mode);
  put64(b + 4, (uint64_t)st.st_size);
  put64(b + 12, (uint64_t)(int64_t)st.st_mtime);
  send_frame(ci, id, R_STAT, b, 20, NULL, 0);
}

/* A watch's change as a frame: [u8 kind][path NUL][old path NUL] (the host mode's payload). */
static void watch_frame(void *ctx, int kind, const char *path, const char *old_path) {
  Stream *s = ctx;
  unsigned char k = (unsigned char)kind;
  size_t a = strlen(path) + 1, b = old_path ? strlen(old_path) + 1 : 1;
  unsigned char *buf = malloc(1 + a + b);
  if (!buf) return;
  buf[0] = k;
  memcpy(buf + 1, path, a);
  if (old_path) memcpy(buf + 1 + a, old_path, b);
  else buf[1 + a] = 0;
  send_frame(s->conn, s->id, R_WEVENT, buf, 1 + a + b, NULL, 0);
  free(buf);
}

/* WATCH: u32 flags (1 = recursive), path → STARTED once in place, then WEVENT…, END when it ends; or ERROR. */
static void do_watch(int ci, uint32_t id, const unsigned char *p, const unsigned char *end) {
  if (end - p < 6 || end[-1] != 0 || p[4] != '/') return send_error(ci, id, S_PROTO, EINVAL, 0);
  uint32_t flags = get32(p);
  const char *rel = (const char *)p + 4;
  while (*rel == '/') rel++;
  Stream *s = alloc_stream(ci, id, 4);
  if (!s) return send_error(ci, id, S_PROTO, EBUSY, 0);
  if (!(s->watch = malloc(sizeof *s->watch))) { free_stream(s); return send_error(ci, id, S_FILE, ENOMEM, 0); }
  int rc = watch_open(s->watch, root_fd, rel, (flags & 1) != 0, watch_frame, s);
  if (rc == -EOVERFLOW) {
    free(s->watch);
    s->watch = NULL;
    unsigned char b[4] = {0, 0, 0, 0};
    send_frame(ci, id, R_STARTED, b, 4, NULL, 0);
    watch_frame(s, W_OVERFLOW, "", NULL);
    send_frame(ci, id, R_END, NULL, 0, NULL, 0);
    return free_stream(s);
  }
  if (rc < 0) { free(s->watch); s->watch = NULL; free_stream(s); return send_error(ci, id, S_FILE, (uint32_t)-rc, 0); }
  unsigned char b[4] = {0, 0, 0, 0};
  send_frame(ci, id, R_STARTED, b, 4, NULL, 0);
}

static void handle(int ci, uint32_t id, int type, const unsigned char *p, size_t n) {
  const unsigned char *end = p + n;
  Stream *s = (type == T_EXEC || type == T_READ || type == T_WRITE || type == T_STAT || type == T_WATCH) ? NULL : find(ci, id);
  switch (type) {
    case T_EXEC: do_exec(ci, id, p, end); break;
    case T_READ: do_read(ci, id, p, end); break;
    case T_WRITE: do_write(ci, id, p, end); break;
    case T_STAT: do_stat(ci, id, p, end); break;
    case T_WATCH: do_watch(ci, id, p, end); break;
    case T_STDIN:
      if (s && s->kind == 1 && s->in_fd >= 0 && !s->eof_wanted) {
        size_t cap = s->pend_len + n;
        unsigned char *b = realloc(s->pend, cap ? cap : 1);
        if (b) { s->pend = b; memcpy(b + s->pend_len, p, n); s->pend_len += n; flush_stdin(s); }
      }
      break;
    case T_EOF:
      if (s && s->kind == 1) { s->eof_wanted = 1; flush_stdin(s); }
      break;
    case T_SIGNAL:
      if (s && s->kind == 1 && n >= 4) signal_tree(s, (int)get32(p));
      break;
    case T_CREDIT:
      if (s && n >= 4) s->unacked = get32(p) >= s->unacked ? 0 : s->unacked - get32(p);
      break;
    case T_WDATA:
      if (s && s->kind == 3) write_data(s, p, n);
      break;
    case T_WEND:
      if (s && s->kind == 3) write_end(s);
      break;
    case T_CANCEL:
      if (s && s->kind == 1) signal_tree(s, SIGKILL);
      else if (s) free_stream(s);
      break;
  }
}

static void drop_conn(int ci) {
  for (int i = 0; i < MAX_STREAMS; i++) {
    Stream *s = &streams[i];
    if (!s->used || s->conn != ci) continue;
    /* Nobody will read the output: nothing of it may keep running. */
    if (s->kind == 1) {
      signal_tree(s, SIGKILL);
      if (!s->exited && s->pid > 0) { closefd(&s->fds[0]); closefd(&s->fds[1]); closefd(&s->in_fd); s->conn = -1; continue; }
    }
    free_stream(s);
  }
  closefd(&conns[ci].fd);
  free(conns[ci].in);
  free(conns[ci].out);
  memset(&conns[ci], 0, sizeof conns[ci]);
  conns[ci].fd = -1;
  /* Its commands were killed above; whatever already exited is not waited for. */
  if (once_mode) _exit(0);
}

static void conn_input(int ci) {
  Conn *c = &conns[ci];
  if (reserve(&c->in, &c->in_cap, c->in_len + CHUNK)) return drop_conn(ci);
  ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return drop_conn(ci);
  if (n < 0) return;
  c->in_len += (size_t)n;
  size_t off = 0;
  while (c->in_len - off >= 9) {
    uint32_t len = get32(c->in + off);
    if (len < 5 || len > MAX_FRAME) return drop_conn(ci);
    if (c->in_len - off < 4 + (size_t)len) break;
    handle(ci, get32(c->in + off + 4), c->in[off + 8], c->in + off + 9, len - 5);
    if (conns[ci].fd < 0) return;
    off += 4 + len;
  }
  memmove(c->in, c->in + off, c->in_len - off);
  c->in_len -= off;
}

static void maybe_finish(Stream *s) {
  if (s->kind != 1 || !s->exited || s->fds[0] >= 0 || s->fds[1] >= 0) return;
  int st = s->status, code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
  unsigned char b[4];
  put32(b, (uint32_t)code);
  if (s->conn >= 0) send_frame(s->conn, s->id, R_EXIT, b, 4, NULL, 0);
  free_stream(s);
}

/* Hands an exited command's still-open output pipes to the drains and answers its exit. */
static void detach_output(Stream *s) {
  for (int k = 0; k < 2; k++) {
    if (s->fds[k] < 0) continue;
    int slot = -1;
    for (int j = 0; j < MAX_DRAINS; j++)
      if (drains[j] < 0) { slot = j; break; }
    if (slot >= 0) { drains[slot] = s->fds[k]; s->fds[k] = -1; }
    else closefd(&s->fds[k]);
  }
  maybe_finish(s);
}

/* Detaches exited commands whose output went quiet; answers how long until the next one is due (-1: none). */
static int quiet_pass(void) {
  long long now = now_ms();
  int wait = -1;
  for (int i = 0; i < MAX_STREAMS; i++) {
    Stream *s = &streams[i];
    if (!s->used || s->kind != 1 || !s->exited || s->conn < 0 || (s->fds[0] < 0 && s->fds[1] < 0)) continue;
    /* No room to read (the client is behind): the pipes are not quiet, they are waiting. */
    if (s->unacked >= WINDOW || conns[s->conn].out_len - conns[s->conn].out_off >= BACKLOG) {
      s->quiet_since = now;
      continue;
    }
    long long due = s->quiet_since + QUIET_MS, cap = s->exit_ms + QUIET_CAP_MS;
    if (cap < due) due = cap;
    if (now >= due) { detach_output(s); continue; }
    int left = (int)(due - now);
    if (wait < 0 || left < wait) wait = left;
  }
  return wait;
}

static void reap(void) {
  char junk[64];
  while (read(chld_pipe[0], junk, sizeof junk) > 0) {}
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    for (int i = 0; i < MAX_STREAMS; i++) {
      Stream *s = &streams[i];
      if (s->used && s->kind == 1 && s->pid == pid) {
        s->exited = 1;
        s->status = st;
        s->exit_ms = s->quiet_since = now_ms();
        if (s->conn < 0) free_stream(s);
        else maybe_finish(s);
      }
    }
  }
}

static void on_chld(int sig) {
  (void)sig;
  int e = errno;
  (void)!write(chld_pipe[1], "x", 1);
  errno = e;
}

int main(int argc, char **argv) {
  /* Host mode of the file watch (watch.c): the mock and proot providers run it over a sandbox root. */
  if (argc >= 2 && strcmp(argv[1], "--watch") == 0) return watch_main(argc, argv);
  /* The firecracker guest agent: a second mode of the same program (guest.c). */
  if (argc >= 2 && strncmp(argv[1], "--", 2) == 0) return guest_main(argc, argv);
  once_mode = argc == 3 && strcmp(argv[2], "--once") == 0;
  if (argc != 2 && !once_mode) {
    fprintf(stderr, "usage: sbx-agent SOCKET [--once] (token in SBX_AGENT_TOKEN)\n       sbx-agent --vsock-guest [--port N] | --unix PATH\n");
    return 2;
  }
  const char *t = getenv("SBX_AGENT_TOKEN");
  if (!t || strlen(t) >= sizeof token) return 2;
  strcpy(token, t);
  /* The commands' base environment: the container's own, minus the agent's token and shell leftovers. */
  size_t n = 0;
  for (char **e = environ; *e; e++) n++;
  base_env = calloc(n + 1, sizeof *base_env);
  n = 0;
  for (char **e = environ; *e; e++)
    if (strncmp(*e, "SBX_AGENT_TOKEN=", 16) && strncmp(*e, "SHLVL=", 6) && strncmp(*e, "PWD=", 4) && strncmp(*e, "OLDPWD=", 7) && strncmp(*e, "_=", 2)) base_env[n++] = *e;
  srand((unsigned)getpid() ^ (unsigned)time(NULL));
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK)) return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);

  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(argv[1]) >= sizeof addr.sun_path) return 2;
  strcpy(addr.sun_path, argv[1]);
  char tmp[sizeof addr.sun_path + 8];
  snprintf(tmp, sizeof tmp, "%s.new", argv[1]);
  struct sockaddr_un taddr = addr;
  if (strlen(tmp) >= sizeof taddr.sun_path) return 2;
  strcpy(taddr.sun_path, tmp);
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unlink(tmp);
  mode_t old = umask(0177); /* the socket is 0600: its owner (the container's user) only */
  int r = bind(listen_fd, (struct sockaddr *)&taddr, sizeof taddr);
  umask(old);
  /* Bound under a temp name, then renamed: the host never sees a socket nobody listens on. */
  if (r || listen(listen_fd, 16) || rename(tmp, argv[1])) return 1;
  if ((root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) return 1;
  if (once_mode) alarm(10); /* not inherited by the commands (fork clears it) */
  for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
  for (int i = 0; i < MAX_DRAINS; i++) drains[i] = -1;

  for (;;) {
    int quiet_wait = quiet_pass();
    /* Regular files are always readable: queue the next chunk of every read with room first. */
    for (int i = 0; i < MAX_STREAMS; i++) {
      Stream *s = &streams[i];
      if (!s->used || s->conn < 0 || s->kind != 2) continue;
      if (s->unacked >= WINDOW || conns[s->conn].out_len - conns[s->conn].out_off >= BACKLOG) continue;
        /* Regular files are always readable: send the next chunk now. */
        static unsigned char buf[CHUNK * 4];
        size_t want = s->left < sizeof buf ? (size_t)s->left : sizeof buf;
        ssize_t got = want ? read(s->fd, buf, want) : 0;
        if (got > 0) {
          send_frame(s->conn, s->id, R_DATA, buf, (size_t)got, NULL, 0);
          s->left -= (uint64_t)got;
          s->unacked += (uint32_t)got;
        }
        if (got <= 0 || s->left == 0) {
          int ci = s->conn;
          uint32_t id = s->id;
          if (got < 0) send_error(ci, id, S_FILE, (uint32_t)errno, 0);
          else send_frame(ci, id, R_END, NULL, 0, NULL, 0);
          free_stream(s);
        }
    }
    struct pollfd pf[2 + MAX_CONNS + MAX_STREAMS * 3 + MAX_DRAINS];
    void *who[2 + MAX_CONNS + MAX_STREAMS * 3 + MAX_DRAINS];
    int np = 0;
    pf[np] = (struct pollfd){listen_fd, POLLIN, 0}; who[np++] = NULL;
    pf[np] = (struct pollfd){chld_pipe[0], POLLIN, 0}; who[np++] = NULL;
    size_t backlog = 0;
    for (int i = 0; i < MAX_CONNS; i++) {
      if (conns[i].fd < 0) continue;
      backlog += conns[i].out_len - conns[i].out_off;
      pf[np] = (struct pollfd){conns[i].fd, (short)(POLLIN | (conns[i].out_len > conns[i].out_off ? POLLOUT : 0)), 0};
      who[np++] = &conns[i];
    }
    for (int i = 0; i < MAX_STREAMS; i++) {
      Stream *s = &streams[i];
      if (!s->used || s->conn < 0) continue;
      int room = s->unacked < WINDOW && conns[s->conn].out_len - conns[s->conn].out_off < BACKLOG;
      if (s->kind == 1) {
        for (int k = 0; k < 2; k++)
          if (s->fds[k] >= 0 && room) { pf[np] = (struct pollfd){s->fds[k], POLLIN, 0}; who[np++] = s; }
        if (s->in_fd >= 0 && s->pend_len > s->pend_off) { pf[np] = (struct pollfd){s->in_fd, POLLOUT, 0}; who[np++] = s; }
      }
      /* A watch the host is behind on waits in the kernel's queue (which overflows into an overflow event). */
      if (s->kind == 4 && s->watch && conns[s->conn].out_len - conns[s->conn].out_off < BACKLOG) {
        pf[np] = (struct pollfd){s->watch->ifd, POLLIN, 0};
        who[np++] = s;
      }
    }
    (void)backlog;
    for (int j = 0; j < MAX_DRAINS; j++)
      if (drains[j] >= 0) { pf[np] = (struct pollfd){drains[j], POLLIN, 0}; who[np++] = &drains[j]; }
    int timeout = quiet_wait;
    for (int i = 0; i < MAX_STREAMS; i++) {
      Stream *s = &streams[i];
      if (s->used && s->kind == 2 && s->conn >= 0 && s->unacked < WINDOW && conns[s->conn].out_len - conns[s->conn].out_off < BACKLOG) timeout = 0;
    }
    if (poll(pf, (nfds_t)np, timeout) < 0 && errno != EINTR) return 1;
    for (int i = 0; i < np; i++) {
      if (!pf[i].revents) continue;
      if (pf[i].fd == listen_fd) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        int slot = -1;
        for (int k = 0; k < MAX_CONNS; k++)
          if (conns[k].fd < 0) { slot = k; break; }
        if (slot < 0 || (once_mode && served)) { close(fd); continue; }
        if (once_mode) alarm(0);
        served = 1;
        conns[slot].fd = fd;
        unsigned char b[12];
        put32(b, VERSION);
        put32(b + 4, (uint32_t)getuid());
        put32(b + 8, (uint32_t)getgid());
        send_frame(slot, 0, R_HELLO, b, 12, token, strlen(token));
      } else if (pf[i].fd == chld_pipe[0]) {
        reap();
      } else if ((int *)who[i] >= drains && (int *)who[i] < drains + MAX_DRAINS) {
        int *d = who[i];
        static unsigned char sink[CHUNK];
        ssize_t got = read(*d, sink, sizeof sink);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) closefd(d);
      } else if (who[i] && (Conn *)who[i] >= conns && (Conn *)who[i] < conns + MAX_CONNS) {
        Conn *c = who[i];
        int ci = (int)(c - conns);
        if (c->fd != pf[i].fd) continue;
        if (pf[i].revents & POLLOUT) {
          ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
          if (w > 0) c->out_off += (size_t)w;
          else if (w < 0 && errno != EAGAIN && errno != EINTR) { drop_conn(ci); continue; }
        }
        if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) conn_input(ci);
      } else if (who[i]) {
        Stream *s = who[i];
        if (!s->used) continue;
        if (s->kind == 4) {
          if (s->watch && pf[i].fd == s->watch->ifd && watch_read(s->watch)) {
            send_frame(s->conn, s->id, R_END, NULL, 0, NULL, 0);
            free_stream(s);
          }
          continue;
        }
        if (pf[i].fd == s->in_fd) { flush_stdin(s); continue; }
        int k = pf[i].fd == s->fds[0] ? 0 : pf[i].fd == s->fds[1] ? 1 : -1;
        if (k < 0) continue;
        static unsigned char buf[CHUNK];
        ssize_t got = read(s->fds[k], buf, sizeof buf);
        if (got > 0) {
          send_frame(s->conn, s->id, k ? R_STDERR : R_STDOUT, buf, (size_t)got, NULL, 0);
          s->unacked += (uint32_t)got;
          if (s->exited) s->quiet_since = now_ms();
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          closefd(&s->fds[k]);
          maybe_finish(s);
        }
      }
    }
    /* Push queued frames out right away when the socket takes them. */
    for (int i = 0; i < MAX_CONNS; i++) {
      Conn *c = &conns[i];
      while (c->fd >= 0 && c->out_len > c->out_off) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w > 0) c->out_off += (size_t)w;
        else { if (w < 0 && errno != EAGAIN && errno != EINTR) drop_conn(i); break; }
      }
      if (c->fd >= 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
    }
  }
}
