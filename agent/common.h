/*
 * What both modes of sbx-agent share (docs/agent.md): starting a command the way runc does, and
 * the path helpers of file writes (parents created, temp file + rename).
 */
#ifndef SBX_AGENT_COMMON_H
#define SBX_AGENT_COMMON_H
#include <stdint.h>
#include <sys/types.h>

/* Why a command did not start: the stage and errno the child reports before it would exec. */
enum { S_CHDIR = 1, S_EXEC = 2, S_FILE = 3, S_PROTO = 4, S_CRED = 5 };

typedef struct {
  char **argv, **envp;
  const char *cwd;
  int in, out, err; /* become 0, 1, 2 */
  long uid, gid;    /* -1: keep the agent's own */
} ProcSpec;

/*
 * Forks the command in its own process group with default signal dispositions, the fds as 0/1/2,
 * the credentials, chdir(cwd), then a PATH search like runc's. Returns the pid (the group leader)
 * with why[0] == 0 once it has exec'd; with why[0] != 0 ({stage, errno}) the child is exiting and
 * the caller reaps it. -1 (errno set): nothing was forked.
 */
pid_t start_process(const ProcSpec *ps, uint32_t why[2]);

/* The firecracker guest agent, sbx-agent's second mode (guest.c). */
int guest_main(int argc, char **argv);

/* Splits an absolute path into its directory and last component (not "." or ".."). */
int split_path(const char *path, char *dir, size_t dsz, char *base, size_t bsz);
/* mkdir -p (0755); 0 when dir is a directory at the end. Modifies dir in place, restoring it. */
int mkdirs(char *dir);
/* Opens a fresh `.sbx-write-XXXXXXXX` in dirfd (O_EXCL, O_NOFOLLOW, 0600) and names it in tmp. */
int open_temp(int dirfd, char *tmp, size_t tsz);
/* The mode a write leaves: `mode` when given (not 0xffffffff), the old regular file's, else 0644. */
unsigned write_mode(int dirfd, const char *base, uint32_t mode, int *is_dir);
#endif
