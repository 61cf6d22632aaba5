/* A fake libnvidia-ml.so.1 for rgt's health tests, loaded by the REAL nvidia-ml-py (pynvml).
 *
 * State comes from the JSON file named by $FAKE_NVML_STATE, re-read whenever its inode, size
 * or mtime changes, so a test edits the file and the next NVML call sees the new world:
 *
 *   {"driver_version": "550.54.15", "cuda_version": 12040,
 *    "errors": {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"},          (global error injection)
 *    "gpus": [{"name": ..., "uuid": ..., "pci_bus_id": "00000000:3B:00.0",
 *              "util_gpu": 97, "util_memory": 40, "memory_total": 85899345920,
 *              "memory_used": 1e9, "temperature": 65, "power_mw": 300000, "sm_clock": 1410,
 *              "sm_clock_max": 1410, "clocks_event_reasons": 0, "ecc_uncorrected": 0,
 *              "remapped": [0, 0, 0, 0], "processes": [{"pid": 1, "used_memory": 1e9}],
 *              "errors": {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED", "*": "GPU_IS_LOST"}}],
 *    "events": [{"gpu": 0, "xid": 79}]}                               (queue for nvmlEventSetWait)
 *
 * "processes" are what nvmlDeviceGetComputeRunningProcesses reports (pid, used GPU memory): a
 * test puts a real pid there (a stage's, or a `sleep` standing for another tenant) or one no
 * /proc lists (another container's). An event carries what nvmlEventData_t carries: the GPU and
 * the Xid in eventData; NVML has no pid for it (the kernel log line has: tests write those
 * through /dev/kmsg or a file named by RGT_KMSG_PATH).
 *
 * A field that is absent or null answers NVML_ERROR_NOT_SUPPORTED. Only the symbols rgt's
 * sampler calls are exported (pynvml looks functions up lazily), plus fakeNvmlCallCount(name)
 * so tests can assert that handles are opened once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
enum { OK = 0, E_UNINIT = 1, E_INVALID = 2, E_NOT_SUPPORTED = 3, E_NO_PERMISSION = 4,
       E_NOT_FOUND = 6, E_INSUFFICIENT_SIZE = 7, E_DRIVER_NOT_LOADED = 9, E_TIMEOUT = 10,
       E_GPU_IS_LOST = 15, E_UNKNOWN = 999 };
#define MAX_GPUS 64

/* ---------- a tiny JSON reader ---------- */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jval { jtype t; double n; char *s; int len; struct jval **items; char **keys; } jval;
typedef struct { const char *p; const char *end; int err; } jparser;

static void jfree(jval *v) {
    if (!v) return;
    for (int i = 0; i < v->len; i++) { jfree(v->items[i]); if (v->keys) free(v->keys[i]); }
    free(v->items); free(v->keys); free(v->s); free(v);
}
static void jws(jparser *ps) { while (ps->p < ps->end && strchr(" \t\r\n", *ps->p)) ps->p++; }
static jval *jnew(jtype t) { jval *v = calloc(1, sizeof(jval)); v->t = t; return v; }
static jval *jparse(jparser *ps);

static char *jstring(jparser *ps) {
    if (ps->p >= ps->end || *ps->p != '"') { ps->err = 1; return NULL; }
    ps->p++;
    size_t cap = 64, n = 0; char *out = malloc(cap);
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\' && ps->p < ps->end) {
            char e = *ps->p++;
            c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            if (e == 'u') { c = '?'; ps->p += (ps->end - ps->p >= 4) ? 4 : 0; }
        }
        if (n + 2 > cap) { cap *= 2; out = realloc(out, cap); }
        out[n++] = c;
    }
    if (ps->p >= ps->end) { ps->err = 1; free(out); return NULL; }
    ps->p++;
    out[n] = 0;
    return out;
}

static void jpush(jval *v, jval *item, char *key) {
    v->items = realloc(v->items, sizeof(jval *) * (v->len + 1));
    if (v->t == J_OBJ) { v->keys = realloc(v->keys, sizeof(char *) * (v->len + 1)); v->keys[v->len] = key; }
    v->items[v->len++] = item;
}

static jval *jcontainer(jparser *ps, jtype t, char close) {
    jval *v = jnew(t);
    ps->p++;
    jws(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return v; }
    while (!ps->err) {
        char *key = NULL;
        jws(ps);
        if (t == J_OBJ) {
            key = jstring(ps);
            jws(ps);
            if (ps->err || ps->p >= ps->end || *ps->p != ':') { ps->err = 1; free(key); break; }
            ps->p++;
        }
        jval *item = jparse(ps);
        if (!item) { free(key); ps->err = 1; break; }
        jpush(v, item, key);
        jws(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return v; }
        ps->err = 1;
    }
    jfree(v);
    return NULL;
}

static jval *jparse(jparser *ps) {
    jws(ps);
    if (ps->p >= ps->end) { ps->err = 1; return NULL; }
    char c = *ps->p;
    if (c == '{') return jcontainer(ps, J_OBJ, '}');
    if (c == '[') return jcontainer(ps, J_ARR, ']');
    if (c == '"') { char *s = jstring(ps); if (!s) return NULL; jval *v = jnew(J_STR); v->s = s; return v; }
    if (!strncmp(ps->p, "null", 4)) { ps->p += 4; return jnew(J_NULL); }
    if (!strncmp(ps->p, "true", 4)) { ps->p += 4; jval *v = jnew(J_BOOL); v->n = 1; return v; }
    if (!strncmp(ps->p, "false", 5)) { ps->p += 5; return jnew(J_BOOL); }
    char *endp;
    double d = strtod(ps->p, &endp);
    if (endp == ps->p) { ps->err = 1; return NULL; }
    ps->p = endp;
    jval *v = jnew(J_NUM); v->n = d;
    return v;
}

static jval *jget(jval *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    for (int i = 0; i < o->len; i++) if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}
static jval *jat(jval *a, int i) { return (a && a->t == J_ARR && i >= 0 && i < a->len) ? a->items[i] : NULL; }
static int jlen(jval *a) { return (a && a->t == J_ARR) ? a->len : 0; }
static int jnum(jval *o, const char *key, double *out) {
    jval *v = jget(o, key);
    if (!v || (v->t != J_NUM && v->t != J_BOOL)) return 0;
    *out = v->n;
    return 1;
}

/* ---------- state: re-read on change ---------- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static jval *root;
static char cur_path[4096];
static struct stat cur_st;
static unsigned long generation;   /* bumps whenever the state file is re-read from a new path */
static int initialized;
struct fake_device { int index; };
static struct fake_device devices[MAX_GPUS];

static const char *call_names[64];
static unsigned long call_counts[64];

static void count_call(const char *name) {
    for (int i = 0; i < 64; i++) {
        if (call_names[i] == name || (call_names[i] && !strcmp(call_names[i], name))) { call_counts[i]++; return; }
        if (!call_names[i]) { call_names[i] = name; call_counts[i] = 1; return; }
    }
}

EXPORT unsigned long fakeNvmlCallCount(const char *name) {
    unsigned long n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 64 && call_names[i]; i++) if (!strcmp(call_names[i], name)) n = call_counts[i];
    pthread_mutex_unlock(&mu);
    return n;
}

static void load_state(void) {  /* caller holds mu */
    const char *path = getenv("FAKE_NVML_STATE");
    struct stat st;
    if (!path || stat(path, &st) != 0) { jfree(root); root = NULL; cur_path[0] = 0; return; }
    if (root && !strcmp(path, cur_path) && st.st_ino == cur_st.st_ino && st.st_size == cur_st.st_size &&
        st.st_mtim.tv_sec == cur_st.st_mtim.tv_sec && st.st_mtim.tv_nsec == cur_st.st_mtim.tv_nsec)
        return;
    FILE *fh = fopen(path, "rb");
    if (!fh) return;
    char *buf = malloc(st.st_size + 1);
    size_t n = fread(buf, 1, st.st_size, fh);
    fclose(fh);
    jparser ps = { buf, buf + n, 0 };
    jval *v = jparse(&ps);
    free(buf);
    if (!v || ps.err) { jfree(v); return; }  /* half-written file: keep the previous state */
    jfree(root);
    root = v;
    if (strcmp(path, cur_path)) generation++;
    snprintf(cur_path, sizeof cur_path, "%s", path);
    cur_st = st;
}

static int error_code(const char *name) {
    static const struct { const char *n; int c; } tbl[] = {
        {"UNINITIALIZED", 1}, {"INVALID_ARGUMENT", 2}, {"NOT_SUPPORTED", 3}, {"NO_PERMISSION", 4},
        {"NOT_FOUND", 6}, {"INSUFFICIENT_SIZE", 7}, {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10},
        {"IRQ_ISSUE", 11}, {"LIBRARY_NOT_FOUND", 12}, {"FUNCTION_NOT_FOUND", 13},
        {"CORRUPTED_INFOROM", 14}, {"GPU_IS_LOST", 15}, {"RESET_REQUIRED", 16}, {"UNKNOWN", 999}};
    for (size_t i = 0; i < sizeof tbl / sizeof tbl[0]; i++) if (!strcmp(tbl[i].n, name)) return tbl[i].c;
    return E_UNKNOWN;
}

static int injected(jval *errors, const char *fn) {
    jval *e = jget(errors, fn);
    if (!e) e = jget(errors, "*");
    return (e && e->t == J_STR) ? error_code(e->s) : OK;
}

/* Enter an API call: lock, count, refresh state, apply global error injection. */
static int enter(const char *fn, int need_init) {
    pthread_mutex_lock(&mu);
    count_call(fn);
    load_state();
    jval *errs = jget(root, "errors");
    jval *e = jget(errs, fn);
    if (e && e->t == J_STR) return error_code(e->s);
    if (need_init && !initialized) return E_UNINIT;
    return OK;
}
#define LEAVE(rc) do { int _rc = (rc); pthread_mutex_unlock(&mu); return _rc; } while (0)

/* Enter a per-device call: also resolves the handle and the GPU's own injected errors. */
static int enter_dev(const char *fn, void *dev, jval **gpu) {
    int rc = enter(fn, 1);
    if (rc) return rc;
    struct fake_device *d = dev;
    if (!d || d < devices || d >= devices + MAX_GPUS) return E_INVALID;
    *gpu = jat(jget(root, "gpus"), d->index);
    if (!*gpu) return E_INVALID;
    return injected(jget(*gpu, "errors"), fn);
}

/* ---------- the NVML API ---------- */
EXPORT int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    int rc = enter("nvmlInitWithFlags", 0);
    if (rc) LEAVE(rc);
    if (!root) LEAVE(E_DRIVER_NOT_LOADED);
    initialized++;
    LEAVE(OK);
}

EXPORT int nvmlShutdown(void) {
    int rc = enter("nvmlShutdown", 1);
    if (rc) LEAVE(rc);
    initialized--;
    LEAVE(OK);
}

EXPORT const char *nvmlErrorString(int result) {
    switch (result) {
    case OK: return "Success";
    case E_UNINIT: return "Uninitialized";
    case E_NOT_SUPPORTED: return "Not Supported";
    case E_GPU_IS_LOST: return "GPU is lost";
    case E_TIMEOUT: return "Timeout";
    case E_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

static int copy_str(jval *o, const char *key, char *buf, unsigned int len) {
    jval *v = jget(o, key);
    if (!v || v->t != J_STR) return E_NOT_SUPPORTED;
    if (strlen(v->s) + 1 > len) return E_INSUFFICIENT_SIZE;
    strcpy(buf, v->s);
    return OK;
}

EXPORT int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    int rc = enter("nvmlSystemGetDriverVersion", 1);
    if (rc) LEAVE(rc);
    LEAVE(copy_str(root, "driver_version", version, length));
}

EXPORT int nvmlSystemGetCudaDriverVersion(int *version) {
    int rc = enter("nvmlSystemGetCudaDriverVersion", 1);
    double d;
    if (rc) LEAVE(rc);
    if (!jnum(root, "cuda_version", &d)) LEAVE(E_NOT_SUPPORTED);
    *version = (int)d;
    LEAVE(OK);
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *count) {
    int rc = enter("nvmlDeviceGetCount_v2", 1);
    if (rc) LEAVE(rc);
    int n = jlen(jget(root, "gpus"));
    *count = n > MAX_GPUS ? MAX_GPUS : n;
    LEAVE(OK);
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
    int rc = enter("nvmlDeviceGetHandleByIndex_v2", 1);
    if (rc) LEAVE(rc);
    jval *gpu = jat(jget(root, "gpus"), (int)index);
    if (!gpu || index >= MAX_GPUS) LEAVE(E_INVALID);
    rc = injected(jget(gpu, "errors"), "nvmlDeviceGetHandleByIndex_v2");
    if (rc) LEAVE(rc);
    devices[index].index = (int)index;
    *device = &devices[index];
    LEAVE(OK);
}

EXPORT int nvmlDeviceGetName(void *dev, char *name, unsigned int length) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceGetName", dev, &g);
    if (rc) LEAVE(rc);
    LEAVE(copy_str(g, "name", name, length));
}

EXPORT int nvmlDeviceGetUUID(void *dev, char *uuid, unsigned int length) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceGetUUID", dev, &g);
    if (rc) LEAVE(rc);
    LEAVE(copy_str(g, "uuid", uuid, length));
}

typedef struct {
    char busIdLegacy[16]; unsigned int domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32];
} pci_info_t;

EXPORT int nvmlDeviceGetPciInfo_v3(void *dev, pci_info_t *pci) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceGetPciInfo_v3", dev, &g);
    if (rc) LEAVE(rc);
    memset(pci, 0, sizeof *pci);
    rc = copy_str(g, "pci_bus_id", pci->busId, sizeof pci->busId);
    if (!rc) sscanf(pci->busId, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    LEAVE(rc);
}

/* Returns with mu held (callers LEAVE); *gpu_out gets the GPU's JSON object when asked. */
static int num_out2(const char *fn, void *dev, const char *key, double *d, jval **gpu_out) {
    jval *g = NULL;
    int rc = enter_dev(fn, dev, &g);
    if (gpu_out) *gpu_out = g;
    if (rc) return rc;
    return jnum(g, key, d) ? OK : E_NOT_SUPPORTED;
}
#define num_out(fn, dev, key, d) num_out2(fn, dev, key, d, NULL)

EXPORT int nvmlDeviceGetMaxClockInfo(void *dev, int type, unsigned int *clock) {
    double d;
    int rc = num_out("nvmlDeviceGetMaxClockInfo", dev, type == 1 ? "sm_clock_max" : "other_clock_max", &d);
    if (!rc) *clock = (unsigned int)d;
    LEAVE(rc);
}

EXPORT int nvmlDeviceGetClockInfo(void *dev, int type, unsigned int *clock) {
    double d;
    int rc = num_out("nvmlDeviceGetClockInfo", dev, type == 1 ? "sm_clock" : "other_clock", &d);
    if (!rc) *clock = (unsigned int)d;
    LEAVE(rc);
}

typedef struct { unsigned int gpu, memory; } util_t;
EXPORT int nvmlDeviceGetUtilizationRates(void *dev, util_t *u) {
    double a, b = 0;
    jval *g = NULL;
    int rc = num_out2("nvmlDeviceGetUtilizationRates", dev, "util_gpu", &a, &g);
    if (!rc) {
        jnum(g, "util_memory", &b);
        u->gpu = (unsigned int)a;
        u->memory = (unsigned int)b;
    }
    LEAVE(rc);
}

typedef struct { unsigned long long total, free, used; } memory_t;
EXPORT int nvmlDeviceGetMemoryInfo(void *dev, memory_t *m) {
    jval *g = NULL;
    double total, used;
    int rc = enter_dev("nvmlDeviceGetMemoryInfo", dev, &g);
    if (rc) LEAVE(rc);
    if (!jnum(g, "memory_total", &total) || !jnum(g, "memory_used", &used)) LEAVE(E_NOT_SUPPORTED);
    m->total = (unsigned long long)total;
    m->used = (unsigned long long)used;
    m->free = m->total > m->used ? m->total - m->used : 0;
    LEAVE(OK);
}

EXPORT int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned int *temp) {
    double d;
    int rc = num_out("nvmlDeviceGetTemperature", dev, sensor == 0 ? "temperature" : "other_temperature", &d);
    if (!rc) *temp = (unsigned int)d;
    LEAVE(rc);
}

EXPORT int nvmlDeviceGetPowerUsage(void *dev, unsigned int *mw) {
    double d;
    int rc = num_out("nvmlDeviceGetPowerUsage", dev, "power_mw", &d);
    if (!rc) *mw = (unsigned int)d;
    LEAVE(rc);
}

EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void *dev, unsigned long long *reasons) {
    double d;
    int rc = num_out("nvmlDeviceGetCurrentClocksEventReasons", dev, "clocks_event_reasons", &d);
    if (!rc) *reasons = (unsigned long long)d;
    LEAVE(rc);
}

EXPORT int nvmlDeviceGetTotalEccErrors(void *dev, int error_type, int counter_type, unsigned long long *count) {
    double d;
    const char *key = (error_type == 1 && counter_type == 0) ? "ecc_uncorrected" : "ecc_other";
    int rc = num_out("nvmlDeviceGetTotalEccErrors", dev, key, &d);
    if (!rc) *count = (unsigned long long)d;
    LEAVE(rc);
}

EXPORT int nvmlDeviceGetRemappedRows(void *dev, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                                     unsigned int *failure) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceGetRemappedRows", dev, &g);
    if (rc) LEAVE(rc);
    jval *r = jget(g, "remapped");
    if (jlen(r) != 4) LEAVE(E_NOT_SUPPORTED);
    *corr = (unsigned int)r->items[0]->n;
    *unc = (unsigned int)r->items[1]->n;
    *pending = (unsigned int)r->items[2]->n;
    *failure = (unsigned int)r->items[3]->n;
    LEAVE(OK);
}

typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } proc_t;
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, proc_t *infos) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceGetComputeRunningProcesses_v3", dev, &g);
    if (rc) LEAVE(rc);
    jval *procs = jget(g, "processes");
    unsigned int n = (unsigned int)jlen(procs);
    if (n == 0) { *count = 0; LEAVE(OK); }
    if (!infos || *count < n) { *count = n; LEAVE(E_INSUFFICIENT_SIZE); }
    for (unsigned int i = 0; i < n; i++) {
        double pid = 0, mem = 0;
        jnum(procs->items[i], "pid", &pid);
        jnum(procs->items[i], "used_memory", &mem);
        infos[i].pid = (unsigned int)pid;
        infos[i].usedGpuMemory = (unsigned long long)mem;
        infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFF;
    }
    *count = n;
    LEAVE(OK);
}

/* ---------- events: a queue in the state file, consumed per event set ---------- */
struct fake_eventset { unsigned long long mask[MAX_GPUS]; int consumed; unsigned long generation; };
typedef struct { void *device; unsigned long long eventType, eventData; unsigned int gpuInstanceId, computeInstanceId; } event_data_t;

EXPORT int nvmlEventSetCreate(struct fake_eventset **set) {
    int rc = enter("nvmlEventSetCreate", 1);
    if (rc) LEAVE(rc);
    *set = calloc(1, sizeof(struct fake_eventset));
    (*set)->generation = generation;
    LEAVE(OK);
}

EXPORT int nvmlDeviceRegisterEvents(void *dev, unsigned long long types, struct fake_eventset *set) {
    jval *g = NULL;
    int rc = enter_dev("nvmlDeviceRegisterEvents", dev, &g);
    if (rc) LEAVE(rc);
    if (!set) LEAVE(E_INVALID);
    set->mask[((struct fake_device *)dev)->index] |= types;
    LEAVE(OK);
}

static int next_event(struct fake_eventset *set, event_data_t *data) {  /* caller holds mu */
    jval *events = jget(root, "events");
    if (set->generation != generation) { set->generation = generation; set->consumed = 0; }
    while (set->consumed < jlen(events)) {
        jval *ev = events->items[set->consumed++];
        double gpu = 0, xid = 0, type = 8;
        jnum(ev, "gpu", &gpu);
        jnum(ev, "xid", &xid);
        jnum(ev, "type", &type);
        int i = (int)gpu;
        if (i < 0 || i >= MAX_GPUS || !(set->mask[i] & (unsigned long long)type)) continue;
        devices[i].index = i;
        data->device = &devices[i];
        data->eventType = (unsigned long long)type;
        data->eventData = (unsigned long long)xid;
        data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFF;
        return 1;
    }
    return 0;
}

EXPORT int nvmlEventSetWait_v2(struct fake_eventset *set, event_data_t *data, unsigned int timeoutms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = enter("nvmlEventSetWait_v2", 1);
        if (rc) LEAVE(rc);
        if (!set) LEAVE(E_INVALID);
        if (next_event(set, data)) LEAVE(OK);
        pthread_mutex_unlock(&mu);
        clock_gettime(CLOCK_MONOTONIC, &t);
        long elapsed = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (elapsed >= (long)timeoutms) return E_TIMEOUT;
        usleep(10000);
    }
}

EXPORT int nvmlEventSetFree(struct fake_eventset *set) {
    int rc = enter("nvmlEventSetFree", 1);
    if (rc) LEAVE(rc);
    free(set);
    LEAVE(OK);
}
