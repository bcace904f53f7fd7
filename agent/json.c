/* The little JSON of the guest protocol: see json.h. */
#define _GNU_SOURCE
#include "json.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *p, *end;
} Cur;

static void ws(Cur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int hex4(Cur *c, unsigned *out) {
  if (c->end - c->p < 4) return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char h = c->p[i];
    v <<= 4;
    if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
    else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
    else return -1;
  }
  c->p += 4;
  *out = v;
  return 0;
}

static size_t utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
  if (cp < 0x10000) { o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3f)); o[2] = (char)(0x80 | (cp & 0x3f)); return 3; }
  o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3f)); o[2] = (char)(0x80 | (cp >> 6 & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A string literal at c->p (the opening quote); decoded into a fresh buffer (never longer than the literal). */
static char *str(Cur *c, size_t *len) {
  const char *q = ++c->p;
  while (q < c->end && *q != '"') q += *q == '\\' ? 2 : 1;
  if (q >= c->end) return NULL;
  char *o = malloc((size_t)(q - c->p) + 1);
  if (!o) return NULL;
  size_t n = 0;
  while (c->p < q) {
    unsigned char ch = (unsigned char)*c->p++;
    if (ch < 0x20) goto bad;
    if (ch != '\\') { o[n++] = (char)ch; continue; }
    char e = *c->p++;
    unsigned cp, lo;
    switch (e) {
      case '"': case '\\': case '/': o[n++] = e; break;
      case 'b': o[n++] = '\b'; break;
      case 'f': o[n++] = '\f'; break;
      case 'n': o[n++] = '\n'; break;
      case 'r': o[n++] = '\r'; break;
      case 't': o[n++] = '\t'; break;
      case 'u':
        if (hex4(c, &cp)) goto bad;
        if (cp >= 0xd800 && cp < 0xdc00 && q - c->p >= 6 && c->p[0] == '\\' && c->p[1] == 'u') {
          Cur save = *c;
          c->p += 2;
          if (hex4(c, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          else *c = save;
        }
        if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; /* a lone surrogate: as Node's UTF-8 encoder does */
        n += utf8(o + n, cp);
        break;
      default: goto bad;
    }
  }
  c->p = q + 1;
  o[n] = 0;
  *len = n;
  return o;
bad:
  free(o);
  return NULL;
}

static JVal *value(Cur *c, int depth);

static int push(JVal *v, JVal *item, char *key) {
  if ((v->n & (v->n - 1)) == 0) { /* full at 0, 1, 2, 4, 8…: double */
    size_t cap = v->n ? v->n * 2 : 1;
    JVal **it = realloc(v->items, cap * sizeof *it);
    if (!it) return -1;
    v->items = it;
    if (v->t == J_OBJ) {
      char **k = realloc(v->keys, cap * sizeof *k);
      if (!k) return -1;
      v->keys = k;
    }
  }
  v->items[v->n] = item;
  if (v->t == J_OBJ) v->keys[v->n] = key;
  v->n++;
  return 0;
}

static JVal *container(Cur *c, int depth, JType t) {
  JVal *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->t = t;
  char close = t == J_OBJ ? '}' : ']';
  c->p++;
  ws(c);
  if (c->p < c->end && *c->p == close) { c->p++; return v; }
  for (;;) {
    char *key = NULL;
    size_t klen;
    ws(c);
    if (t == J_OBJ) {
      if (c->p >= c->end || *c->p != '"' || !(key = str(c, &klen))) goto bad;
      ws(c);
      if (c->p >= c->end || *c->p++ != ':') { free(key); goto bad; }
    }
    JVal *item = value(c, depth + 1);
    if (!item || push(v, item, key)) { free(key); json_free(item); goto bad; }
    ws(c);
    if (c->p < c->end && *c->p == ',') { c->p++; continue; }
    if (c->p < c->end && *c->p == close) { c->p++; return v; }
    goto bad;
  }
bad:
  json_free(v);
  return NULL;
}

static JVal *value(Cur *c, int depth) {
  ws(c);
  if (c->p >= c->end || depth > 64) return NULL;
  if (*c->p == '{') return container(c, depth, J_OBJ);
  if (*c->p == '[') return container(c, depth, J_ARR);
  JVal *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  size_t left = (size_t)(c->end - c->p);
  if (*c->p == '"') {
    v->t = J_STR;
    if (!(v->s = str(c, &v->len))) { free(v); return NULL; }
  } else if (left >= 4 && memcmp(c->p, "null", 4) == 0) {
    v->t = J_NULL;
    c->p += 4;
  } else if (left >= 4 && memcmp(c->p, "true", 4) == 0) {
    v->t = J_BOOL, v->b = 1;
    c->p += 4;
  } else if (left >= 5 && memcmp(c->p, "false", 5) == 0) {
    v->t = J_BOOL;
    c->p += 5;
  } else if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
    char tmp[64];
    size_t k = 0;
    while (c->p < c->end && k < sizeof tmp - 1 && strchr("+-0123456789.eE", *c->p)) tmp[k++] = *c->p++;
    tmp[k] = 0;
    char *stop;
    v->t = J_NUM;
    v->num = strtod(tmp, &stop);
    if (*stop) { free(v); return NULL; }
  } else {
    free(v);
    return NULL;
  }
  return v;
}

JVal *json_parse(const char *text, size_t len) {
  Cur c = {text, text + len};
  JVal *v = value(&c, 0);
  ws(&c);
  if (v && c.p != c.end) { json_free(v); return NULL; }
  return v;
}

void json_free(JVal *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) {
    json_free(v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->s);
  free(v);
}

const JVal *json_get(const JVal *v, const char *key) {
  if (!v || v->t != J_OBJ) return NULL;
  const JVal *found = NULL;
  for (size_t i = 0; i < v->n; i++)
    if (strcmp(v->keys[i], key) == 0) found = v->items[i]; /* the last one wins, as in JSON.parse */
  return found;
}

const char *json_cstr(const JVal *v) {
  return v && v->t == J_STR && strlen(v->s) == v->len ? v->s : NULL;
}

int json_int(const JVal *v, double lo, double hi, long long *out) {
  if (!v || v->t != J_NUM || v->num < lo || v->num > hi || v->num != (double)(long long)v->num) return 0;
  *out = (long long)v->num;
  return 1;
}

void buf_put(Buf *b, const void *data, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
}

void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

void buf_jstr(Buf *b, const char *s, size_t n) {
  buf_put(b, "\"", 1);
  size_t from = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    buf_put(b, s + from, i - from);
    char esc[8];
    if (ch == '"' || ch == '\\') snprintf(esc, sizeof esc, "\\%c", ch);
    else snprintf(esc, sizeof esc, "\\u%04x", ch);
    buf_puts(b, esc);
    from = i + 1;
  }
  buf_put(b, s + from, n - from);
  buf_put(b, "\"", 1);
}

void buf_printf(Buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void buf_free(Buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
