/* Host mode of the watch (mock and proot, docs/agent.md "Watch"): see watch.h. */
#define _GNU_SOURCE
#include "watch.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Frames [u32 LE length][u8 kind][path NUL][old path NUL] on stdout. */

static void out_all(const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(1, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) _exit(0); /* the host went away */
    p += k;
    n -= (size_t)k;
  }
}

static void host_emit(void *ctx, int kind, const char *path, const char *old_path) {
  (void)ctx;
  size_t a = strlen(path), b = old_path ? strlen(old_path) : 0;
  size_t len = 1 + a + 1 + b + 1;
  unsigned char *f = malloc(4 + len);
  if (!f) return;
  f[0] = (unsigned char)len; f[1] = (unsigned char)(len >> 8); f[2] = (unsigned char)(len >> 16); f[3] = (unsigned char)(len >> 24);
  f[4] = (unsigned char)kind;
  memcpy(f + 5, path, a + 1);
  if (old_path) memcpy(f + 6 + a, old_path, b + 1);
  else f[6 + a] = 0;
  out_all(f, 4 + len);
  free(f);
}

static void host_fail(int err) {
  unsigned char f[9] = {5, 0, 0, 0, W_FAILED, (unsigned char)err, (unsigned char)(err >> 8), 0, 0};
  out_all(f, sizeof f);
}

int watch_main(int argc, char **argv) {
  if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "--no-recursive"))) {
    fprintf(stderr, "usage: sbx-agent --watch ROOT /PATH [--no-recursive]\n");
    return 2;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_IGN);
  const char *rel = argv[3];
  if (rel[0] != '/') { host_fail(EINVAL); return 1; }
  while (*rel == '/') rel++;
  int rootfd = open(argv[2], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) { host_fail(errno); return 1; }
  Watch w;
  int rc = watch_open(&w, rootfd, rel, argc != 5, host_emit, NULL);
  if (rc == -EOVERFLOW) { host_emit(NULL, W_READY, "", NULL); host_emit(NULL, W_OVERFLOW, "", NULL); return 0; }
  if (rc < 0) { host_fail(-rc); return 1; }
  host_emit(NULL, W_READY, "", NULL);
  /* Until the host closes our stdin (or the watch ends). */
  for (;;) {
    struct pollfd pf[2] = {{w.ifd, POLLIN, 0}, {0, POLLIN, 0}};
    if (poll(pf, 2, -1) < 0 && errno != EINTR) break;
    if (pf[1].revents) {
      char junk[256];
      ssize_t k = read(0, junk, sizeof junk);
      if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) break;
    }
    if (pf[0].revents && watch_read(&w)) break;
  }
  watch_close(&w);
  return 0;
}
