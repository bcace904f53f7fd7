/*
 * The little JSON the guest protocol needs (frame headers, docs/providers/firecracker.md): a
 * parser into a small tree (depth-bounded, strings decoded with their length) and an output buffer.
 */
#ifndef SBX_AGENT_JSON_H
#define SBX_AGENT_JSON_H
#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct JVal {
  JType t;
  int b;
  double num;
  char *s; /* J_STR: NUL-terminated, `len` bytes (may hold a NUL: see json_cstr) */
  size_t len;
  size_t n; /* J_ARR / J_OBJ: items (and keys) */
  struct JVal **items;
  char **keys;
} JVal;

/* NULL when the text is not one JSON value (or nests deeper than 64). */
JVal *json_parse(const char *text, size_t len);
void json_free(JVal *v);
/* An object's member, NULL when absent or v is not an object. */
const JVal *json_get(const JVal *v, const char *key);
/* The string when v is one without a NUL byte (usable as a C string), else NULL. */
const char *json_cstr(const JVal *v);
/* 1 with *out set when v is an integral number in [lo, hi]. */
int json_int(const JVal *v, double lo, double hi, long long *out);

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} Buf;

void buf_put(Buf *b, const void *data, size_t n);
void buf_puts(Buf *b, const char *s);
/* A JSON string literal, escaped. */
void buf_jstr(Buf *b, const char *s, size_t n);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(Buf *b);
#endif
