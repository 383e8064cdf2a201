/*
 * streams.landing._flatjson: type flat JSON objects straight into Arrow column buffers.
 *
 * split_block (arrow_json.py) types a block of Kafka values with Arrow's JSON reader,
 * which builds a generic parse of every value before converting it. Most landing
 * records are one flat object of the schema's fields, written by a program; this
 * parser types exactly those, in one pass, and declines everything else, which then
 * takes the Arrow path as before (and from there, Spark's parse). It only needs to be
 * right on what it accepts, so it accepts little:
 *
 * - one object, `{` first and `}` last, members separated by `,` and `:` with spaces
 *   around them (no other whitespace); no member twice;
 * - keys without escapes; a key not in the schema is skipped if its value is a string
 *   (no escapes), a number a double holds, true, false or null, and its key is ASCII;
 * - per field kind: int64 and int32 take a JSON integer in range, double a JSON
 *   number (correctly rounded by strtod in the C locale, finite), string and text
 *   (a timestamp, converted in Python) a string without escapes or control
 *   characters and of valid UTF-8, bool true or false; null is null for every kind;
 * - never: `-0` as a number (Arrow and Spark type a bare `-0` differently in a double
 *   field), leading zeros, NaN or Infinity, nested values, escapes, other whitespace.
 *
 * A value that starts with `{` and ends inside the object, after a prefix it accepts
 * (the commonest malformed record: a value cut off), is told apart from the others it
 * declines: no JSON parser takes it, Spark's included, whatever its options.
 *
 * tests/integration/landing/test_arrow_json.py checks the result against Arrow's
 * parse on generated values, and split_block's against Spark's.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { K_INT64, K_INT32, K_DOUBLE, K_STRING, K_BOOL, K_TEXT };

typedef struct {
    const char *name;
    Py_ssize_t len;
    int kind;
} Field;

typedef struct { /* one field of the row being parsed */
    int state;   /* 0 absent, 1 null, 2 value */
    int64_t i;
    double d;
    const unsigned char *s;
    Py_ssize_t slen;
} Slot;

typedef struct { /* a growing output buffer */
    char *p;
    size_t len, cap;
} Buf;

static int grow(Buf *b, size_t n) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap && grow(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

typedef struct { /* one output column */
    Buf valid;   /* bitmap, one bit per typed row */
    Buf values;  /* fixed width values, a bool bitmap, or string offsets */
    Buf data;    /* string bytes */
    int32_t at;  /* string bytes so far */
    Py_ssize_t nulls;
} Column;

static locale_t c_locale;

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *e) {
    while (p < e && *p == ' ') p++;
    return p;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether any of the 8 bytes in w may be `"`, `\`, a control character or not ASCII
 * (it may say yes for none: the bytes are then looked at one by one). */
static inline int special8(uint64_t w) {
    uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
    return ((w | ((w - ONES * 0x20) & ~w) | ((q - ONES) & ~q) | ((b - ONES) & ~b)) & HIGHS) != 0;
}

/* A string's body from after its opening quote: the position of its closing quote,
 * e when the input ends first, or NULL if it has an escape, a control character or
 * invalid UTF-8. */
static const unsigned char *string_end(const unsigned char *p, const unsigned char *e) {
    for (;;) {
#if defined(__SSE2__)
        /* 16 bytes a step: `"`, `\\`, and (signed) below 0x20, a control character or
         * not ASCII */
        while (e - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i s = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            int m = _mm_movemask_epi8(s);
            if (m) {
                p += __builtin_ctz((unsigned)m);
                break;
            }
            p += 16;
        }
#endif
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (special8(w)) break;
            p += 8;
        }
        if (p >= e) return e;
        unsigned char c = *p;
        if (c == '"') return p;
        if (c == '\\' || c < 0x20) return NULL;
        if (c < 0x80) {
            p++;
            continue;
        }
        int n;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) n = 1;
        else if (c == 0xE0) n = 2, lo = 0xA0;
        else if (c == 0xED) n = 2, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) n = 2;
        else if (c == 0xF0) n = 3, lo = 0x90;
        else if (c == 0xF4) n = 3, hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) n = 3;
        else return NULL;
        if (e - p <= n) return NULL;
        if (p[1] < lo || p[1] > hi) return NULL;
        for (int k = 2; k <= n; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return NULL;
        p += n + 1;
    }
}

/* A JSON number at p: its end, whether it is an integer, or NULL if it is not one
 * this parser takes (`-0`, leading zeros, no digits). */
static const unsigned char *number_end(const unsigned char *p, const unsigned char *e,
                                       int *integer) {
    const unsigned char *q = p;
    if (q < e && *q == '-') q++;
    if (q >= e || *q < '0' || *q > '9') return NULL;
    if (*q == '0') {
        if (q + 1 < e && q[1] >= '0' && q[1] <= '9') return NULL; /* leading zero */
        if (q > p && !(q + 1 < e && (q[1] == '.' || q[1] == 'e' || q[1] == 'E')))
            return NULL; /* a bare -0 */
    }
    while (q < e && *q >= '0' && *q <= '9') q++;
    *integer = 1;
    if (q < e && *q == '.') {
        *integer = 0;
        q++;
        if (q >= e || *q < '0' || *q > '9') return NULL;
        while (q < e && *q >= '0' && *q <= '9') q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        *integer = 0;
        q++;
        if (q < e && (*q == '+' || *q == '-')) q++;
        if (q >= e || *q < '0' || *q > '9') return NULL;
        while (q < e && *q >= '0' && *q <= '9') q++;
    }
    return q;
}

static int parse_int(const unsigned char *p, const unsigned char *e, int64_t *out) {
    int neg = *p == '-';
    if (neg) p++;
    uint64_t v = 0;
    for (; p < e; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number's double, correctly rounded. Without an exponent, at most 19 digits
 * whose integer is below 2^53 and at most 22 of them after the point, it is that
 * integer divided by a power of ten, both exact in a double, so the one division
 * rounds correctly (Clinger's fast path); anything else goes to strtod. */
static int parse_double(const unsigned char *p, const unsigned char *e, double *out) {
    const unsigned char *q = p;
    int neg = *q == '-';
    q += neg;
    uint64_t m = 0;
    int digits = 0, scale = 0, point = 0;
    for (; q < e; q++) {
        if (*q == '.') {
            point = 1;
            continue;
        }
        if (*q < '0' || *q > '9' || ++digits > 19) break;
        m = m * 10 + (uint64_t)(*q - '0');
        scale += point;
    }
    if (q == e && m <= (1ULL << 53) && scale <= 22) {
        double d = (double)m / POW10[scale];
        *out = neg ? -d : d;
        return 0;
    }
    char tmp[64];
    size_t n = (size_t)(e - p);
    if (n >= sizeof(tmp)) return -1;
    memcpy(tmp, p, n);
    tmp[n] = 0;
    char *end;
    double d = strtod_l(tmp, &end, c_locale);
    if (end != tmp + n || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

enum { TYPED = 0, TYPED_SKIPPING = 1, DECLINED = -1, CUT = -2 };

/* memcmp for keys, which are short: no call. */
static inline int same(const unsigned char *a, const char *b, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (a[i] != (unsigned char)b[i]) return 0;
    return 1;
}

/* One value into slots: TYPED, or TYPED_SKIPPING when it skipped a member not in the
 * schema; DECLINED, or CUT when the input ends inside the object after a prefix this
 * parser accepts. */
static int parse_row(const unsigned char *p, const unsigned char *e, const Field *fields,
                     Py_ssize_t nf, Slot *slots) {
    for (Py_ssize_t f = 0; f < nf; f++) slots[f].state = 0;
    if (p >= e || *p != '{') return DECLINED;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}') return p + 1 == e ? TYPED : DECLINED;
    Py_ssize_t hint = 0; /* members mostly come in the schema's order */
    int typed = TYPED;
    for (;;) {
        if (p >= e) return CUT;
        if (*p != '"') return DECLINED;
        const unsigned char *k = p + 1, *ke = string_end(k, e);
        if (ke == NULL) return DECLINED;
        if (ke == e) return CUT;
        Py_ssize_t klen = ke - k, f = nf;
        for (Py_ssize_t j = 0; j < nf; j++) {
            Py_ssize_t c = hint + j < nf ? hint + j : hint + j - nf;
            if (fields[c].len == klen && same(k, fields[c].name, klen)) {
                f = c;
                hint = c + 1;
                break;
            }
        }
        if (f == nf) { /* not in the schema: ASCII keys only */
            for (const unsigned char *c = k; c < ke; c++)
                if (*c >= 0x80) return DECLINED;
            typed = TYPED_SKIPPING;
        }
        p = skip_ws(ke + 1, e);
        if (p >= e) return CUT;
        if (*p != ':') return DECLINED;
        p = skip_ws(p + 1, e);
        if (p >= e) return CUT;
        Slot *s = f < nf ? &slots[f] : NULL;
        int kind = f < nf ? fields[f].kind : -1;
        if (s != NULL && s->state) return DECLINED; /* the same member twice */
        unsigned char c = *p;
        if (c == '"') {
            const unsigned char *se = string_end(p + 1, e);
            if (se == NULL) return DECLINED;
            if (se == e) return CUT;
            if (s != NULL) {
                if (kind != K_STRING && kind != K_TEXT) return DECLINED;
                s->state = 2;
                s->s = p + 1;
                s->slen = se - (p + 1);
            }
            p = se + 1;
        } else if (c == 'n' || c == 't' || c == 'f') {
            const char *word = c == 'n' ? "null" : c == 't' ? "true" : "false";
            size_t wl = strlen(word);
            if ((size_t)(e - p) < wl)
                return memcmp(p, word, (size_t)(e - p)) == 0 ? CUT : DECLINED;
            if (memcmp(p, word, wl) != 0) return DECLINED;
            if (s != NULL) {
                if (c == 'n') {
                    s->state = 1;
                } else {
                    if (kind != K_BOOL) return DECLINED;
                    s->state = 2;
                    s->i = c == 't';
                }
            }
            p += wl;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            int integer;
            const unsigned char *ne = number_end(p, e, &integer);
            if (ne == NULL) return DECLINED;
            if (ne == e) return CUT; /* whatever the number, the object is not closed */
            if (s != NULL) {
                if (kind == K_INT64 || kind == K_INT32) {
                    if (!integer || parse_int(p, ne, &s->i)) return DECLINED;
                    if (kind == K_INT32 && (s->i < INT32_MIN || s->i > INT32_MAX))
                        return DECLINED;
                } else if (kind == K_DOUBLE) {
                    if (parse_double(p, ne, &s->d)) return DECLINED;
                } else {
                    return DECLINED;
                }
                s->state = 2;
            } else {
                double skipped; /* Arrow's reader refuses a number no double holds, */
                if (parse_double(p, ne, &skipped)) return DECLINED; /* even one it ignores */
            }
            p = ne;
        } else {
            return DECLINED; /* an object, an array, or not JSON */
        }
        p = skip_ws(p, e);
        if (p >= e) return CUT;
        if (*p == '}') return p + 1 == e ? typed : DECLINED;
        if (*p != ',') return DECLINED;
        p = skip_ws(p + 1, e);
    }
}

static int set_bit(Buf *b, Py_ssize_t i, int on) {
    if ((i & 7) == 0) {
        unsigned char z = 0;
        if (put(b, &z, 1)) return -1;
    }
    if (on) b->p[i >> 3] |= (char)(1 << (i & 7));
    return 0;
}

/* Append the row in slots as typed row m. */
static int append(Column *cols, const Field *fields, Py_ssize_t nf, const Slot *slots,
                  Py_ssize_t m) {
    for (Py_ssize_t f = 0; f < nf; f++) {
        Column *col = &cols[f];
        const Slot *s = &slots[f];
        int has = s->state == 2;
        col->nulls += !has;
        if (set_bit(&col->valid, m, has)) return -1;
        switch (fields[f].kind) {
        case K_INT64: {
            int64_t v = has ? s->i : 0;
            if (put(&col->values, &v, 8)) return -1;
            break;
        }
        case K_INT32: {
            int32_t v = has ? (int32_t)s->i : 0;
            if (put(&col->values, &v, 4)) return -1;
            break;
        }
        case K_DOUBLE: {
            double v = has ? s->d : 0.0;
            if (put(&col->values, &v, 8)) return -1;
            break;
        }
        case K_BOOL:
            if (set_bit(&col->values, m, has && s->i)) return -1;
            break;
        default: /* K_STRING, K_TEXT: the offset before this row; the last one at the end */
            if (put(&col->values, &col->at, 4)) return -1;
            if (has) {
                if (put(&col->data, s->s, (size_t)s->slen)) return -1;
                col->at += (int32_t)s->slen;
            }
        }
    }
    return 0;
}

/* A finished column buffer, handed to Python as is: it owns the memory the parse wrote
 * and lends it through the buffer protocol, read-only, so that `pa.py_buffer` wraps it
 * without a copy. It frees the memory when its last reference goes; Arrow's buffer
 * holds one for as long as an array uses it. */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t len;
} ColumnBuffer;

static void column_buffer_dealloc(PyObject *self) {
    free(((ColumnBuffer *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static int column_buffer_get(PyObject *self, Py_buffer *view, int flags) {
    ColumnBuffer *b = (ColumnBuffer *)self;
    static char empty[1];
    return PyBuffer_FillInfo(view, self, b->p ? b->p : empty, b->len, 1, flags);
}

static PyBufferProcs column_buffer_procs = {column_buffer_get, NULL};

static PyTypeObject ColumnBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streams.landing._flatjson.ColumnBuffer",
    .tp_basicsize = sizeof(ColumnBuffer),
    .tp_dealloc = column_buffer_dealloc,
    .tp_as_buffer = &column_buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One column buffer the parse wrote, lent read-only through the buffer protocol.",
};

/* b's memory as a ColumnBuffer, which then owns it; b is left empty. The buffers are
 * sized for every value up front: the unused end goes back to the allocator first
 * (glibc's realloc shrinks in place). On failure b keeps its memory, for the caller to free. */
static PyObject *as_buffer(Buf *b) {
    ColumnBuffer *o = PyObject_New(ColumnBuffer, &ColumnBufferType);
    if (o == NULL) return NULL;
    if (b->len == 0) {
        free(b->p);
        b->p = NULL;
    } else if (b->len < b->cap) {
        char *p = realloc(b->p, b->len);
        if (p != NULL) b->p = p;
    }
    o->p = b->p;
    o->len = (Py_ssize_t)b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

/*
 * parse(offsets, data, start, n, fields, validity) -> (typed, columns)
 *
 * offsets: the values' int32 offsets buffer (n + 1 entries from `start`), data their
 * bytes; fields: [(name as bytes, kind)]; validity: the values' bitmap (bit `start`
 * first) or None. A null value is declined. typed: bytes, 1 for each value parsed here,
 * 3 for each parsed here that had a member not in the schema (skipped), 2 for each cut
 * off (module doc), 0 for each other declined. columns: per field (validity bitmap or
 * None when no typed value is null there, values, string data or None) over the typed
 * values in order: int64 / int32 / double values, a bool bitmap, or int32 string
 * offsets (count + 1); each buffer a ColumnBuffer, the memory the parse wrote, for
 * `pa.py_buffer` to wrap without a copy.
 */
static PyObject *parse(PyObject *self, PyObject *args) {
    Py_buffer ob, db, vb = {0};
    Py_ssize_t start, n;
    PyObject *spec, *validity;
    if (!PyArg_ParseTuple(args, "y*y*nnO!O", &ob, &db, &start, &n, &PyList_Type, &spec,
                          &validity))
        return NULL;
    if (validity != Py_None && PyObject_GetBuffer(validity, &vb, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&ob);
        PyBuffer_Release(&db);
        return NULL;
    }
    const unsigned char *vbits = validity != Py_None ? (const unsigned char *)vb.buf : NULL;
    PyObject *out = NULL, *typed = NULL, *cols_out = NULL;
    Py_ssize_t nf = PyList_GET_SIZE(spec);
    Field *fields = PyMem_Calloc((size_t)(nf ? nf : 1), sizeof(Field));
    Slot *slots = PyMem_Calloc((size_t)(nf ? nf : 1), sizeof(Slot));
    Column *cols = PyMem_Calloc((size_t)(nf ? nf : 1), sizeof(Column));
    if (fields == NULL || slots == NULL || cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (start < 0 || n < 0 || (start + n + 1) * 4 > ob.len) {
        PyErr_SetString(PyExc_ValueError, "offsets shorter than start + n + 1 entries");
        goto done;
    }
    const int32_t *off = (const int32_t *)ob.buf + start;
    if (n > 0 && (off[0] < 0 || off[n] > db.len)) {
        PyErr_SetString(PyExc_ValueError, "offsets point outside the data");
        goto done;
    }
    if (vbits != NULL && (start + n + 7) / 8 > vb.len) {
        PyErr_SetString(PyExc_ValueError, "validity shorter than start + n bits");
        goto done;
    }
    for (Py_ssize_t f = 0; f < nf; f++) {
        char *name;
        Py_ssize_t len;
        int kind;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(spec, f), "y#i", &name, &len, &kind)) goto done;
        if (kind < K_INT64 || kind > K_TEXT) {
            PyErr_Format(PyExc_ValueError, "unknown field kind %d", kind);
            goto done;
        }
        fields[f] = (Field){name, len, kind};
    }
    typed = PyBytes_FromStringAndSize(NULL, n);
    if (typed == NULL) goto done;
    char *ok = PyBytes_AS_STRING(typed);
    const unsigned char *data = (const unsigned char *)db.buf;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Room for every value typed, so that appends rarely grow a buffer: a string
     * column's bytes are at most the block's (when the offsets ascend). */
    size_t bits = (size_t)n / 8 + 1;
    size_t bytes = n > 0 && off[n] > off[0] ? (size_t)(off[n] - off[0]) : 0;
    for (Py_ssize_t f = 0; !failed && f < nf; f++) {
        int k = fields[f].kind, wide = k == K_INT64 || k == K_DOUBLE;
        size_t values = k == K_BOOL ? bits : ((size_t)n + 1) * (wide ? 8 : 4);
        failed = grow(&cols[f].valid, bits) || grow(&cols[f].values, values) ||
                 ((k == K_STRING || k == K_TEXT) && grow(&cols[f].data, bytes));
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        ok[i] = 0;
        int32_t a = off[i], b = off[i + 1];
        if (b < a || failed) continue;
        if (vbits != NULL && !(vbits[(start + i) >> 3] >> ((start + i) & 7) & 1)) continue;
        int got = parse_row(data + a, data + b, fields, nf, slots);
        if (got == CUT) ok[i] = 2;
        if (got < 0) continue;
        int too_big = 0;
        for (Py_ssize_t f = 0; f < nf; f++)
            if (slots[f].state == 2 && (fields[f].kind == K_STRING || fields[f].kind == K_TEXT) &&
                (int64_t)cols[f].at + slots[f].slen > INT32_MAX)
                too_big = 1;
        if (too_big) continue; /* Arrow's int32 offsets: the rest takes the Arrow path */
        if (append(cols, fields, nf, slots, m)) {
            failed = 1;
            continue;
        }
        ok[i] = got == TYPED ? 1 : 3;
        m++;
    }
    for (Py_ssize_t f = 0; !failed && f < nf; f++)
        if (fields[f].kind == K_STRING || fields[f].kind == K_TEXT)
            failed = put(&cols[f].values, &cols[f].at, 4);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    cols_out = PyList_New(nf);
    if (cols_out == NULL) goto done;
    for (Py_ssize_t f = 0; f < nf; f++) {
        int text = fields[f].kind == K_STRING || fields[f].kind == K_TEXT;
        /* No bitmap without a null: Arrow's kernels and Parquet's writer skip it then */
        PyObject *v = cols[f].nulls ? as_buffer(&cols[f].valid) : Py_NewRef(Py_None);
        PyObject *x = as_buffer(&cols[f].values);
        PyObject *d = text ? as_buffer(&cols[f].data) : Py_NewRef(Py_None);
        PyObject *t = v && x && d ? PyTuple_Pack(3, v, x, d) : NULL;
        Py_XDECREF(v);
        Py_XDECREF(x);
        Py_XDECREF(d);
        if (t == NULL) goto done;
        PyList_SET_ITEM(cols_out, f, t);
    }
    out = PyTuple_Pack(2, typed, cols_out);
done:
    for (Py_ssize_t f = 0; cols != NULL && f < nf; f++) {
        free(cols[f].valid.p);
        free(cols[f].values.p);
        free(cols[f].data.p);
    }
    PyMem_Free(fields);
    PyMem_Free(slots);
    PyMem_Free(cols);
    Py_XDECREF(typed);
    Py_XDECREF(cols_out);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&db);
    if (vbits != NULL) PyBuffer_Release(&vb);
    return out;
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS,
     "parse(offsets, data, start, n, fields, validity) -> (typed, columns); see _flatjson.c."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streams.landing._flatjson",
    "Flat JSON objects typed into Arrow column buffers (see _flatjson.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__flatjson(void) {
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) return PyErr_NoMemory();
    if (PyType_Ready(&ColumnBufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "INT64", K_INT64) || PyModule_AddIntConstant(m, "INT32", K_INT32) ||
        PyModule_AddIntConstant(m, "DOUBLE", K_DOUBLE) ||
        PyModule_AddIntConstant(m, "STRING", K_STRING) ||
        PyModule_AddIntConstant(m, "BOOL", K_BOOL) || PyModule_AddIntConstant(m, "TEXT", K_TEXT)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
