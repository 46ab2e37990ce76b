/* rtrace.core._scan: which lines of a block of native trace lines a full parse would only count.

The optional fast path of `rtrace.core.loader.Rows.entries` (without it, the same records come through the pure
path, every line parsed). For each line it says, from
the bytes alone, whether `orjson.loads` would accept it and the reader's inline path would make of it a record whose
(dir, type) is *quiet* (no transition: only the clocks move) or an *audio delta* (only an item's audio length moves),
and then takes only what the fold needs of it: `t`, `conn` and `dir` (and for an audio delta its `item_id` and the
bytes its base64 `delta` carries).

It is conservative: a line is taken only when it is one JSON object (validated whole: strings, escapes, UTF-8,
numbers, nesting, nothing after it) whose top-level keys `t` (a float literal), `dir` (a direction), `conn` (an
integer from 1) and `event` (an object whose own `type` is a string in `table`) appear once each, with no escape in
any key of the line's top level or of the event's. Anything else (an escape in a type, a duplicate key, a number
near the limits of a double, a lone surrogate, nesting deeper than 64) is left to the full parse, which decides.

`scan(buffer, start, end, table, seen[, keep, detail, heads])` reads the lines of buffer[start:end] (each ended by a newline, the
last one maybe not). `table` maps a raw type (bytes) to an int: bit k set when the type is quiet in direction k
(client, server, meta, local), bit 4 + k when it is an audio delta there. `seen` is the set of connections the reader
has yielded a record of: a line of another connection is left to the full parse (and its connection added), for the
fold must meet each connection's first record whole. `keep` names a connection whose every line is left to the full
parse (`show --conn`, which prints its records one by one; 0, the default, is none). With `detail`, a quiet run also
carries each line's t and raw type (the HTML report's timeline has a point for every event). Returns a list, in line order:
each line left to the full parse, as bytes; and for each run of consecutive taken lines of one kind, direction and
connection (and item, for audio deltas) a tuple: (count, t of the last, conn, dir index) for quiet ones, (count, t of
the last, conn, dir index, each line's t, each line's raw type) with `detail`; (count, t of the last, conn, dir index,
item_id, audio bytes, each line's t, each line's bytes) for audio deltas. With `heads`, a line left to the full
parse whose top level the scanner read (the four keys as the reader's inline path takes them, a type in `table`)
comes as (its event's bytes, t, conn, dir index) instead of its bytes: the reader parses only the event (the
record's outer object, its keys looked up one by one, was a quarter of the inline path's cost).

`lines(buffer, start, end)` counts the newlines of a region, as `bytes.count` does, with `memchr`.

`hinted(text)` is the other scan here: the secret screen of `rtrace.core.secrets` (`_hinted`), whether an ASCII text,
lower-cased, holds one of the hint words given once to `set_hints(words)` or a `%` and two hex digits; None for a
text that is not ASCII (folding and lower-casing those is left to Python) or before `set_hints`. It answers what the
regular expression `secrets._HINT` answers (tests/test_core_secrets.py holds the two to the same answer), at a byte
per step instead of a try of the whole alternation at most positions of the text.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64

typedef const unsigned char *P;

typedef struct {
    P s;          /* a string's body (between the quotes), or a number's text */
    Py_ssize_t n; /* its length in bytes */
    int esc;      /* the string has an escape */
    int ascii;    /* every byte of the string is ASCII */
    int kind;     /* for numbers: 1 integer literal, 2 with a fraction or an exponent */
} Tok;

/* JSON's white space but the newline: a line holds none, so a newline ends the line wherever it is (the scanner
   reads a line up to the region's end, and every token stops at a newline as at the end). */
static inline P skip_ws(P p, P end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p;
}

static inline P skip_digits(P p, P end) {
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p;
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at p (on its opening quote); the position after its closing quote, or NULL when it is not one orjson
   surely accepts. */
static P scan_string(P p, P end, Tok *t) {
    p++;
    t->s = p;
    t->esc = 0;
    t->ascii = 1;
    for (;;) {
#if defined(__SSE2__)
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
            /* signed compare: the control bytes (0x00-0x1f) and every byte from 0x80 (negative) */
            m = _mm_or_si128(m, _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            int bits = _mm_movemask_epi8(m);
            if (bits) {
                p += __builtin_ctz((unsigned)bits);
                goto special; /* the byte found is one of those: no need to look at the ones before again */
            }
            p += 16;
        }
#endif
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p >= end)
            return NULL;
#if defined(__SSE2__)
    special:;
#endif
        unsigned char c = *p;
        if (c == '"') {
            t->n = p - t->s;
            return p + 1;
        }
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            t->esc = 1;
            if (end - p < 2)
                return NULL;
            unsigned char e = p[1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
                continue;
            }
            if (e != 'u' || end - p < 6)
                return NULL;
            int v = 0;
            for (int k = 2; k < 6; k++) {
                int h = hexval(p[k]);
                if (h < 0)
                    return NULL;
                v = v * 16 + h;
            }
            if (v >= 0xD800 && v <= 0xDFFF)
                return NULL; /* surrogates: pairs are fine for orjson, but the full parse can judge them */
            p += 6;
            continue;
        }
        /* UTF-8, strictly: no overlong form, no surrogate, nothing past U+10FFFF */
        t->ascii = 0;
        Py_ssize_t left = end - p;
        if (c >= 0xC2 && c <= 0xDF) {
            if (left < 2 || (p[1] & 0xC0) != 0x80)
                return NULL;
            p += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
                return NULL;
            if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))
                return NULL;
            p += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
                return NULL;
            if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
                return NULL;
            p += 4;
        } else {
            return NULL;
        }
    }
}

/* A number: JSON's grammar, within limits that keep it finite as a double (at most 30 integer digits, an exponent
   of at most two digits). */
static P scan_number(P p, P end, Tok *t) {
    P start = p;
    t->kind = 1;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        P d = p;
        p = skip_digits(p, end);
        if (p - d > 30)
            return NULL;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        P d = p + 1;
        p = skip_digits(d, end);
        if (p == d || p - d > 40)
            return NULL;
        t->kind = 2;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        P d = p;
        p = skip_digits(p, end);
        if (p == d || p - d > 2)
            return NULL;
        t->kind = 2;
    }
    t->s = start;
    t->n = p - start;
    return p;
}

static P scan_value(P p, P end, int depth);

static P scan_container(P p, P end, int depth) {
    if (depth > MAX_DEPTH)
        return NULL;
    unsigned char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    Tok tok;
    p = skip_ws(p + 1, end);
    if (p < end && *p == close)
        return p + 1;
    for (;;) {
        if (object) {
            if (p >= end || *p != '"' || !(p = scan_string(p, end, &tok)))
                return NULL;
            p = skip_ws(p, end);
            if (p >= end || *p != ':')
                return NULL;
            p++;
        }
        if (!(p = scan_value(p, end, depth)))
            return NULL;
        p = skip_ws(p, end);
        if (p >= end)
            return NULL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == close)
            return p + 1;
        return NULL;
    }
}

static P scan_value(P p, P end, int depth) {
    Tok tok;
    p = skip_ws(p, end);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '"':
        return scan_string(p, end, &tok);
    case '{':
    case '[':
        return scan_container(p, end, depth + 1);
    case 't':
        return end - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return end - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
        return end - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
        return scan_number(p, end, &tok);
    }
}

static inline int key_is(const Tok *k, const char *name, Py_ssize_t n) {
    return k->n == n && memcmp(k->s, name, n) == 0;
}

/* What the fold needs of one line. */
typedef struct {
    Tok t, dir, conn, type, item, delta;
    int has_item, has_delta, has_counted;
    P event, event_end; /* the event object's text, braces included */
    P end;              /* the line's end: its newline, or the end of the region */
} Line;

/* The event object at p: its own keys `type` (and for audio deltas `item_id`, `delta`, `rtrace_audio_bytes`). */
static P scan_event(P p, P end, Line *ln) {
    Tok key;
    int has_type = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return NULL; /* no type */
    for (;;) {
        if (p >= end || *p != '"' || !(p = scan_string(p, end, &key)) || key.esc)
            return NULL;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return NULL;
        p = skip_ws(p + 1, end);
        if (p >= end)
            return NULL;
        Tok *into = NULL;
        int *flag = NULL;
        if (key_is(&key, "type", 4)) {
            if (has_type || *p != '"')
                return NULL;
            has_type = 1;
            into = &ln->type;
        } else if (key_is(&key, "item_id", 7)) {
            if (ln->has_item)
                return NULL;
            flag = &ln->has_item;
            into = &ln->item;
        } else if (key_is(&key, "delta", 5)) {
            if (ln->has_delta)
                return NULL;
            flag = &ln->has_delta;
            into = &ln->delta;
        } else if (key_is(&key, "rtrace_audio_bytes", 18)) {
            ln->has_counted = 1;
        }
        if (into != NULL && *p == '"') {
            if (!(p = scan_string(p, end, into)))
                return NULL;
            if (flag != NULL)
                *flag = 1;
        } else {
            if (flag != NULL)
                *flag = 2; /* present, not a string */
            if (!(p = scan_value(p, end, 1)))
                return NULL;
        }
        p = skip_ws(p, end);
        if (p >= end)
            return NULL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == '}')
            return has_type && !ln->type.esc ? p + 1 : NULL;
        return NULL;
    }
}

/* 1 when the line at p (up to its newline or `end`) is one JSON object with the four keys of a native record as the
   inline path wants them; then `ln->end` is where the line ends (found without a search for the newline). */
static int scan_line(P p, P end, Line *ln) {
    Tok key;
    int seen = 0; /* bits: t, dir, conn, event */
    ln->has_item = ln->has_delta = ln->has_counted = 0;
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return 0;
    p = skip_ws(p + 1, end);
    for (;;) {
        if (p >= end || *p != '"' || !(p = scan_string(p, end, &key)) || key.esc)
            return 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return 0;
        p = skip_ws(p + 1, end);
        if (p >= end)
            return 0;
        int bit = 0;
        if (key_is(&key, "t", 1))
            bit = 1;
        else if (key_is(&key, "dir", 3))
            bit = 2;
        else if (key_is(&key, "conn", 4))
            bit = 4;
        else if (key_is(&key, "event", 5))
            bit = 8;
        if (seen & bit)
            return 0;
        seen |= bit;
        if (bit == 1) {
            if (!(p = scan_number(p, end, &ln->t)) || ln->t.kind != 2)
                return 0;
        } else if (bit == 2) {
            if (*p != '"' || !(p = scan_string(p, end, &ln->dir)) || ln->dir.esc)
                return 0;
        } else if (bit == 4) {
            if (!(p = scan_number(p, end, &ln->conn)) || ln->conn.kind != 1)
                return 0;
        } else if (bit == 8) {
            ln->event = p;
            if (*p != '{' || !(p = scan_event(p, end, ln)))
                return 0;
            ln->event_end = p;
        } else if (!(p = scan_value(p, end, 0))) {
            return 0;
        }
        p = skip_ws(p, end);
        if (p >= end)
            return 0;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p != '}')
            return 0;
        p = skip_ws(p + 1, end);
        if (p < end && *p != '\n')
            return 0;
        ln->end = p;
        return seen == 15;
    }
}

/* The index of a direction in `DIRECTIONS` (client, server, meta, local), or -1: compared at constant lengths, which
   the compiler inlines (a loop over the names called memcmp up to four times a line). */
static int dir_index(const Tok *d) {
    switch (d->n) {
    case 6:
        return memcmp(d->s, "client", 6) == 0 ? 0 : memcmp(d->s, "server", 6) == 0 ? 1 : -1;
    case 4:
        return memcmp(d->s, "meta", 4) == 0 ? 2 : -1;
    case 5:
        return memcmp(d->s, "local", 5) == 0 ? 3 : -1;
    default:
        return -1;
    }
}

/* conn as an int from 1 (at most nine digits), else -1 */
static long conn_value(const Tok *c) {
    if (c->n < 1 || c->n > 9 || c->s[0] == '-' || c->s[0] == '0')
        return -1;
    long v = 0;
    for (Py_ssize_t k = 0; k < c->n; k++)
        v = v * 10 + (c->s[k] - '0');
    return v;
}

/* The value of a float literal the scanner took (`scan_number`'s grammar), when it is exact in one operation: at
   most 2^53 as an integer of all its digits, scaled by a power of ten of at most 22 (exact doubles both, so one
   correctly rounded multiplication or division: Clinger's fast path, what strtod does first). 1 when it is. */
static int float_fast(const Tok *t, double *out) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double TENS[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    P p = t->s, end = t->s + t->n;
    int negative = p < end && *p == '-';
    p += negative;
    unsigned long long m = 0;
    int digits = 0, scale = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++, digits++)
        m = m * 10 + (unsigned)(*p - '0');
    if (p < end && *p == '.')
        for (p++; p < end && *p >= '0' && *p <= '9'; p++, digits++, scale--)
            m = m * 10 + (unsigned)(*p - '0');
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int minus = p < end && *p == '-';
        p += p < end && (*p == '-' || *p == '+');
        int e = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            e = e * 10 + (*p - '0');
        scale += minus ? -e : e;
    }
    if (p != end || digits > 19 || m > (1ULL << 53) || scale < -22 || scale > 22)
        return 0;
    double v = scale < 0 ? (double)m / TENS[-scale] : (double)m * TENS[scale];
    *out = negative ? -v : v;
    return 1;
#else
    (void)t;
    (void)out;
    return 0;
#endif
}

static PyObject *float_of(const Tok *t) {
    double fast;
    if (float_fast(t, &fast))
        return PyFloat_FromDouble(fast);
    char buf[96];
    if (t->n >= (Py_ssize_t)sizeof buf)
        return NULL;
    memcpy(buf, t->s, t->n);
    buf[t->n] = 0;
    double v = PyOS_string_to_double(buf, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(v);
}

/* The bytes of audio a base64 payload of n ASCII characters carries (`audio.audio_bytes`). */
static long long audio_bytes(const Tok *d) {
    long long n = d->n;
    long long pad = 0;
    if (n >= 1 && d->s[n - 1] == '=')
        pad++;
    if (n >= 2 && d->s[n - 2] == '=')
        pad++;
    return n * 3 / 4 - pad;
}

enum { OTHER, QUIET, AUDIO };

typedef struct {
    int kind;
    Py_ssize_t count;
    int dir;
    long conn;
    Tok t;             /* of the last line (its text stays in the buffer) */
    P item;            /* audio: the item id of the run */
    Py_ssize_t item_n;
    long long bytes;
    PyObject *times, *sizes; /* audio: each line's t and bytes; quiet, with `detail`: each line's t and raw type */
} Run;

static int flush(Run *r, PyObject *out) {
    if (r->kind == OTHER)
        return 0;
    PyObject *entry = NULL, *t = float_of(&r->t);
    if (t != NULL && r->kind == QUIET && r->times == NULL) {
        entry = Py_BuildValue("(nOli)", r->count, t, r->conn, r->dir);
    } else if (t != NULL && r->kind == QUIET) {
        PyObject *times = PyList_AsTuple(r->times), *types = PyList_AsTuple(r->sizes);
        if (times && types)
            entry = Py_BuildValue("(nOliOO)", r->count, t, r->conn, r->dir, times, types);
        Py_XDECREF(times);
        Py_XDECREF(types);
    } else if (t != NULL) {
        PyObject *item = PyUnicode_DecodeUTF8((const char *)r->item, r->item_n, NULL);
        PyObject *times = PyList_AsTuple(r->times), *sizes = PyList_AsTuple(r->sizes);
        if (item && times && sizes)
            entry = Py_BuildValue("(nOliOLOO)", r->count, t, r->conn, r->dir, item, r->bytes, times, sizes);
        Py_XDECREF(item);
        Py_XDECREF(times);
        Py_XDECREF(sizes);
    }
    Py_XDECREF(t);
    Py_CLEAR(r->times);
    Py_CLEAR(r->sizes);
    r->kind = OTHER;
    if (entry == NULL)
        return -1;
    int rc = PyList_Append(out, entry);
    Py_DECREF(entry);
    return rc;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t a, b;
    PyObject *table, *seen;
    long keep = 0;
    int detail = 0, heads = 0;
    if (!PyArg_ParseTuple(args, "y*nnO!O!|lpp", &view, &a, &b, &PyDict_Type, &table, &PySet_Type, &seen, &keep,
                          &detail, &heads))
        return NULL;
    PyObject *type_str = NULL; /* with `detail`: the raw type of the last quiet line, as a str */
    P type_s = NULL;
    Py_ssize_t type_n = -1;
    Run run = {OTHER, 0, 0, 0, {0}, NULL, 0, 0, NULL, NULL};
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (a < 0 || b > view.len || a > b) {
        PyErr_SetString(PyExc_ValueError, "region out of the buffer");
        goto fail;
    }
    long known = -1; /* the last connection found in `seen` */
    /* the last type looked up, its bits, and whether `table` has it: consecutive lines mostly share one */
    P last_type = NULL;
    Py_ssize_t last_type_n = -1;
    long last_bits = 0;
    int last_known = 0;
    P p = (P)view.buf + a, stop = (P)view.buf + b;
    while (p < stop) {
        int kind = OTHER;
        Line ln;
        int d = -1;
        long conn = -1;
        int head = 0; /* a native record of a known type: its top level read, whatever its kind */
        int valid = scan_line(p, stop, &ln);
        P end = valid ? ln.end : memchr(p, '\n', stop - p);
        if (end == NULL)
            end = stop;
        if (valid && (d = dir_index(&ln.dir)) >= 0 && (conn = conn_value(&ln.conn)) > 0) {
            long bits;
            if (last_type_n == ln.type.n && memcmp(last_type, ln.type.s, ln.type.n) == 0) {
                bits = last_bits;
                head = last_known;
            } else {
                PyObject *key = PyBytes_FromStringAndSize((const char *)ln.type.s, ln.type.n);
                if (key == NULL)
                    goto fail;
                PyObject *v = PyDict_GetItemWithError(table, key);
                Py_DECREF(key);
                if (v == NULL && PyErr_Occurred())
                    goto fail;
                bits = v != NULL ? PyLong_AsLong(v) : 0;
                if (bits == -1 && PyErr_Occurred())
                    goto fail;
                head = v != NULL;
                last_type = ln.type.s;
                last_type_n = ln.type.n;
                last_bits = bits;
                last_known = head;
            }
            if (conn == keep)
                bits = 0; /* every line of the connection to keep goes to the fold whole */
            if (bits & (1L << d))
                kind = QUIET;
            else if ((bits & (16L << d)) && ln.has_item == 1 && !ln.item.esc && ln.has_delta == 1 && !ln.delta.esc &&
                     ln.delta.ascii && !ln.has_counted)
                kind = AUDIO;
            if (kind != OTHER && conn != known) {
                /* The first record of a connection goes to the fold whole (it may open the connection): the full
                   parse yields it (the line is valid), and the reader's `seen` then holds it. */
                PyObject *c = PyLong_FromLong(conn);
                if (c == NULL)
                    goto fail;
                int found = PySet_Contains(seen, c);
                if (found == 0 && PySet_Add(seen, c) < 0)
                    found = -1;
                Py_DECREF(c);
                if (found < 0)
                    goto fail;
                if (!found)
                    kind = OTHER;
                else
                    known = conn;
            }
        }
        if (kind == OTHER && heads && head) {
            PyObject *entry = PyTuple_New(4);
            if (entry != NULL) {
                PyTuple_SET_ITEM(entry, 0, PyBytes_FromStringAndSize((const char *)ln.event, ln.event_end - ln.event));
                PyTuple_SET_ITEM(entry, 1, float_of(&ln.t));
                PyTuple_SET_ITEM(entry, 2, PyLong_FromLong(conn));
                PyTuple_SET_ITEM(entry, 3, PyLong_FromLong(d));
                for (int k = 0; k < 4; k++)
                    if (PyTuple_GET_ITEM(entry, k) == NULL)
                        Py_CLEAR(entry);
            }
            if (entry == NULL || flush(&run, out) < 0 || PyList_Append(out, entry) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
        } else if (kind == OTHER) {
            PyObject *line = PyBytes_FromStringAndSize((const char *)p, end - p);
            if (line == NULL || flush(&run, out) < 0 || PyList_Append(out, line) < 0) {
                Py_XDECREF(line);
                goto fail;
            }
            Py_DECREF(line);
        } else {
            int same = run.kind == kind && run.dir == d && run.conn == conn;
            if (same && kind == AUDIO)
                same = run.item_n == ln.item.n && memcmp(run.item, ln.item.s, ln.item.n) == 0;
            if (!same) {
                if (flush(&run, out) < 0)
                    goto fail;
                run.kind = kind;
                run.count = 0;
                run.dir = d;
                run.conn = conn;
                if (kind == AUDIO) {
                    run.item = ln.item.s;
                    run.item_n = ln.item.n;
                    run.bytes = 0;
                }
                if (kind == AUDIO || detail) {
                    run.times = PyList_New(0);
                    run.sizes = PyList_New(0);
                    if (run.times == NULL || run.sizes == NULL)
                        goto fail;
                }
            }
            run.count++;
            run.t = ln.t;
            if (kind == QUIET && detail) {
                if (type_n != ln.type.n || memcmp(type_s, ln.type.s, ln.type.n) != 0) {
                    Py_XDECREF(type_str);
                    type_str = PyUnicode_DecodeUTF8((const char *)ln.type.s, ln.type.n, NULL);
                    if (type_str == NULL)
                        goto fail;
                    type_s = ln.type.s;
                    type_n = ln.type.n;
                }
                PyObject *t = float_of(&ln.t);
                int rc = t ? PyList_Append(run.times, t) | PyList_Append(run.sizes, type_str) : -1;
                Py_XDECREF(t);
                if (rc < 0)
                    goto fail;
            }
            if (kind == AUDIO) {
                long long size = audio_bytes(&ln.delta);
                PyObject *t = float_of(&ln.t), *s = PyLong_FromLongLong(size);
                int rc = t && s ? PyList_Append(run.times, t) | PyList_Append(run.sizes, s) : -1;
                Py_XDECREF(t);
                Py_XDECREF(s);
                if (rc < 0)
                    goto fail;
                run.bytes += size;
            }
        }
        p = end < stop ? end + 1 : stop;
    }
    if (flush(&run, out) < 0)
        goto fail;
    Py_XDECREF(type_str);
    PyBuffer_Release(&view);
    return out;
fail:
    Py_XDECREF(type_str);
    Py_XDECREF(run.times);
    Py_XDECREF(run.sizes);
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* -- the secret screen ---------------------------------------------------------------------------------------- */

#define MAX_HINTS 64
#define MAX_HINT_LEN 32

static unsigned char hint_words[MAX_HINTS][MAX_HINT_LEN];
static Py_ssize_t hint_lens[MAX_HINTS];
static int n_hints = -1; /* -1: set_hints not called yet */
/* For each byte, the first of the words (in order) that start with it, and how many in a row do (sorted words). */
static unsigned char hint_first[256];
static unsigned char hint_count[256];

static inline unsigned char lower_ascii(unsigned char c) { return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c; }

static inline int lower_hex(unsigned char c) {
    c = lower_ascii(c);
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static PyObject *set_hints(PyObject *self, PyObject *words) {
    if (!PyTuple_Check(words) || PyTuple_GET_SIZE(words) > MAX_HINTS) {
        PyErr_SetString(PyExc_TypeError, "set_hints takes a tuple of at most 64 bytes objects, sorted");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(words);
    memset(hint_count, 0, sizeof hint_count);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *w = PyTuple_GET_ITEM(words, k);
        if (!PyBytes_Check(w) || PyBytes_GET_SIZE(w) < 1 || PyBytes_GET_SIZE(w) > MAX_HINT_LEN) {
            PyErr_SetString(PyExc_TypeError, "a hint word is bytes of 1 to 32 lower-case ASCII characters");
            n_hints = -1;
            return NULL;
        }
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(w);
        Py_ssize_t len = PyBytes_GET_SIZE(w);
        for (Py_ssize_t i = 0; i < len; i++) {
            if (b[i] >= 0x80 || lower_ascii(b[i]) != b[i]) {
                PyErr_SetString(PyExc_TypeError, "a hint word is lower-case ASCII");
                n_hints = -1;
                return NULL;
            }
        }
        if (k > 0 && hint_words[k - 1][0] > b[0]) {
            PyErr_SetString(PyExc_TypeError, "the hint words are sorted");
            n_hints = -1;
            return NULL;
        }
        memcpy(hint_words[k], b, (size_t)len);
        hint_lens[k] = len;
        if (hint_count[b[0]]++ == 0)
            hint_first[b[0]] = (unsigned char)k;
    }
    n_hints = (int)n;
    Py_RETURN_NONE;
}

static PyObject *hinted(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "hinted takes a str");
        return NULL;
    }
    if (n_hints < 0 || !PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    P s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = lower_ascii(s[i]);
        if (c == '%' && i + 2 < n && lower_hex(s[i + 1]) && lower_hex(s[i + 2]))
            Py_RETURN_TRUE;
        int count = hint_count[c];
        for (int k = hint_first[c]; count > 0; k++, count--) {
            Py_ssize_t len = hint_lens[k];
            if (i + len > n)
                continue;
            Py_ssize_t j = 1;
            while (j < len && lower_ascii(s[i + j]) == hint_words[k][j])
                j++;
            if (j == len)
                Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

/* lines(buffer, start, end): how many newlines buffer[start:end] holds, as `bytes.count(b"\n", start, end)` says, by
   `memchr` from one to the next (the reader numbers a block's lines before the scanner reads them: `bytes.count`
   walked them a byte at a time, a third of the reading of an audio call; an SSE2 count of 16 bytes a step measured
   no faster than libc's `memchr`, on short lines and long). */
static PyObject *lines(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &a, &b))
        return NULL;
    if (a < 0 || b > view.len || a > b) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "region out of the buffer");
        return NULL;
    }
    P p = (P)view.buf + a, stop = (P)view.buf + b;
    Py_ssize_t n = 0;
    while (p < stop) {
        P nl = memchr(p, '\n', stop - p);
        if (nl == NULL)
            break;
        n++;
        p = nl + 1;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}

static PyMethodDef methods[] = {
    {"lines", lines, METH_VARARGS,
     "lines(buffer, start, end) -> int: the newlines in buffer[start:end] (bytes.count(b'\\n', start, end))."},
    {"set_hints", set_hints, METH_O,
     "set_hints(words) -> None: the hint words `hinted` looks for (a sorted tuple of lower-case ASCII bytes)."},
    {"hinted", hinted, METH_O,
     "hinted(text) -> bool | None: whether the ASCII text, lower-cased, holds a hint word or %xx (None: not ASCII, or "
     "no words set)."},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, start, end, table, seen, keep=0, detail=False, heads=False) -> list: the lines of buffer[start:end] a full parse would only "
     "count, as runs, and the others as bytes (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
