/*
 * tensorboard.c — a TensorBoard event-file writer (scalars and text), no protobuf library.
 *
 * File format: a sequence of TFRecords, each
 *     u64 length (little-endian) | u32 masked crc32c(length bytes) | data | u32 masked crc32c(data)
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Each record's data is a serialized
 * tensorflow.Event (tensorflow/core/util/event.proto, tensorboard/compat/proto/event.proto):
 *     Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
 *               Summary summary = 5; }
 *     Summary { repeated Value value = 1; }
 *     Value   { string tag = 1; float simple_value = 2; TensorProto tensor = 8;
 *               SummaryMetadata metadata = 9; }
 *     SummaryMetadata { PluginData plugin_data = 1; }   PluginData { string plugin_name = 1; }
 *     TensorProto { DataType dtype = 1 (DT_STRING = 7); TensorShapeProto tensor_shape = 2;
 *                   repeated bytes string_val = 8; }
 * The first record carries file_version "brain.Event:2" (what TensorBoard's writers emit);
 * scalars use simple_value, text a scalar string tensor tagged with the "text" plugin.
 *
 * Protobuf wire encoding used here: a key is the varint (field << 3 | wire type); wire type 0
 * is a varint, 1 a little-endian 64-bit value, 2 a varint length then the bytes (strings and
 * nested messages), 5 a little-endian 32-bit value. Nested messages are encoded into their own
 * buffer first, then appended with their length.
 *
 * Buffering: records accumulate in memory and are written with write(2) on flush, on close and
 * whenever more than TB_FLUSH_BYTES are pending. After a failed write the file's tail is
 * unknown, so the writer refuses every later record.
 */
#include "dtrain/trialio.h"
#include "base/base_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tensorboard.c assumes little-endian");

#define TB_FLUSH_BYTES (64u << 10)
#define TB_FILE_VERSION "brain.Event:2"

/* ---- a growable byte buffer; `oom` is sticky so encoders check once at the end ---- */

typedef struct pbuf {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} pbuf;

static void pb_reserve(pbuf *b, size_t extra) {
    if (b->oom || b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void pb_bytes(pbuf *b, const void *data, size_t n) {
    pb_reserve(b, n);
    if (b->oom || n == 0) return;
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void pb_varint(pbuf *b, uint64_t v) {
    unsigned char tmp[10];
    int k = 0;
    do {
        unsigned char byte = v & 0x7f;
        v >>= 7;
        tmp[k++] = byte | (v ? 0x80 : 0);
    } while (v);
    pb_bytes(b, tmp, (size_t)k);
}

static void pb_key(pbuf *b, int field, int wire) {
    pb_varint(b, ((uint64_t)field << 3) | wire);
}

static void pb_le(pbuf *b, uint64_t v, int nbytes) {
    unsigned char tmp[8];
    for (int i = 0; i < nbytes; i++) tmp[i] = (unsigned char)(v >> (8 * i));
    pb_bytes(b, tmp, (size_t)nbytes);
}

static void pb_double(pbuf *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    pb_key(b, field, 1);
    pb_le(b, u, 8);
}

static void pb_float(pbuf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    pb_key(b, field, 5);
    pb_le(b, u, 4);
}

/* int64 fields are varints of the two's-complement value (negative numbers take 10 bytes). */
static void pb_int64(pbuf *b, int field, int64_t v) {
    pb_key(b, field, 0);
    pb_varint(b, (uint64_t)v);
}

static void pb_lenfield(pbuf *b, int field, const void *data, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    pb_bytes(b, data, n);
}

/* Append the nested message `m` as field `field` of b; m is emptied for reuse. */
static void pb_message(pbuf *b, int field, pbuf *m) {
    if (m->oom) b->oom = true;
    pb_lenfield(b, field, m->p, m->n);
    m->n = 0;
}

static void pb_free(pbuf *b) {
    free(b->p);
    *b = (pbuf){0};
}

/* ---- the writer ---- */

struct dt_tb_writer {
    char *path;
    int fd;
    pbuf pending; /* framed records not yet written */
    bool failed;  /* a write failed: the file's tail is unknown */
};

static uint32_t masked_crc(const void *data, size_t n) {
    uint32_t c = dt_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static double wall_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static dt_status write_all(dt_tb_writer *w, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return dt_error(DT_ERR_IO, "%s: write failed: %s; hint: is the disk full?", w->path,
                            strerror(errno));
        p += r;
        n -= (size_t)r;
    }
    return DT_OK;
}

dt_status dt_tb_flush(dt_tb_writer *w) {
    if (!w) return dt_error(DT_ERR_INVALID, "tb_flush: NULL writer");
    if (w->failed)
        return dt_error(DT_ERR_IO, "%s: an earlier write failed; the writer no longer writes",
                        w->path);
    if (w->pending.n == 0) return DT_OK;
    dt_status st = write_all(w, w->pending.p, w->pending.n);
    w->pending.n = 0;
    if (st != DT_OK) w->failed = true;
    return st;
}

/* Frame the serialized event `ev` as one TFRecord into the pending buffer. */
static dt_status append_record(dt_tb_writer *w, const pbuf *ev) {
    if (w->failed)
        return dt_error(DT_ERR_IO, "%s: an earlier write failed; the writer no longer writes",
                        w->path);
    if (ev->oom) return dt_error(DT_ERR_OOM, "%s: encoding an event", w->path);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)ev->n >> (8 * i));
    size_t before = w->pending.n;
    pb_bytes(&w->pending, len, 8);
    pb_le(&w->pending, masked_crc(len, 8), 4);
    pb_bytes(&w->pending, ev->p, ev->n);
    pb_le(&w->pending, masked_crc(ev->p, ev->n), 4);
    if (w->pending.oom) {
        w->pending.oom = false; /* the buffer itself is intact: drop this record only */
        w->pending.n = before;
        return dt_error(DT_ERR_OOM, "%s: buffering an event", w->path);
    }
    return w->pending.n > TB_FLUSH_BYTES ? dt_tb_flush(w) : DT_OK;
}

dt_tb_writer *dt_tb_open(const char *logdir) {
    if (!logdir || !*logdir) {
        dt_error(DT_ERR_INVALID, "tb_open: empty log directory");
        return NULL;
    }
    char failed[4096];
    int err = dt__mkdir_p(logdir, failed, sizeof failed);
    if (err) {
        dt_error(DT_ERR_IO, "%s: %s; hint: choose a log directory on a writable path (%s)", failed,
                 err == ENOTDIR ? "exists and is not a directory" : strerror(err), logdir);
        return NULL;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    dt_tb_writer *w = calloc(1, sizeof *w);
    size_t plen = strlen(logdir) + strlen(host) + 96;
    char *path = malloc(plen);
    if (!w || !path) {
        free(w);
        free(path);
        dt_error(DT_ERR_OOM, "tb_open: %s", logdir);
        return NULL;
    }
    long secs = (long)time(NULL), pid = (long)getpid();
    int fd = -1;
    for (int k = 0; k < 1000 && fd < 0; k++) {
        int m = k == 0 ? snprintf(path, plen, "%s/events.out.tfevents.%ld.%s.%ld", logdir, secs,
                                  host, pid)
                       : snprintf(path, plen, "%s/events.out.tfevents.%ld.%s.%ld.%d", logdir, secs,
                                  host, pid, k);
        (void)m;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        dt_error(DT_ERR_IO,
                 "%s: cannot create the event file: %s; hint: check that %s is "
                 "writable",
                 path, strerror(errno), logdir);
        free(path);
        free(w);
        return NULL;
    }
    w->path = path;
    w->fd = fd;
    pbuf ev = {0};
    pb_double(&ev, 1, wall_time_now());
    pb_lenfield(&ev, 3, TB_FILE_VERSION, strlen(TB_FILE_VERSION));
    dt_status st = append_record(w, &ev);
    pb_free(&ev);
    if (st == DT_OK) st = dt_tb_flush(w); /* the file is recognisable from the start */
    if (st != DT_OK) {
        DT_KEEP_ERROR({
            unlink(w->path);
            dt_tb_close(w);
        });
        return NULL;
    }
    return w;
}

const char *dt_tb_path(const dt_tb_writer *w) {
    return w ? w->path : NULL;
}

/* Summary.Value { tag, simple_value } into v. */
static void encode_scalar_value(pbuf *v, const char *tag, float value) {
    pb_lenfield(v, 1, tag, strlen(tag));
    pb_float(v, 2, value);
}

/* One event at `step` with the summary values already encoded in `summary`. */
static dt_status add_summary_event(dt_tb_writer *w, pbuf *summary, int64_t step) {
    pbuf ev = {0};
    pb_double(&ev, 1, wall_time_now());
    pb_int64(&ev, 2, step);
    pb_message(&ev, 5, summary);
    dt_status st = append_record(w, &ev);
    pb_free(&ev);
    return st;
}

dt_status dt_tb_add_scalars(dt_tb_writer *w, int n, const char *const *tags, const float *values,
                            int64_t step) {
    if (!w || n < 0 || (n > 0 && (!tags || !values)))
        return dt_error(DT_ERR_INVALID, "tb_add_scalars: bad arguments (n %d)", n);
    for (int i = 0; i < n; i++)
        if (!tags[i] || !*tags[i])
            return dt_error(DT_ERR_INVALID, "%s: scalar %d has an empty tag", w->path, i);
    if (n == 0) return DT_OK;
    pbuf summary = {0}, value = {0};
    for (int i = 0; i < n; i++) {
        encode_scalar_value(&value, tags[i], values[i]);
        pb_message(&summary, 1, &value);
    }
    dt_status st = add_summary_event(w, &summary, step);
    pb_free(&summary);
    pb_free(&value);
    return st;
}

dt_status dt_tb_add_scalar(dt_tb_writer *w, const char *tag, float value, int64_t step) {
    return dt_tb_add_scalars(w, 1, &tag, &value, step);
}

dt_status dt_tb_add_text(dt_tb_writer *w, const char *tag, const char *text, int64_t step) {
    if (!w || !tag || !*tag || !text)
        return dt_error(DT_ERR_INVALID, "tb_add_text: bad arguments (empty tag or NULL text)");
    pbuf plugin = {0}, meta = {0}, shape = {0}, tensor = {0}, value = {0}, summary = {0};
    pb_lenfield(&plugin, 1, "text", 4); /* PluginData.plugin_name */
    pb_message(&meta, 1, &plugin);      /* SummaryMetadata.plugin_data */
    pb_key(&tensor, 1, 0);              /* TensorProto.dtype = DT_STRING */
    pb_varint(&tensor, 7);
    pb_message(&tensor, 2, &shape); /* tensor_shape: a scalar (no dims) */
    pb_lenfield(&tensor, 8, text, strlen(text));
    pb_lenfield(&value, 1, tag, strlen(tag));
    pb_message(&value, 8, &tensor);
    pb_message(&value, 9, &meta);
    pb_message(&summary, 1, &value);
    dt_status st = add_summary_event(w, &summary, step);
    pb_free(&plugin);
    pb_free(&meta);
    pb_free(&shape);
    pb_free(&tensor);
    pb_free(&value);
    pb_free(&summary);
    return st;
}

dt_status dt_tb_close(dt_tb_writer *w) {
    if (!w) return DT_OK;
    dt_status st = w->failed ? DT_OK : dt_tb_flush(w);
    if (close(w->fd) != 0 && st == DT_OK)
        st = dt_error(DT_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
    pb_free(&w->pending);
    free(w->path);
    free(w);
    return st;
}
