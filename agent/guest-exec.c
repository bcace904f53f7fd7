/*
 * The guest agent's exec (docs/providers/firecracker.md): the command in its own process group,
 * its stdout/stderr streamed as frames, stdin and signals taken from the host's frames at any
 * time, then `{type: "exit", exit_code}`. The connection dropping kills the group (that is how a
 * cancel arrives). Memory is bounded: the pipes are read only while less than OUT_WINDOW waits
 * for the host, and the connection only while less than STDIN_WINDOW waits for the command.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"
#include "guest.h"

#define OUT_WINDOW (1u << 20)
#define STDIN_WINDOW (1u << 20)
#define PIPE_READ 65536

typedef struct {
  int sock;
  pid_t pid;
  int reaped, status;
  int out[2]; /* stdout, stderr; -1 at EOF */
  int in;     /* stdin; -1 closed */
  Buf pend;   /* stdin the command has not taken yet */
  size_t pend_off;
  int eof_wanted;
  Buf q; /* frames the host has not taken yet */
  size_t q_off;
  /* The incoming frame: prefix, header, then data streamed to stdin (or dropped). */
  int state;
  unsigned char pre[8];
  size_t got;
  char *hdr;
  uint32_t hlen, dleft;
  int to_stdin;
} Exec;

static int chld_pipe[2] = {-1, -1};

static void on_chld(int sig) {
  (void)sig;
  int e = errno;
  (void)!write(chld_pipe[1], "x", 1);
  errno = e;
}

static void closefd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Drops the consumed head of a buffer once it is half of it: the buffer stays within twice its window. */
static void compact(Buf *b, size_t *off) {
  if (*off == 0 || *off < b->len / 2) return;
  memmove(b->p, b->p + *off, b->len - *off);
  b->len -= *off;
  *off = 0;
}

static void queue(Exec *x, const char *header, const void *data, size_t dlen) {
  unsigned char pre[8];
  compact(&x->q, &x->q_off);
  size_t hlen = strlen(header);
  frame_prefix(pre, hlen, dlen);
  buf_put(&x->q, pre, 8);
  buf_put(&x->q, header, hlen);
  if (dlen) buf_put(&x->q, data, dlen);
}

static int signal_number(const JVal *v) {
  static const struct { const char *name; int sig; } names[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"STOP", SIGSTOP}, {"CONT", SIGCONT}, {"PIPE", SIGPIPE}, {"WINCH", SIGWINCH},
  };
  long long n;
  if (json_int(v, 1, 64, &n)) return (int)n;
  const char *s = json_cstr(v);
  if (!s) return 0;
  if (!strncmp(s, "SIG", 3)) s += 3;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(s, names[i].name)) return names[i].sig;
  return 0;
}

static void flush_stdin(Exec *x) {
  while (x->in >= 0 && x->pend_off < x->pend.len) {
    ssize_t n = write(x->in, x->pend.p + x->pend_off, x->pend.len - x->pend_off);
    if (n > 0) x->pend_off += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && errno == EAGAIN) break;
    else closefd(&x->in); /* EPIPE: the command closed its stdin; later input is dropped */
  }
  if (x->pend_off == x->pend.len || x->in < 0) x->pend_off = x->pend.len = 0;
  if (x->eof_wanted && x->pend.len == 0) closefd(&x->in);
}

/* A complete header from the host: stdin, stdin_end or signal; anything else breaks the protocol. */
static int on_header(Exec *x) {
  JVal *h = json_parse(x->hdr, x->hlen);
  const char *t = h && h->t == J_OBJ ? json_cstr(json_get(h, "type")) : NULL;
  int ok = t != NULL;
  x->to_stdin = 0;
  if (!t) {
  } else if (!strcmp(t, "stdin")) x->to_stdin = x->in >= 0 && !x->eof_wanted;
  else if (!strcmp(t, "stdin_end")) x->eof_wanted = 1;
  else if (!strcmp(t, "signal")) {
    int sig = signal_number(json_get(h, "signal"));
    /* The group, also once its leader has exited: what is left of it may still hold the pipes. */
    if (sig) kill(-x->pid, sig);
  } else ok = 0;
  json_free(h);
  return ok ? 0 : -1;
}

/* Feeds bytes from the connection through the frame parser; -1 on a malformed frame. */
static int feed(Exec *x, const unsigned char *p, size_t n) {
  while (n > 0) {
    if (x->state == 0) {
      size_t k = 8 - x->got < n ? 8 - x->got : n;
      memcpy(x->pre + x->got, p, k);
      x->got += k, p += k, n -= k;
      if (x->got < 8) break;
      x->hlen = (uint32_t)x->pre[0] << 24 | (uint32_t)x->pre[1] << 16 | (uint32_t)x->pre[2] << 8 | x->pre[3];
      x->dleft = (uint32_t)x->pre[4] << 24 | (uint32_t)x->pre[5] << 16 | (uint32_t)x->pre[6] << 8 | x->pre[7];
      if (x->hlen > MAX_HEADER || x->dleft > MAX_DATA || !(x->hdr = malloc(x->hlen + 1))) return -1;
      x->state = 1, x->got = 0;
    }
    if (x->state == 1) {
      size_t k = x->hlen - x->got < n ? x->hlen - x->got : n;
      memcpy(x->hdr + x->got, p, k);
      x->got += k, p += k, n -= k;
      if (x->got < x->hlen) break;
      int r = on_header(x);
      free(x->hdr);
      x->hdr = NULL;
      if (r) return -1;
      x->state = 2;
    }
    if (x->state == 2) {
      size_t k = x->dleft < n ? x->dleft : n;
      if (x->to_stdin && k) {
        compact(&x->pend, &x->pend_off);
        buf_put(&x->pend, p, k);
      }
      x->dleft -= (uint32_t)k, p += k, n -= k;
      if (x->dleft == 0) x->state = 0, x->got = 0;
    }
  }
  flush_stdin(x);
  return x->pend.oom ? -1 : 0;
}

/* Builds argv and the environment (the agent's own, overlaid with the request's); NULL after answering bad_request. */
static char **request_env(int fd, const JVal *env) {
  size_t nbase = 0;
  while (guest_env[nbase]) nbase++;
  size_t nreq = env && env->t == J_OBJ ? env->n : 0;
  if (env && env->t != J_OBJ && env->t != J_NULL) { send_error(fd, "bad_request", "env must be an object of strings"); return NULL; }
  char **envp = calloc(nbase + nreq + 1, sizeof *envp);
  if (!envp) return NULL;
  size_t ne = 0;
  for (size_t i = 0; i < nbase; i++) envp[ne++] = guest_env[i];
  for (size_t i = 0; i < nreq; i++) {
    const char *k = env->keys[i], *v = json_cstr(env->items[i]);
    char *kv;
    if (!v || !k[0] || strchr(k, '=') || asprintf(&kv, "%s=%s", k, v) < 0) {
      free(envp);
      send_error(fd, "bad_request", "env must map names without '=' to strings");
      return NULL;
    }
    size_t kl = strlen(k) + 1, j;
    for (j = 0; j < ne; j++)
      if (!strncmp(envp[j], kv, kl)) break;
    envp[j] = kv;
    if (j == ne) ne++;
  }
  envp[ne] = NULL;
  return envp;
}

static char **request_argv(int fd, const JVal *a) {
  if (!a || a->t != J_ARR || a->n == 0 || a->n > 65536) { send_error(fd, "bad_request", "argv must be a non-empty list of strings"); return NULL; }
  char **argv = calloc(a->n + 1, sizeof *argv);
  for (size_t i = 0; argv && i < a->n; i++)
    if (!(argv[i] = (char *)json_cstr(a->items[i]))) {
      free(argv);
      send_error(fd, "bad_request", "argv must be a non-empty list of strings");
      return NULL;
    }
  return argv;
}

/* What the provider port owes an argv command that cannot start: the message on stderr, then 127 or 126. */
static int cannot_start(int fd, const char *name, uint32_t err) {
  int missing = err == ENOENT || err == ENOTDIR;
  Buf msg = {0};
  buf_printf(&msg, "sbx: %s: ", missing ? "command not found" : "permission denied");
  buf_puts(&msg, name);
  buf_puts(&msg, "\n");
  char exit_hdr[64];
  snprintf(exit_hdr, sizeof exit_hdr, "{\"type\":\"exit\",\"exit_code\":%d}", missing ? 127 : 126);
  int r = msg.oom ? -1 : send_frame(fd, "{\"type\":\"stderr\"}", 17, msg.p, msg.len);
  buf_free(&msg);
  return r ? r : send_text(fd, exit_hdr);
}

/* Runs until the command has exited and its output is delivered (0), or the host goes away (-1). */
static int pump(Exec *x) {
  static unsigned char buf[PIPE_READ];
  int exit_queued = 0;
  for (;;) {
    if (x->reaped && x->out[0] < 0 && x->out[1] < 0 && !exit_queued) {
      int st = x->status, code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
      char hdr[64];
      snprintf(hdr, sizeof hdr, "{\"type\":\"exit\",\"exit_code\":%d}", code);
      queue(x, hdr, NULL, 0);
      exit_queued = 1;
    }
    size_t queued = x->q.len - x->q_off;
    if (exit_queued && queued == 0) return 0;
    if (x->q.oom) goto gone;
    struct pollfd pf[5];
    int np = 0;
    short sock_ev = (short)(POLLRDHUP | (queued ? POLLOUT : 0) | (x->pend.len - x->pend_off < STDIN_WINDOW ? POLLIN : 0));
    pf[np++] = (struct pollfd){x->sock, sock_ev, 0};
    pf[np++] = (struct pollfd){chld_pipe[0], POLLIN, 0};
    for (int k = 0; k < 2; k++) pf[np++] = (struct pollfd){queued < OUT_WINDOW ? x->out[k] : -1, POLLIN, 0};
    pf[np++] = (struct pollfd){x->pend.len > x->pend_off ? x->in : -1, POLLOUT, 0};
    int r = poll(pf, (nfds_t)np, exit_queued ? IO_TIMEOUT_MS : -1);
    if (r < 0 && errno != EINTR) goto gone;
    if (r == 0) goto gone; /* the host takes nothing more of the last frames */
    if (r < 0) continue;
    if (pf[1].revents) {
      char junk[64];
      while (read(chld_pipe[0], junk, sizeof junk) > 0) {}
      if (!x->reaped && waitpid(x->pid, &x->status, WNOHANG) == x->pid) x->reaped = 1;
    }
    if (pf[0].revents & POLLOUT) {
      ssize_t w = send(x->sock, x->q.p + x->q_off, queued, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) x->q_off += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR) goto gone;
      if (x->q_off == x->q.len) x->q_off = x->q.len = 0;
    }
    if (pf[0].revents & POLLIN) {
      ssize_t n = read(x->sock, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) goto gone;
      if (n > 0 && feed(x, buf, (size_t)n)) goto gone; /* a malformed frame: the command goes too */
    } else if (pf[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) goto gone;
    for (int k = 0; k < 2; k++) {
      if (!pf[2 + k].revents || x->out[k] < 0) continue;
      ssize_t n = read(x->out[k], buf, sizeof buf);
      if (n > 0) queue(x, k ? "{\"type\":\"stderr\"}" : "{\"type\":\"stdout\"}", buf, (size_t)n);
      else if (n == 0 || (errno != EAGAIN && errno != EINTR)) closefd(&x->out[k]);
    }
    if (pf[4].revents) flush_stdin(x);
  }
gone:
  /* Nobody will read the output: nothing of it may keep running, leader or not. */
  kill(-x->pid, SIGKILL);
  if (!x->reaped) waitpid(x->pid, NULL, 0);
  return -1;
}

int op_exec(int fd, const JVal *h) {
  long long uid = -1, gid = -1;
  const JVal *u = json_get(h, "uid"), *g = json_get(h, "gid"), *c = json_get(h, "cwd");
  if ((u && !json_int(u, 0, 4294967294.0, &uid)) || (g && !json_int(g, 0, 4294967294.0, &gid)))
    return send_error(fd, "bad_request", "uid and gid must be whole numbers");
  const char *cwd = c ? json_cstr(c) : "/";
  if (!cwd) return send_error(fd, "bad_request", "cwd must be a path");
  char **argv = request_argv(fd, json_get(h, "argv"));
  char **envp = argv ? request_env(fd, json_get(h, "env")) : NULL;
  if (!envp) {
    free(argv);
    return 0;
  }
  Exec x = {.sock = fd, .out = {-1, -1}, .in = -1};
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  uint32_t why[2] = {0, 0};
  pid_t pid = -1;
  if (!pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) && !sigaction(SIGCHLD, &sa, NULL) && !pipe2(out, O_CLOEXEC) && !pipe2(err, O_CLOEXEC) &&
      !pipe2(in, O_CLOEXEC)) {
    ProcSpec ps = {argv, envp, cwd, in[0], out[1], err[1], (long)uid, (long)gid};
    pid = start_process(&ps, why);
  }
  int e = errno;
  closefd(&out[1]);
  closefd(&err[1]);
  closefd(&in[0]);
  if (pid < 0 || why[0]) {
    closefd(&out[0]);
    closefd(&err[0]);
    closefd(&in[1]);
    if (pid > 0) waitpid(pid, NULL, 0);
    int r = 0;
    if (pid < 0) r = send_error(fd, "io_error", "cannot start the command: %s", strerror(e));
    else if (why[0] == S_CHDIR) r = send_error(fd, "bad_request", "workdir %.900s is not an existing directory in the sandbox", cwd);
    else if (why[0] == S_CRED) r = send_error(fd, "bad_request", "cannot run as %lld:%lld: %s", uid, gid, strerror((int)why[1]));
    else r = cannot_start(fd, argv[0], why[1]);
    free(argv);
    return r;
  }
  free(argv);
  x.pid = pid;
  x.out[0] = out[0];
  x.out[1] = err[0];
  x.in = in[1];
  fcntl(x.in, F_SETFL, O_NONBLOCK);
  fcntl(x.out[0], F_SETFL, O_NONBLOCK);
  fcntl(x.out[1], F_SETFL, O_NONBLOCK);
  return pump(&x);
}
