/*
 * The guest agent's file operations (docs/providers/firecracker.md): stat, list, delete, move,
 * chmod, read (streamed in CHUNK frames) and write (streamed to a temp file, renamed into place).
 * Paths are absolute guest paths; nothing is confined: the VM is the boundary.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common.h"
#include "guest.h"

#define MAX_LIST 10000

/* FileInfo {name, path, size, is_dir, mod_time, mode} as the provider port has it. */
static void file_info(Buf *b, const char *path, const char *name, const struct stat *st) {
  struct tm tm;
  char when[64];
  gmtime_r(&st->st_mtim.tv_sec, &tm);
  size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof when - n, ".%03ldZ", st->st_mtim.tv_nsec / 1000000);
  int dir = S_ISDIR(st->st_mode);
  buf_puts(b, "{\"name\":");
  buf_jstr(b, name, strlen(name));
  buf_puts(b, ",\"path\":");
  buf_jstr(b, path, strlen(path));
  buf_printf(b, ",\"size\":%lld,\"is_dir\":%s,\"mod_time\":\"%s\",\"mode\":\"0%03o\"}", dir ? 0LL : (long long)st->st_size,
             dir ? "true" : "false", when, (unsigned)(st->st_mode & 07777));
}

/* The last component of an absolute path ("/" for the root), trailing slashes ignored. */
static const char *base_name(const char *path, char *out, size_t osz) {
  size_t end = strlen(path);
  while (end > 1 && path[end - 1] == '/') end--;
  size_t start = end;
  while (start > 0 && path[start - 1] != '/') start--;
  if (end == 1 && path[0] == '/') start = 0;
  snprintf(out, osz, "%.*s", (int)(end - start), path + start);
  return out;
}

void op_stat(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return;
  struct stat st;
  if (stat(path, &st) != 0) return (void)send_errno(fd, errno, path);
  char name[4096];
  Buf b = {0};
  buf_puts(&b, "{\"type\":\"ok\",\"info\":");
  file_info(&b, path, base_name(path, name, sizeof name), &st);
  buf_puts(&b, "}");
  if (!b.oom) send_frame(fd, b.p, b.len, NULL, 0);
  buf_free(&b);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void op_list(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return;
  DIR *d = opendir(path);
  if (!d) return (void)send_errno(fd, errno, path);
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int too_many = 0, nomem = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    /* Each entry takes more than 100 bytes of the answer: past MAX_LIST it cannot fit in one header. */
    if (n >= MAX_LIST) { too_many = 1; break; }
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown) { nomem = 1; break; }
      names = grown;
    }
    if (!(names[n] = strdup(e->d_name))) { nomem = 1; break; }
    n++;
  }
  if (!too_many && n > 1) qsort(names, n, sizeof *names, by_name);
  size_t plen = strlen(path);
  while (plen > 1 && path[plen - 1] == '/') plen--;
  Buf b = {0};
  buf_puts(&b, "{\"type\":\"ok\",\"entries\":[");
  int first = 1;
  for (size_t i = 0; i < n && !too_many && b.len <= MAX_HEADER; i++) {
    struct stat st;
    /* A dangling link is listed as the link itself. */
    if (fstatat(dirfd(d), names[i], &st, 0) != 0 && fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    char *child = NULL;
    if (asprintf(&child, "%.*s/%s", plen == 1 ? 0 : (int)plen, path, names[i]) < 0) continue;
    if (!first) buf_puts(&b, ",");
    first = 0;
    file_info(&b, child, names[i], &st);
    free(child);
  }
  buf_puts(&b, "]}");
  closedir(d);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  if (nomem) send_error(fd, "io_error", "out of memory listing %.900s", path);
  else if (too_many || b.oom || b.len > MAX_HEADER) send_error(fd, "payload_too_large", "%.900s has too many entries to list in one answer", path);
  else send_frame(fd, b.p, b.len, NULL, 0);
  buf_free(&b);
}

static int remove_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)ftw;
  return (flag == FTW_DP ? rmdir(p) : unlink(p)) == 0 || errno == ENOENT ? 0 : -1;
}

void op_delete(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return;
  const JVal *rec = json_get(h, "recursive");
  struct stat st;
  if (lstat(path, &st) != 0) return (void)send_errno(fd, errno, path);
  int r;
  if (!S_ISDIR(st.st_mode)) r = unlink(path);
  else if (rec && rec->t == J_BOOL && rec->b) r = nftw(path, remove_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  else {
    r = rmdir(path);
    if (r != 0 && (errno == ENOTEMPTY || errno == EEXIST))
      return (void)send_error(fd, "bad_request", "%.900s is a directory that is not empty", path);
  }
  if (r != 0) return (void)send_errno(fd, errno, path);
  send_text(fd, "{\"type\":\"ok\"}");
}

void op_move(int fd, const JVal *h) {
  const char *from = want_path(fd, h, "from");
  const char *to = from ? want_path(fd, h, "to") : NULL;
  if (!to) return;
  char dir[4096], base[256];
  if (split_path(to, dir, sizeof dir, base, sizeof base)) return (void)send_error(fd, "bad_request", "%.900s names no file", to);
  struct stat st;
  if (lstat(from, &st) != 0) return (void)send_errno(fd, errno, from);
  if (mkdirs(dir) != 0) return (void)send_errno(fd, errno, to);
  if (rename(from, to) != 0) return (void)send_errno(fd, errno, from);
  send_text(fd, "{\"type\":\"ok\"}");
}

void op_chmod(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return;
  long long mode;
  if (!json_int(json_get(h, "mode"), 0, 07777, &mode)) return (void)send_error(fd, "bad_request", "mode must be an integer from 0 to 07777");
  if (chmod(path, (mode_t)mode) != 0) return (void)send_errno(fd, errno, path);
  send_text(fd, "{\"type\":\"ok\"}");
}

void op_read(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return;
  long long max = -1;
  const JVal *mv = json_get(h, "max_bytes");
  if (mv && !json_int(mv, 0, 9007199254740991.0, &max)) return (void)send_error(fd, "bad_request", "max_bytes must be a whole number");
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f < 0) return (void)send_errno(fd, errno, path);
  struct stat st;
  if (fstat(f, &st) != 0) { int e = errno; close(f); return (void)send_errno(fd, e, path); }
  if (S_ISDIR(st.st_mode)) { close(f); return (void)send_errno(fd, EISDIR, path); }
  /* The size goes first: only regular files have one (a fifo or a device could block or never end). */
  if (!S_ISREG(st.st_mode)) { close(f); return (void)send_error(fd, "bad_request", "%.900s is not a regular file", path); }
  long long size = (long long)st.st_size;
  if (max >= 0 && size > max) {
    close(f);
    char hdr[256];
    snprintf(hdr, sizeof hdr, "{\"type\":\"error\",\"code\":\"payload_too_large\",\"size\":%lld,\"message\":\"the file is %lld bytes\"}", size, size);
    return (void)send_text(fd, hdr);
  }
  char hdr[96];
  snprintf(hdr, sizeof hdr, "{\"type\":\"file\",\"size\":%lld}", size);
  if (send_text(fd, hdr)) { close(f); return; }
  static char buf[CHUNK];
  static const char data[] = "{\"type\":\"data\"}";
  long long left = size;
  while (left > 0) {
    ssize_t n = read(f, buf, left < (long long)sizeof buf ? (size_t)left : sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(f);
      if (n == 0) return (void)send_error(fd, "io_error", "%.900s shrank while it was read", path);
      return (void)send_errno(fd, errno, path);
    }
    if (send_frame(fd, data, sizeof data - 1, buf, (size_t)n)) { close(f); return; }
    left -= n;
  }
  close(f);
  send_text(fd, "{\"type\":\"end\"}");
}

/*
 * After an early refusal the host may still be sending the content: take its frames (up to `end`)
 * so the refusal is read before the connection closes.
 */
static int drain(int fd) {
  uint32_t dlen;
  JVal *f;
  while ((f = recv_header(fd, &dlen, IO_TIMEOUT_MS))) {
    const char *t = json_cstr(json_get(f, "type"));
    int end = t && !strcmp(t, "end");
    json_free(f);
    if (skip_data(fd, dlen)) break;
    if (end) return 0;
  }
  return -1;
}

/* Streams the data frames up to `end` into tf; -1: the connection failed or broke the protocol. */
static int receive(int fd, int tf, long long *got, int *werr) {
  static char buf[CHUNK];
  for (;;) {
    uint32_t dlen;
    JVal *f = recv_header(fd, &dlen, IO_TIMEOUT_MS);
    if (!f) return -1;
    const char *t = json_cstr(json_get(f, "type"));
    int end = t && !strcmp(t, "end"), data = t && !strcmp(t, "data");
    json_free(f);
    if (!end && !data) return -1;
    while (dlen > 0) {
      size_t n = dlen < sizeof buf ? dlen : sizeof buf;
      if (io_recv(fd, buf, n, IO_TIMEOUT_MS)) return -1;
      dlen -= (uint32_t)n;
      *got += (long long)n;
      for (size_t off = 0; !*werr && off < n;) {
        ssize_t w = write(tf, buf + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) *werr = w < 0 ? errno : EIO; /* reported at the end; the rest is still taken */
        else off += (size_t)w;
      }
    }
    if (end) return 0;
  }
}

int op_write(int fd, const JVal *h) {
  const char *path = want_path(fd, h, "path");
  if (!path) return drain(fd);
  long long mode = 0xffffffffLL, size = -1;
  const JVal *mv = json_get(h, "mode"), *sv = json_get(h, "size");
  if ((mv && !json_int(mv, 0, 07777, &mode)) || (sv && !json_int(sv, 0, 9007199254740991.0, &size))) {
    send_error(fd, "bad_request", "mode must be an integer from 0 to 07777 and size a whole number");
    return drain(fd);
  }
  char dir[4096], base[256], tmp[64];
  if (split_path(path, dir, sizeof dir, base, sizeof base)) {
    send_error(fd, "bad_request", "%.900s names no file", path);
    return drain(fd);
  }
  int dfd = -1, tf = -1, is_dir = 0;
  if (mkdirs(dir) != 0 || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) goto fail;
  unsigned final_mode = write_mode(dfd, base, (uint32_t)mode, &is_dir);
  if (is_dir) { errno = EISDIR; goto fail; }
  if ((tf = open_temp(dfd, tmp, sizeof tmp)) < 0) goto fail;
  long long got = 0;
  int werr = 0;
  if (receive(fd, tf, &got, &werr)) {
    /* The host went away or broke the protocol: nothing is left behind, nothing answered. */
    close(tf);
    unlinkat(dfd, tmp, 0);
    close(dfd);
    return -1;
  }
  if (!werr && size >= 0 && got != size) {
    close(tf);
    unlinkat(dfd, tmp, 0);
    close(dfd);
    return send_error(fd, "bad_request", "%lld bytes arrived for a write of %lld", got, size);
  }
  if (!werr && fchmod(tf, final_mode) != 0) werr = errno;
  if (close(tf) != 0 && !werr) werr = errno;
  if (!werr && renameat(dfd, tmp, dfd, base) != 0) werr = errno;
  if (werr) {
    unlinkat(dfd, tmp, 0);
    close(dfd);
    return send_errno(fd, werr, path);
  }
  close(dfd);
  return send_text(fd, "{\"type\":\"ok\"}");
fail:;
  int e = errno;
  if (dfd >= 0) close(dfd);
  send_errno(fd, e, path);
  return drain(fd);
}
