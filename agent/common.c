/* What both modes of sbx-agent share: see common.h. */
#define _GNU_SOURCE
#include "common.h"
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/*
 * execvp without its /bin/sh retry on ENOEXEC (runc has none): every PATH entry is tried (empty =
 * "."), a match that cannot be executed is remembered (EACCES) while the search goes on. Returns errno.
 */
static int search_exec(char **argv) {
  const char *name = argv[0];
  if (strchr(name, '/')) { execv(name, argv); return errno; }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  int seen = ENOENT;
  char buf[4096];
  for (const char *p = path;; p++) {
    const char *q = strchr(p, ':');
    size_t l = q ? (size_t)(q - p) : strlen(p);
    if (l + strlen(name) + 2 < sizeof buf) {
      if (l == 0) snprintf(buf, sizeof buf, "./%s", name);
      else snprintf(buf, sizeof buf, "%.*s/%s", (int)l, p, name);
      execv(buf, argv);
      if (errno == EACCES || errno == EISDIR) seen = EACCES;
      else if (errno != ENOENT && errno != ENOTDIR) return errno;
    }
    if (!q) break;
    p = q;
  }
  return seen;
}

static void report(int fd, uint32_t stage, int err) {
  uint32_t why[2] = {stage, (uint32_t)err};
  (void)!write(fd, why, sizeof why);
}

pid_t start_process(const ProcSpec *ps, uint32_t why[2]) {
  int rep[2];
  why[0] = why[1] = 0;
  if (pipe2(rep, O_CLOEXEC)) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(rep[0]);
    close(rep[1]);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    /* Child: own process group, default signals, pipes as 0/1/2, credentials, chdir, exec. */
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < 65; sig++) signal(sig, SIG_DFL); /* a background start ignores SIGINT/SIGQUIT */
    dup2(ps->in, 0);
    dup2(ps->out, 1);
    dup2(ps->err, 2);
    if (ps->gid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)ps->gid) != 0)) { report(rep[1], S_CRED, errno); _exit(126); }
    if (ps->uid >= 0 && setuid((uid_t)ps->uid) != 0) { report(rep[1], S_CRED, errno); _exit(126); }
    if (chdir(ps->cwd) != 0) { report(rep[1], S_CHDIR, errno); _exit(126); }
    environ = ps->envp;
    report(rep[1], S_EXEC, search_exec(ps->argv));
    _exit(127);
  }
  close(rep[1]);
  setpgid(pid, pid);
  ssize_t n;
  do n = read(rep[0], why, 2 * sizeof why[0]); while (n < 0 && errno == EINTR);
  close(rep[0]);
  if (n != (ssize_t)(2 * sizeof why[0])) why[0] = why[1] = 0; /* closed on exec: it runs */
  return pid;
}

int split_path(const char *path, char *dir, size_t dsz, char *base, size_t bsz) {
  const char *slash = strrchr(path, '/');
  if (path[0] != '/' || !slash || !slash[1] || strlen(slash + 1) >= bsz || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0) return -1;
  size_t dl = (size_t)(slash - path);
  if (dl >= dsz) return -1;
  if (dl == 0) strcpy(dir, "/");
  else { memcpy(dir, path, dl); dir[dl] = 0; }
  strcpy(base, slash + 1);
  return 0;
}

int mkdirs(char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(dir, 0755);
    *p = '/';
    if (r != 0 && errno != EEXIST) return -1;
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
  if (stat(dir, &st) != 0) return -1;
  return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

int open_temp(int dirfd, char *tmp, size_t tsz) {
  int fd = -1;
  for (int i = 0; i < 100; i++) {
    unsigned r = (unsigned)rand() ^ (unsigned)getpid() << 16;
    snprintf(tmp, tsz, ".sbx-write-%08x", r);
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) tmp[0] = 0;
  return fd;
}

unsigned write_mode(int dirfd, const char *base, uint32_t mode, int *is_dir) {
  struct stat st;
  *is_dir = 0;
  /* The final component is never followed: the temp file is renamed over whatever is there. */
  if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) *is_dir = 1;
    if (mode == 0xffffffffu) mode = S_ISREG(st.st_mode) ? (st.st_mode & 07777) : 0644;
  } else if (mode == 0xffffffffu) mode = 0644;
  return mode & 07777;
}
