/*
 * streams.kafka._rdfetch: a librdkafka consumer whose `consume` returns Arrow-ready
 * column buffers instead of one Python object per record.
 *
 * The Python reader (streams/kafka/fetch.py) spends most of a Spark task's CPU building
 * a `Message` per record and reading it back through method calls. Here the records of
 * one `rd_kafka_consume_batch_queue` call are copied, without the GIL, into contiguous
 * buffers: partitions, offsets, timestamps, and keys and values as Arrow binary arrays
 * (offsets, data, validity bitmap). The range logic (where a range ends, gaps, data
 * loss, end of partition) stays in Python, on these columns.
 *
 * librdkafka is not linked: `load(path)` opens the one confluent-kafka already loaded
 * (its wheel bundles it under a hashed name) and resolves the functions below, so both
 * clients share one library and no development headers are needed. The declarations
 * are librdkafka's public, stable ABI (rdkafka.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* ---- librdkafka's public ABI ------------------------------------------------------- */

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;

typedef struct {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef struct {
    char *topic;
    int32_t partition;
    int64_t offset;
    void *metadata;
    size_t metadata_size;
    void *opaque;
    int err;
    void *_private;
} rd_kafka_topic_partition_t;

typedef struct {
    int cnt;
    int size;
    rd_kafka_topic_partition_t *elems;
} rd_kafka_topic_partition_list_t;

#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0

static struct {
    rd_kafka_conf_t *(*conf_new)(void);
    int (*conf_set)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
    void (*conf_destroy)(rd_kafka_conf_t *);
    rd_kafka_t *(*new_)(int, rd_kafka_conf_t *, char *, size_t);
    void (*destroy)(rd_kafka_t *);
    int (*consumer_close)(rd_kafka_t *);
    int (*poll_set_consumer)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_consumer)(rd_kafka_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    int64_t (*message_timestamp)(const rd_kafka_message_t *, int *);
    int (*message_headers)(const rd_kafka_message_t *, rd_kafka_headers_t **);
    int (*header_get_all)(const rd_kafka_headers_t *, size_t, const char **, const void **,
                          size_t *);
    const char *(*topic_name)(const rd_kafka_topic_t *);
    const char *(*err2str)(int);
    rd_kafka_topic_partition_list_t *(*list_new)(int);
    rd_kafka_topic_partition_t *(*list_add)(rd_kafka_topic_partition_list_t *, const char *,
                                            int32_t);
    void (*list_destroy)(rd_kafka_topic_partition_list_t *);
    int (*assign)(rd_kafka_t *, const rd_kafka_topic_partition_list_t *);
    int (*pause_partitions)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    int (*position)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    int (*query_watermark_offsets)(rd_kafka_t *, const char *, int32_t, int64_t *, int64_t *,
                                   int);
} rk;

static int loaded = 0;

static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (loaded) Py_RETURN_NONE;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return PyErr_Format(PyExc_OSError, "cannot open %s: %s", path, dlerror());
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&rk.conf_new, "rd_kafka_conf_new"},
        {(void **)&rk.conf_set, "rd_kafka_conf_set"},
        {(void **)&rk.conf_destroy, "rd_kafka_conf_destroy"},
        {(void **)&rk.new_, "rd_kafka_new"},
        {(void **)&rk.destroy, "rd_kafka_destroy"},
        {(void **)&rk.consumer_close, "rd_kafka_consumer_close"},
        {(void **)&rk.poll_set_consumer, "rd_kafka_poll_set_consumer"},
        {(void **)&rk.queue_get_consumer, "rd_kafka_queue_get_consumer"},
        {(void **)&rk.queue_destroy, "rd_kafka_queue_destroy"},
        {(void **)&rk.consume_batch_queue, "rd_kafka_consume_batch_queue"},
        {(void **)&rk.message_destroy, "rd_kafka_message_destroy"},
        {(void **)&rk.message_timestamp, "rd_kafka_message_timestamp"},
        {(void **)&rk.message_headers, "rd_kafka_message_headers"},
        {(void **)&rk.header_get_all, "rd_kafka_header_get_all"},
        {(void **)&rk.topic_name, "rd_kafka_topic_name"},
        {(void **)&rk.err2str, "rd_kafka_err2str"},
        {(void **)&rk.list_new, "rd_kafka_topic_partition_list_new"},
        {(void **)&rk.list_add, "rd_kafka_topic_partition_list_add"},
        {(void **)&rk.list_destroy, "rd_kafka_topic_partition_list_destroy"},
        {(void **)&rk.assign, "rd_kafka_assign"},
        {(void **)&rk.pause_partitions, "rd_kafka_pause_partitions"},
        {(void **)&rk.position, "rd_kafka_position"},
        {(void **)&rk.query_watermark_offsets, "rd_kafka_query_watermark_offsets"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (*syms[i].slot == NULL) {
            PyErr_Format(PyExc_OSError, "%s has no %s (librdkafka too old?)", path,
                         syms[i].name);
            dlclose(h);
            return NULL;
        }
    }
    loaded = 1;
    Py_RETURN_NONE;
}

/* ---- the consumer ------------------------------------------------------------------- */

/* Arrow's binary arrays have int32 offsets: one call returns at most this many bytes of
 * keys or of values; the records past it wait for the next call. */
#define MAX_BYTES ((size_t)INT32_MAX)

typedef struct {
    PyObject_HEAD
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    rd_kafka_message_t **msgs; /* the last batch from librdkafka ... */
    Py_ssize_t cap, n, next;   /* ... its size and the first record not yet returned */
    PyObject *topics;          /* list of topic names; records carry their index */
    rd_kafka_topic_t **rkts;   /* the handles behind `topics`, same order */
    Py_ssize_t nrkts;
    int busy;                  /* a call is waiting in librdkafka without the GIL */
} Consumer;

static int check_open(Consumer *c) {
    if (c->rk == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "consumer is closed");
        return -1;
    }
    if (c->busy) { /* another thread is inside a call that released the GIL */
        PyErr_SetString(PyExc_RuntimeError, "consumer is in use by another thread");
        return -1;
    }
    return 0;
}

static void drop_pending(Consumer *c) {
    for (Py_ssize_t i = c->next; i < c->n; i++) rk.message_destroy(c->msgs[i]);
    c->n = c->next = 0;
}

static void close_handle(Consumer *c) {
    if (c->rk == NULL || c->busy) return;
    drop_pending(c);
    rd_kafka_t *h = c->rk;
    rd_kafka_queue_t *q = c->queue;
    c->rk = NULL;
    c->queue = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (q != NULL) rk.queue_destroy(q);
    rk.consumer_close(h);
    rk.destroy(h);
    Py_END_ALLOW_THREADS
}

static void Consumer_dealloc(Consumer *c) {
    close_handle(c);
    PyMem_Free(c->msgs);
    PyMem_Free(c->rkts);
    Py_XDECREF(c->topics);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Consumer(conf: list[tuple[str, str]]) */
static int Consumer_init(Consumer *c, PyObject *args, PyObject *kw) {
    PyObject *items;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &items)) return -1;
    if (!loaded) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka not loaded: call load(path) first");
        return -1;
    }
    if (c->rk != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "consumer already created");
        return -1;
    }
    char err[512];
    rd_kafka_conf_t *conf = rk.conf_new();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        const char *k, *v;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(items, i), "ss", &k, &v)) {
            rk.conf_destroy(conf);
            return -1;
        }
        if (rk.conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
            rk.conf_destroy(conf);
            PyErr_Format(PyExc_ValueError, "librdkafka setting %s=%s: %s", k, v, err);
            return -1;
        }
    }
    rd_kafka_t *h = rk.new_(RD_KAFKA_CONSUMER, conf, err, sizeof(err)); /* owns conf */
    if (h == NULL) {
        rk.conf_destroy(conf);
        PyErr_Format(PyExc_ValueError, "cannot create a Kafka consumer: %s", err);
        return -1;
    }
    rk.poll_set_consumer(h);
    c->rk = h;
    c->queue = rk.queue_get_consumer(h);
    c->topics = PyList_New(0);
    return c->topics == NULL ? -1 : 0;
}

/* A topic-partition list from [(topic, partition)] or [(topic, partition, offset)]. */
static rd_kafka_topic_partition_list_t *to_list(PyObject *seq) {
    PyObject *fast = PySequence_Fast(seq, "expected a list of (topic, partition[, offset])");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    rd_kafka_topic_partition_list_t *l = rk.list_new((int)(n > 0 ? n : 1));
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *topic;
        int partition;
        long long offset = -1001; /* RD_KAFKA_OFFSET_INVALID */
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "si|L", &topic, &partition,
                              &offset)) {
            rk.list_destroy(l);
            Py_DECREF(fast);
            return NULL;
        }
        rk.list_add(l, topic, partition)->offset = offset;
    }
    Py_DECREF(fast);
    return l;
}

static PyObject *kafka_error(const char *what, int code) {
    return PyErr_Format(PyExc_RuntimeError, "%s: %s (code %d)", what, rk.err2str(code), code);
}

typedef int (*list_call)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);

/* call(handle, list of `arg`) with the GIL released. */
static PyObject *with_list(Consumer *c, PyObject *arg, list_call call, const char *what) {
    if (check_open(c)) return NULL;
    rd_kafka_topic_partition_list_t *l = to_list(arg);
    if (l == NULL) return NULL;
    int e;
    c->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    e = call(c->rk, l);
    Py_END_ALLOW_THREADS
    c->busy = 0;
    rk.list_destroy(l);
    if (e) return kafka_error(what, e);
    Py_RETURN_NONE;
}

static PyObject *Consumer_assign(Consumer *c, PyObject *arg) {
    drop_pending(c); /* fetched under the previous assignment */
    return with_list(c, arg, (list_call)rk.assign, "assign");
}

static PyObject *Consumer_pause(Consumer *c, PyObject *arg) {
    return with_list(c, arg, rk.pause_partitions, "pause");
}

/* position([(topic, partition)]) -> [offset]: the next offset to fetch, or -1001 when
 * none is known yet. */
static PyObject *Consumer_position(Consumer *c, PyObject *arg) {
    if (check_open(c)) return NULL;
    rd_kafka_topic_partition_list_t *l = to_list(arg);
    if (l == NULL) return NULL;
    int e = rk.position(c->rk, l);
    if (e) {
        rk.list_destroy(l);
        return kafka_error("position", e);
    }
    PyObject *out = PyList_New(l->cnt);
    for (int i = 0; out != NULL && i < l->cnt; i++) {
        PyObject *v = PyLong_FromLongLong(l->elems[i].offset);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    rk.list_destroy(l);
    return out;
}

/* watermarks(topic, partition, timeout_ms) -> (low, high), asked of the leader. */
static PyObject *Consumer_watermarks(Consumer *c, PyObject *args) {
    const char *topic;
    int partition, timeout_ms;
    if (!PyArg_ParseTuple(args, "sii", &topic, &partition, &timeout_ms)) return NULL;
    if (check_open(c)) return NULL;
    int64_t low = -1, high = -1;
    int e;
    c->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    e = rk.query_watermark_offsets(c->rk, topic, partition, &low, &high, timeout_ms);
    Py_END_ALLOW_THREADS
    c->busy = 0;
    if (e) return kafka_error("watermarks", e);
    return Py_BuildValue("LL", (long long)low, (long long)high);
}

static Py_ssize_t topic_index(Consumer *c, rd_kafka_topic_t *rkt) {
    for (Py_ssize_t i = 0; i < c->nrkts; i++)
        if (c->rkts[i] == rkt) return i;
    PyObject *name = PyUnicode_FromString(rk.topic_name(rkt));
    if (name == NULL) return -1;
    Py_ssize_t i;
    for (i = 0; i < PyList_GET_SIZE(c->topics); i++) {
        int eq = PyUnicode_Compare(PyList_GET_ITEM(c->topics, i), name);
        if (eq == 0) break;
    }
    if (i == PyList_GET_SIZE(c->topics) && PyList_Append(c->topics, name) < 0) {
        Py_DECREF(name);
        return -1;
    }
    Py_DECREF(name);
    rd_kafka_topic_t **grown = PyMem_Realloc(c->rkts, (c->nrkts + 1) * sizeof(*grown));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->rkts = grown;
    c->rkts[c->nrkts++] = rkt;
    return i;
}

static PyObject *new_bytes(Py_ssize_t n, char **data) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL) *data = PyBytes_AS_STRING(b);
    return b;
}

/* The key or value column of records [lo, hi): offsets, data, validity (None if none
 * null), into a tuple. */
static PyObject *binary_column(rd_kafka_message_t **m, Py_ssize_t lo, Py_ssize_t hi,
                               int key) {
    Py_ssize_t n = hi - lo;
    size_t total = 0, nulls = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        void *p = key ? m[i]->key : m[i]->payload;
        total += key ? m[i]->key_len : m[i]->len;
        nulls += p == NULL;
    }
    char *offs = NULL, *data = NULL, *valid = NULL;
    PyObject *o = new_bytes((n + 1) * 4, &offs);
    PyObject *d = new_bytes((Py_ssize_t)total, &data);
    PyObject *v = nulls ? new_bytes((n + 7) / 8, &valid) : Py_NewRef(Py_None);
    if (o == NULL || d == NULL || v == NULL) goto fail;
    int32_t *off = (int32_t *)offs;
    if (valid != NULL) memset(valid, 0, (n + 7) / 8);
    int32_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        rd_kafka_message_t *r = m[lo + i];
        const void *p = key ? r->key : r->payload;
        size_t len = key ? r->key_len : r->len;
        off[i] = at;
        if (p != NULL) {
            memcpy(data + at, p, len);
            at += (int32_t)len;
            if (valid != NULL) valid[i >> 3] |= (char)(1 << (i & 7));
        }
    }
    off[n] = at;
    Py_END_ALLOW_THREADS
    return Py_BuildValue("NNN", o, d, v);
fail:
    Py_XDECREF(o);
    Py_XDECREF(d);
    Py_XDECREF(v);
    return NULL;
}

static PyObject *headers_of(rd_kafka_message_t *m) {
    rd_kafka_headers_t *hdrs;
    if (rk.message_headers(m, &hdrs)) Py_RETURN_NONE;
    PyObject *out = PyList_New(0);
    const char *name;
    const void *val;
    size_t size;
    for (size_t i = 0; out != NULL && !rk.header_get_all(hdrs, i, &name, &val, &size); i++) {
        PyObject *pair = val == NULL
                             ? Py_BuildValue("(sO)", name, Py_None)
                             : Py_BuildValue("(sy#)", name, (const char *)val, (Py_ssize_t)size);
        if (pair == NULL || PyList_Append(out, pair) < 0) Py_CLEAR(out);
        Py_XDECREF(pair);
    }
    return out;
}

/*
 * consume(max_records, timeout_ms, headers) -> (records, events)
 *
 * Waits up to timeout_ms for records, as confluent-kafka's `Consumer.consume` does.
 * records: None, or a tuple (topics, topic_index, partition, offset, ts_type, ts_ms, key,
 *   value, headers) of the records in order: topic_index int32, partition int32, offset
 *   int64, ts_type int32 (librdkafka's: 0 none, 1 create, 2 log append), ts_ms int64 as
 *   bytes; key and value as (offsets int32, data, validity bitmap or None); headers a
 *   list of None or [(name, value)] per record when asked, else None.
 * events: [(topic or None, partition, offset, code, message)] for the error and
 *   end-of-partition messages of the same call, in order.
 */
static PyObject *consume(Consumer *c, Py_ssize_t want, int timeout_ms, int with_headers);

static PyObject *Consumer_consume(Consumer *c, PyObject *args) {
    Py_ssize_t want;
    int timeout_ms, with_headers;
    if (!PyArg_ParseTuple(args, "nip", &want, &timeout_ms, &with_headers)) return NULL;
    if (check_open(c)) return NULL;
    /* The whole call, not only librdkafka's wait: the copies release the GIL too. */
    c->busy = 1;
    PyObject *out = consume(c, want < 1 ? 1 : want, timeout_ms, with_headers);
    c->busy = 0;
    return out;
}

static PyObject *consume(Consumer *c, Py_ssize_t want, int timeout_ms, int with_headers) {
    if (c->next >= c->n) {
        c->n = c->next = 0;
        if (want > c->cap) {
            rd_kafka_message_t **grown = PyMem_Realloc(c->msgs, want * sizeof(*grown));
            if (grown == NULL) return PyErr_NoMemory();
            c->msgs = grown;
            c->cap = want;
        }
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = rk.consume_batch_queue(c->queue, timeout_ms, c->msgs, (size_t)want);
        Py_END_ALLOW_THREADS
        if (got < 0) return PyErr_Format(PyExc_RuntimeError, "consume failed (%zd)", got);
        c->n = got;
    }
    /* Records from `next` up to the byte limit or `want`; errors and end-of-partition
     * messages become events. */
    Py_ssize_t lo = c->next, hi = lo, nrec = 0;
    size_t keys = 0, values = 0;
    while (hi < c->n && hi - lo < want) {
        rd_kafka_message_t *m = c->msgs[hi];
        if (!m->err) {
            if (keys + m->key_len > MAX_BYTES || values + m->len > MAX_BYTES) break;
            keys += m->key_len;
            values += m->len;
            nrec++;
        }
        hi++;
    }
    if (hi == lo && lo < c->n) { /* one record larger than MAX_BYTES on its own */
        return PyErr_Format(PyExc_ValueError, "a Kafka record of %zu bytes is larger than "
                            "an Arrow binary array holds", c->msgs[lo]->len);
    }
    PyObject *events = PyList_New(0), *records = NULL;
    rd_kafka_message_t **recs = PyMem_Malloc((nrec > 0 ? nrec : 1) * sizeof(*recs));
    if (events == NULL || recs == NULL) goto fail;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        rd_kafka_message_t *m = c->msgs[i];
        if (!m->err) {
            recs[k++] = m;
            continue;
        }
        PyObject *topic = m->rkt ? PyUnicode_FromString(rk.topic_name(m->rkt))
                                 : Py_NewRef(Py_None);
        const char *what = rk.err2str(m->err);
        Py_ssize_t wlen = (Py_ssize_t)strlen(what);
        if (m->payload != NULL && m->len > 0) { /* librdkafka's message for this error */
            what = (const char *)m->payload;
            wlen = (Py_ssize_t)m->len;
        }
        PyObject *text = PyUnicode_DecodeUTF8(what, wlen, "replace");
        PyObject *ev = topic == NULL || text == NULL
                           ? NULL
                           : Py_BuildValue("(OiLiO)", topic, (int)m->partition,
                                           (long long)m->offset, m->err, text);
        Py_XDECREF(topic);
        Py_XDECREF(text);
        if (ev == NULL || PyList_Append(events, ev) < 0) {
            Py_XDECREF(ev);
            goto fail;
        }
        Py_DECREF(ev);
    }
    if (nrec == 0) {
        records = Py_NewRef(Py_None);
    } else {
        char *tix = NULL, *part = NULL, *off = NULL, *tst = NULL, *tms = NULL;
        PyObject *b_tix = new_bytes(nrec * 4, &tix), *b_part = new_bytes(nrec * 4, &part),
                 *b_off = new_bytes(nrec * 8, &off), *b_tst = new_bytes(nrec * 4, &tst),
                 *b_tms = new_bytes(nrec * 8, &tms);
        PyObject *key = binary_column(recs, 0, nrec, 1), *value = binary_column(recs, 0, nrec, 0);
        PyObject *hdrs = with_headers ? PyList_New(nrec) : Py_NewRef(Py_None);
        int ok = b_tix && b_part && b_off && b_tst && b_tms && key && value && hdrs;
        rd_kafka_topic_t *last = NULL;
        int32_t last_ix = 0;
        for (Py_ssize_t i = 0; ok && i < nrec; i++) {
            rd_kafka_message_t *m = recs[i];
            if (m->rkt != last) {
                Py_ssize_t ix = topic_index(c, m->rkt);
                if (ix < 0) {
                    ok = 0;
                    break;
                }
                last = m->rkt;
                last_ix = (int32_t)ix;
            }
            ((int32_t *)tix)[i] = last_ix;
            ((int32_t *)part)[i] = m->partition;
            ((int64_t *)off)[i] = m->offset;
            int t = 0;
            ((int64_t *)tms)[i] = rk.message_timestamp(m, &t);
            ((int32_t *)tst)[i] = t;
            if (with_headers) {
                PyObject *h = headers_of(m);
                if (h == NULL) ok = 0;
                else PyList_SET_ITEM(hdrs, i, h);
            }
        }
        PyObject *topics = ok ? PyList_GetSlice(c->topics, 0, PyList_GET_SIZE(c->topics)) : NULL;
        if (topics == NULL) {
            Py_XDECREF(b_tix);
            Py_XDECREF(b_part);
            Py_XDECREF(b_off);
            Py_XDECREF(b_tst);
            Py_XDECREF(b_tms);
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_XDECREF(hdrs);
            goto fail;
        }
        records = Py_BuildValue("(NNNNNNNNN)", topics, b_tix, b_part, b_off, b_tst, b_tms, key,
                                value, hdrs);
        if (records == NULL) goto fail;
    }
    PyMem_Free(recs);
    for (Py_ssize_t i = lo; i < hi; i++) rk.message_destroy(c->msgs[i]);
    c->next = hi;
    return Py_BuildValue("(NN)", records, events);
fail:
    PyMem_Free(recs);
    Py_XDECREF(events);
    return NULL;
}

static PyObject *Consumer_close(Consumer *c, PyObject *unused) {
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "consumer is in use by another thread");
        return NULL;
    }
    close_handle(c);
    Py_RETURN_NONE;
}

static PyMethodDef Consumer_methods[] = {
    {"assign", (PyCFunction)Consumer_assign, METH_O,
     "assign([(topic, partition, offset)]): read these partitions from these offsets."},
    {"pause", (PyCFunction)Consumer_pause, METH_O,
     "pause([(topic, partition)]): stop fetching these partitions."},
    {"position", (PyCFunction)Consumer_position, METH_O,
     "position([(topic, partition)]) -> [next offset, or -1001 if none yet]."},
    {"watermarks", (PyCFunction)Consumer_watermarks, METH_VARARGS,
     "watermarks(topic, partition, timeout_ms) -> (low, high)."},
    {"consume", (PyCFunction)Consumer_consume, METH_VARARGS,
     "consume(max_records, timeout_ms, headers) -> (records, events); see the module."},
    {"close", (PyCFunction)Consumer_close, METH_NOARGS, "Leave the group and free the client."},
    {NULL},
};

static PyTypeObject ConsumerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streams.kafka._rdfetch.Consumer",
    .tp_basicsize = sizeof(Consumer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Consumer(conf: list[tuple[str, str]]): a librdkafka consumer returning columns.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Consumer_init,
    .tp_dealloc = (destructor)Consumer_dealloc,
    .tp_methods = Consumer_methods,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS, "load(path): open librdkafka at path and resolve its API."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "streams.kafka._rdfetch",
    "A librdkafka consumer returning Arrow-ready columns (see _rdfetch.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__rdfetch(void) {
    if (PyType_Ready(&ConsumerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Consumer", (PyObject *)&ConsumerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
