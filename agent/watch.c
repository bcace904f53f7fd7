/* Directory watches: see watch.h. */
#define _GNU_SOURCE
#include "watch.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MASK (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
/* How long an IN_MOVED_FROM waits for its IN_MOVED_TO before it counts as a removal (moved out). */
#define PAIR_WAIT_MS 5

/* sbx's own temporary names (a write's temp file, a recursive delete's renamed tree): not changes of their own. */
static int internal(const char *name) {
  return strncmp(name, ".sbx-write-", 11) == 0 || strncmp(name, ".sbx-rm-", 8) == 0;
}
static int is_write_temp(const char *path) {
  const char *b = strrchr(path, '/');
  return strncmp(b ? b + 1 : path, ".sbx-write-", 11) == 0;
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  if (a) { memcpy(p, dir, a); p[a] = '/'; memcpy(p + a + 1, name, b + 1); }
  else memcpy(p, name, b + 1);
  return p;
}

static void emit(Watch *w, int kind, const char *rel, const char *old_rel) {
  char *o = NULL;
  size_t n = strlen(rel);
  char *p = malloc(n + 2);
  if (!p) return;
  p[0] = '/';
  memcpy(p + 1, rel, n + 1);
  if (old_rel) {
    n = strlen(old_rel);
    o = malloc(n + 2);
    if (!o) { free(p); return; }
    o[0] = '/';
    memcpy(o + 1, old_rel, n + 1);
  }
  w->emit(w->ctx, kind, p, o);
  free(p);
  free(o);
}

/*
 * Opens the parent of `rel` from the root, every component with O_NOFOLLOW; *last = its last name
 * ("." for the root). The fd is the caller's to close (-1 on failure, errno set).
 */
static int open_parent(Watch *w, const char *rel, char *buf, size_t bsz, const char **last) {
  if (strlen(rel) >= bsz) { errno = ENAMETOOLONG; return -1; }
  strcpy(buf, rel);
  int fd = dup(w->rootfd);
  if (fd < 0) return -1;
  if (!buf[0]) { *last = "."; return fd; }
  char *s = buf;
  for (;;) {
    char *slash = strchr(s, '/');
    if (!slash) { *last = s; return fd; }
    *slash = 0;
    int next = openat(fd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(fd);
    if (next < 0) { errno = e == ELOOP ? ENOTDIR : e; return -1; }
    fd = next;
    s = slash + 1;
  }
}

/* Adds the watch of directory `rel`: its wd, or -errno. */
static int add_dir(Watch *w, const char *rel) {
  char buf[PATH_MAX];
  const char *last;
  int pfd = open_parent(w, rel, buf, sizeof buf, &last);
  if (pfd < 0) return -errno;
  /* The name is looked up in the parent's descriptor (our cwd), not followed when it is a link. */
  int wd = fchdir(pfd) == 0 ? inotify_add_watch(w->ifd, last, MASK | IN_DONT_FOLLOW | IN_ONLYDIR | IN_EXCL_UNLINK) : -1;
  int e = errno;
  (void)!fchdir(w->rootfd);
  close(pfd);
  if (wd < 0) return -e;
  if (wd >= w->cap) {
    int cap = w->cap ? w->cap : 64;
    while (cap <= wd) cap *= 2;
    char **d = realloc(w->dirs, (size_t)cap * sizeof *d);
    if (!d) { inotify_rm_watch(w->ifd, wd); return -ENOMEM; }
    memset(d + w->cap, 0, (size_t)(cap - w->cap) * sizeof *d);
    w->dirs = d;
    w->cap = cap;
  }
  if (w->dirs[wd]) return wd; /* the same directory again (a bind mount) */
  if (w->ndirs >= WATCH_MAX_DIRS) { inotify_rm_watch(w->ifd, wd); return -EOVERFLOW; }
  if (!(w->dirs[wd] = strdup(rel))) { inotify_rm_watch(w->ifd, wd); return -ENOMEM; }
  w->ndirs++;
  return wd;
}

static void drop_wd(Watch *w, int wd) {
  if (wd < 0 || wd >= w->cap || !w->dirs[wd]) return;
  free(w->dirs[wd]);
  w->dirs[wd] = NULL;
  w->ndirs--;
}

/* Whether `p` is `dir` or under it. */
static int under(const char *p, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(p, dir, n) == 0 && (p[n] == 0 || p[n] == '/');
}

/*
 * The scan window. A new directory is watched first, then scanned (its entries were made before
 * its watch was in place): an entry made between the two is seen by the scan *and* queued by
 * inotify. What a scan announces is remembered here, and the queued IN_CREATE / IN_MOVED_TO of a
 * remembered path is not reported again. An entry leaving (IN_DELETE, IN_MOVED_FROM, its directory
 * gone) is forgotten, so a later create of the same name is reported. The set empties once the
 * inotify queue was found empty at least SEEN_WINDOW_MS after the first scan it holds (the kernel
 * may queue a create just after the entry became visible to readdir), and holds SEEN_MAX paths at
 * most (past that a scan's entries may be reported twice, never lost).
 */
#define SEEN_WINDOW_MS 1000
#define SEEN_MAX 65536
static char TOMB[1];

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static size_t seen_hash(const char *s) {
  size_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* The slot of `p`: where it is, or the empty slot where it would go (cap is a power of two, never full). */
static char **seen_slot(Watch *w, const char *p) {
  char **tomb = NULL;
  for (size_t i = seen_hash(p) & (w->seen_cap - 1);; i = (i + 1) & (w->seen_cap - 1)) {
    char **s = &w->seen[i];
    if (!*s) return tomb ? tomb : s;
    if (*s == TOMB) { if (!tomb) tomb = s; }
    else if (!strcmp(*s, p)) return s;
  }
}

static void seen_clear(Watch *w) {
  for (size_t i = 0; i < w->seen_cap; i++)
    if (w->seen[i] && w->seen[i] != TOMB) free(w->seen[i]);
  free(w->seen);
  w->seen = NULL;
  w->seen_cap = w->seen_used = 0;
}

static void seen_add(Watch *w, const char *p) {
  if (w->seen_used >= SEEN_MAX) return;
  if ((w->seen_used + 1) * 2 > w->seen_cap) {
    /* Grow (tombstones are dropped on the way). */
    size_t cap = w->seen_cap ? w->seen_cap * 2 : 64;
    char **old = w->seen;
    size_t ocap = w->seen_cap;
    if (!(w->seen = calloc(cap, sizeof *w->seen))) { w->seen = old; return; }
    w->seen_cap = cap;
    w->seen_used = 0;
    for (size_t i = 0; i < ocap; i++)
      if (old[i] && old[i] != TOMB) { *seen_slot(w, old[i]) = old[i]; w->seen_used++; }
    free(old);
  }
  if (!w->seen_used) w->seen_ms = now_ms();
  char **s = seen_slot(w, p);
  if (*s && *s != TOMB) return;
  char *d = strdup(p);
  if (!d) return;
  if (!*s) w->seen_used++;
  *s = d;
}

/* Whether `p` was announced by a scan in this window; it is forgotten either way. */
static int seen_take(Watch *w, const char *p) {
  if (!w->seen_cap) return 0;
  char **s = seen_slot(w, p);
  if (!*s || *s == TOMB) return 0;
  free(*s);
  *s = TOMB;
  return 1;
}

/* A directory left the tree: its watches and those under it go. */
static void forget(Watch *w, const char *rel) {
  for (int i = 0; i < w->cap; i++)
    if (w->dirs[i] && i != w->top_wd && under(w->dirs[i], rel)) {
      inotify_rm_watch(w->ifd, i);
      drop_wd(w, i);
    }
  for (size_t i = 0; i < w->seen_cap; i++)
    if (w->seen[i] && w->seen[i] != TOMB && under(w->seen[i], rel)) { free(w->seen[i]); w->seen[i] = TOMB; }
}

/* A directory was renamed inside the tree: the paths of its watches follow. */
static void moved(Watch *w, const char *from, const char *to) {
  size_t n = strlen(from);
  for (int i = 0; i < w->cap; i++)
    if (w->dirs[i] && i != w->top_wd && under(w->dirs[i], from)) {
      const char *rest = w->dirs[i] + n;
      size_t a = strlen(to), b = strlen(rest);
      char *p = malloc(a + b + 1);
      if (!p) continue;
      memcpy(p, to, a);
      memcpy(p + a, rest, b + 1);
      free(w->dirs[i]);
      w->dirs[i] = p;
    }
}

/*
 * Watches `rel` and every directory under it (breadth first, no recursion on the C stack). With
 * `announce`, each entry found is reported as created (it appeared before its directory's watch
 * was in place). 0 or -errno; -EOVERFLOW past WATCH_MAX_DIRS.
 */
static int grow(Watch *w, const char *rel, int announce) {
  char **queue = malloc(sizeof *queue);
  size_t head = 0, tail = 0, cap = 1;
  int rc = 0;
  if (!queue || !(queue[tail++] = strdup(rel))) { free(queue); return -ENOMEM; }
  while (head < tail) {
    char *dir = queue[head++];
    int wd = add_dir(w, dir);
    if (wd == -EOVERFLOW || wd == -ENOMEM) { rc = wd; free(dir); break; }
    if (wd < 0) { free(dir); continue; } /* gone already, or replaced by a file or a link */
    if (!w->recursive && wd != w->top_wd) { free(dir); continue; }
    char buf[PATH_MAX];
    const char *last;
    int pfd = open_parent(w, dir, buf, sizeof buf, &last);
    int dfd = pfd < 0 ? -1 : openat(pfd, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0) close(pfd);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) { if (dfd >= 0) close(dfd); free(dir); continue; }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || internal(e->d_name)) continue;
      char *child = join(dir, e->d_name);
      if (!child) continue;
      if (announce) { emit(w, W_CREATE, child, NULL); seen_add(w, child); }
      int isdir = e->d_type == DT_DIR;
      struct stat st;
      if (e->d_type == DT_UNKNOWN) isdir = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      if (!isdir || !w->recursive) { free(child); continue; }
      if (tail == cap) {
        char **q = realloc(queue, cap * 2 * sizeof *q);
        if (!q) { free(child); continue; }
        queue = q;
        cap *= 2;
      }
      queue[tail++] = child;
    }
    closedir(d);
    free(dir);
  }
  while (head < tail) free(queue[head++]);
  free(queue);
  return rc;
}

int watch_open(Watch *w, int rootfd, const char *rel, int recursive, watch_emit_fn fn, void *ctx) {
  memset(w, 0, sizeof *w);
  w->rootfd = rootfd;
  w->recursive = recursive;
  w->emit = fn;
  w->ctx = ctx;
  w->top_wd = -1;
  w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (w->ifd < 0) return -errno;
  int wd = add_dir(w, rel);
  if (wd < 0) { watch_close(w); return wd; }
  w->top_wd = wd;
  int rc = grow(w, rel, 0);
  if (rc < 0) { watch_close(w); return rc; }
  return 0;
}

/* The pending IN_MOVED_FROM had no IN_MOVED_TO: it left the tree (a removal). */
static void flush_from(Watch *w) {
  if (!w->from) return;
  if (!is_write_temp(w->from)) emit(w, W_REMOVE, w->from, NULL);
  if (w->from_dir) forget(w, w->from);
  free(w->from);
  w->from = NULL;
}

/*
 * An entry appeared (created, or moved in from outside): reported, and a directory watched and
 * scanned — unless a scan in this window announced it already (and queued its directory). 1 when
 * the tree outgrew WATCH_MAX_DIRS.
 */
static int created(Watch *w, const char *path, int isdir) {
  if (seen_take(w, path)) return 0;
  emit(w, W_CREATE, path, NULL);
  return isdir && w->recursive && grow(w, path, 1) == -EOVERFLOW;
}

/* One event; 1 when the watch has ended. */
static int handle(Watch *w, const struct inotify_event *ev) {
  if (ev->mask & IN_Q_OVERFLOW) { flush_from(w); emit(w, W_OVERFLOW, "", NULL); return 1; }
  /* Anything but the pending move's second half settles it first (a tree moved out loses its watches before its events count). */
  if (w->from && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->cookie)) flush_from(w);
  const char *dir = ev->wd >= 0 && ev->wd < w->cap ? w->dirs[ev->wd] : NULL;
  if (ev->mask & IN_IGNORED) {
    drop_wd(w, ev->wd);
    return ev->wd == w->top_wd;
  }
  if (!dir) return 0;
  if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
    if (ev->wd != w->top_wd) return 0;
    flush_from(w);
    return 1; /* the watched directory itself went */
  }
  int isdir = (ev->mask & IN_ISDIR) != 0;
  if (!ev->len || !ev->name[0]) {
    if ((ev->mask & IN_ATTRIB) && ev->wd == w->top_wd) emit(w, W_CHMOD, dir, NULL);
    return 0;
  }
  char *path = join(dir, ev->name);
  if (!path) return 0;
  int temp = internal(ev->name);
  if (ev->mask & IN_MOVED_FROM) {
    seen_take(w, path);
    w->from = path;
    w->from_dir = isdir;
    w->cookie = ev->cookie;
    return 0;
  }
  int rc = 0;
  if (ev->mask & IN_MOVED_TO) {
    if (w->from) {
      if (is_write_temp(w->from)) { if (!temp) emit(w, W_WRITE, path, NULL); }
      else if (temp) { emit(w, W_REMOVE, w->from, NULL); if (w->from_dir) forget(w, w->from); }
      else { emit(w, W_RENAME, path, w->from); if (w->from_dir) moved(w, w->from, path); }
      free(w->from);
      w->from = NULL;
    } else if (!temp) rc = created(w, path, isdir);
  } else if (!temp) {
    if (ev->mask & IN_CREATE) rc = created(w, path, isdir);
    else if (ev->mask & IN_MODIFY) emit(w, W_WRITE, path, NULL);
    else if (ev->mask & IN_ATTRIB) emit(w, W_CHMOD, path, NULL);
    else if (ev->mask & IN_DELETE) { seen_take(w, path); emit(w, W_REMOVE, path, NULL); }
  }
  free(path);
  if (rc) emit(w, W_OVERFLOW, "", NULL);
  return rc;
}

int watch_read(Watch *w) {
  _Alignas(struct inotify_event) char buf[65536];
  for (;;) {
    ssize_t n = read(w->ifd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN) return 1;
      if (w->seen_cap && now_ms() - w->seen_ms >= SEEN_WINDOW_MS) seen_clear(w);
      if (!w->from) return 0;
      /* A rename's two halves may straddle reads: wait a moment for the second. */
      struct pollfd pf = {w->ifd, POLLIN, 0};
      if (poll(&pf, 1, PAIR_WAIT_MS) > 0) continue;
      flush_from(w);
      return 0;
    }
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      if (handle(w, ev)) return 1;
      p += sizeof *ev + ev->len;
    }
  }
}

void watch_close(Watch *w) {
  if (w->ifd >= 0) close(w->ifd);
  w->ifd = -1;
  for (int i = 0; i < w->cap; i++) free(w->dirs[i]);
  free(w->dirs);
  w->dirs = NULL;
  w->cap = w->ndirs = 0;
  free(w->from);
  w->from = NULL;
  seen_clear(w);
}
