/*
 * Directory watches (DESIGN §16, docs/agent.md "Watch"): one inotify watch per directory, added
 * with IN_DONT_FOLLOW | IN_ONLYDIR on a name looked up in its parent directory's descriptor, the
 * parents walked from the root with O_NOFOLLOW: a symlink is never followed, not as the watched
 * directory, not on the way to it, not inside it. Paths are reported relative to the root
 * ("/" + path), computed from sbx's own table, never from the kernel's view of where things are.
 */
#ifndef SBX_AGENT_WATCH_H
#define SBX_AGENT_WATCH_H
#include <stddef.h>
#include <stdint.h>

#define WATCH_MAX_DIRS 4096
enum { W_READY = 0, W_CREATE = 1, W_WRITE = 2, W_REMOVE = 3, W_RENAME = 4, W_CHMOD = 5, W_OVERFLOW = 6, W_FAILED = 255 };

/* One change: its kind, "/"-relative path, and the old path of a rename (else NULL). */
typedef void (*watch_emit_fn)(void *ctx, int kind, const char *path, const char *old_path);

typedef struct {
  int ifd, rootfd, recursive, ndirs, top_wd;
  char **dirs; /* by wd: the directory's path relative to the root ("" = the root itself); NULL = none */
  int cap;
  /* A pending IN_MOVED_FROM, matched by the next IN_MOVED_TO with its cookie. */
  uint32_t cookie;
  char *from;
  int from_dir;
  watch_emit_fn emit;
  void *ctx;
  /* Entries a scan announced as created, since `seen_ms` (watch.c, "the scan window"): a hash set. */
  char **seen;
  size_t seen_cap, seen_used;
  long long seen_ms;
} Watch;

/*
 * Starts watching `rel` (relative to rootfd, no leading "/", "" = the root) and, when recursive,
 * every directory under it. 0, or -errno: ENOENT, ENOTDIR (a file or a symlink), EOVERFLOW (more
 * than WATCH_MAX_DIRS directories). rootfd stays the caller's; the process's cwd is left at rootfd.
 */
int watch_open(Watch *w, int rootfd, const char *rel, int recursive, watch_emit_fn emit, void *ctx);
/* Takes what the kernel queued: 0 go on, 1 the watch has ended (overflow told, or its directory is gone). */
int watch_read(Watch *w);
void watch_close(Watch *w);
/* Host mode: `sbx-agent --watch ROOT PATH [--no-recursive]`, frames on stdout until stdin closes. */
int watch_main(int argc, char **argv);
#endif
