/*
 * threadpool.c — a fork-join pool for the forward pass: the calling thread publishes a job of a
 * few chunks (row ranges of a matrix product) and every thread, the caller included, claims
 * chunks until none are left. Natively the helpers are pthreads started here; in wasm they are
 * Web Workers / worker_threads that the embedder (js/wasmlm.js) starts on the same shared
 * memory, each calling wlm_threadpool_work(). Not a general task scheduler: one job at a time,
 * submitted by one thread.
 *
 * Why chunks are claimed rather than assigned: a helper that has not started yet, or was
 * descheduled, never blocks the caller, which simply runs the unclaimed chunks itself. The
 * claim word packs the job's sequence number with the next chunk index, so a late helper
 * cannot claim a chunk of a newer job with an older job's function (compare-and-swap fails);
 * it packs the chunk count too (see claim_word).
 */
#if !defined(__EMSCRIPTEN__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* syscall() for the futex */
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/threadpool.h"

#if defined(__EMSCRIPTEN__)
#if defined(__wasm_atomics__)
#define POOL_THREADS 1 /* memory.atomic.wait32 / notify */
#else
#define POOL_THREADS 0 /* a module without shared memory: one thread only */
#endif
#else
#define POOL_THREADS 1
#include <pthread.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif
#endif

/* Spins before a helper sleeps: ~0.1-1 ms, longer than the gap between two matrix products of a
 * forward pass (so helpers stay awake during generation) and far shorter than the pause between
 * two user calls (so an idle pool does not burn a core). */
#define POOL_SPIN 20000

/* The words each side spins on live on cache lines of their own (POOL_LINE bytes apart), so that
 * with 16 threads the helpers polling `gen` between jobs are not disturbed by every chunk's
 * claim and completion, nor the submitter polling `done` by the claims (no false sharing). */
#define POOL_LINE 64

struct wlm_threadpool {
    /* written by the submitting thread once per job, polled by idle helpers */
    _Alignas(POOL_LINE) _Atomic int32_t gen; /* job sequence number; helpers wait for it to change */
    _Atomic int32_t quit;
    wlm_pool_fn _Atomic fn;
    void *_Atomic arg;
    int32_t n_threads;
    _Alignas(POOL_LINE) _Atomic int64_t claim; /* claim_word(gen, chunks, next chunk index): every
                                                  thread's compare-and-swap per chunk */
    _Alignas(POOL_LINE) _Atomic int32_t done;  /* chunks finished in the current job; polled by
                                                  the submitter */
    _Alignas(POOL_LINE) _Atomic int32_t sleepers; /* helpers blocked in wait (the submitter
                                                     notifies only then) */
    _Atomic int32_t running;      /* helpers inside wlm_threadpool_work */
    _Atomic int64_t jobs;         /* jobs handed to the helpers, and chunks they ran (tests) */
    _Atomic int64_t helper_chunks;
    int helpers_only;             /* tests: the submitter leaves every chunk to the helpers */
#if POOL_THREADS && !defined(__EMSCRIPTEN__)
    pthread_t *threads;           /* (n_threads - 1) native helpers */
    int32_t n_started;
#endif
};

static void pool_wait(_Atomic int32_t *addr, int32_t seen) {
#if defined(__EMSCRIPTEN__) && POOL_THREADS
    __builtin_wasm_memory_atomic_wait32((int32_t *)addr, seen, -1);
#elif defined(__linux__)
    syscall(SYS_futex, (int32_t *)addr, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#elif POOL_THREADS
    (void)addr, (void)seen;
    sched_yield();
#else
    (void)addr, (void)seen;
#endif
}

static void pool_wake_all(_Atomic int32_t *addr) {
#if defined(__EMSCRIPTEN__) && POOL_THREADS
    __builtin_wasm_memory_atomic_notify((int32_t *)addr, (uint32_t)-1);
#elif defined(__linux__)
    syscall(SYS_futex, (int32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

static inline void cpu_relax(void) {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__EMSCRIPTEN__)
    __builtin_ia32_pause();
#endif
}

/* The claim word: job sequence number (32 bits), chunk count and next chunk index (16 each).
 * The count lives in the same word as the index so that a helper still holding the previous
 * job's final word (index == count) cannot pair it with the next job's larger count. */
static inline int64_t claim_word(int32_t g, int32_t n, int32_t idx) {
    return (int64_t)((uint64_t)(uint32_t)g << 32 | (uint64_t)(uint32_t)n << 16 | (uint32_t)idx);
}

/* Claims and runs chunks of job `g` until none are left. */
static void run_chunks(wlm_threadpool *p, int32_t g, int helper) {
    for (;;) {
        int64_t v = atomic_load(&p->claim);
        if ((int32_t)((uint64_t)v >> 32) != g) return; /* a newer job: this one is finished */
        const int32_t n = (int32_t)(((uint64_t)v >> 16) & 0xffff), idx = (int32_t)(v & 0xffff);
        if (idx >= n) return;
        /* read before the claim; valid if it succeeds (the job cannot end with this chunk
         * unclaimed, and the submitter writes them before publishing the job's claim word) */
        const wlm_pool_fn fn = atomic_load(&p->fn);
        void *const arg = atomic_load(&p->arg);
        if (!atomic_compare_exchange_weak(&p->claim, &v, v + 1)) continue;
        fn(arg, idx, n);
        if (helper) atomic_fetch_add_explicit(&p->helper_chunks, 1, memory_order_relaxed);
        atomic_fetch_add(&p->done, 1);
    }
}

int wlm_threadpool_work(wlm_threadpool *p) {
    if (!p) return WLM_ERR_INVALID_ARG;
    atomic_fetch_add(&p->running, 1);
    int32_t seen = atomic_load(&p->gen);
    run_chunks(p, seen, 1); /* a job published before this helper started */
    while (!atomic_load(&p->quit)) {
        int32_t g = atomic_load(&p->gen);
        for (int spin = 0; g == seen && spin < POOL_SPIN && !atomic_load(&p->quit); spin++) {
            cpu_relax();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pool_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            continue;
        }
        seen = g;
        run_chunks(p, g, 1);
    }
    atomic_fetch_sub(&p->running, 1);
    return WLM_OK;
}

#if POOL_THREADS && !defined(__EMSCRIPTEN__)
static void *native_helper(void *arg) {
    wlm_threadpool_work(arg);
    return NULL;
}
#endif

int wlm_threadpool_new(int32_t n_threads, wlm_threadpool **out) {
    if (!out) return WLM_ERR_INVALID_ARG;
    *out = NULL;
    if (n_threads < 1 || n_threads > WLM_MAX_THREADS) return WLM_ERR_INVALID_ARG;
#if !POOL_THREADS
    if (n_threads > 1) return WLM_ERR_UNSUPPORTED;
#endif
    /* aligned to its cache lines (a size that is a multiple of the alignment, as C11 asks) */
    wlm_threadpool *p = aligned_alloc(POOL_LINE, (sizeof *p + POOL_LINE - 1) / POOL_LINE * POOL_LINE);
    if (!p) return WLM_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->n_threads = n_threads;
#if POOL_THREADS && !defined(__EMSCRIPTEN__)
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            free(p);
            return WLM_ERR_NOMEM;
        }
        for (int32_t i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, native_helper, p) != 0) {
                wlm_threadpool_free(p);
                return WLM_ERR_NOMEM;
            }
            p->n_started++;
        }
    }
#endif
    *out = p;
    return WLM_OK;
}

void wlm_threadpool_stop(wlm_threadpool *p) {
    if (!p) return;
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->gen, 1);
    pool_wake_all(&p->gen);
}

void wlm_threadpool_free(wlm_threadpool *p) {
    if (!p) return;
    wlm_threadpool_stop(p);
#if POOL_THREADS && !defined(__EMSCRIPTEN__)
    for (int32_t i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
#else
    /* wasm helpers leave wlm_threadpool_work within a wake-up; wait until none is inside */
    while (atomic_load(&p->running) > 0) cpu_relax();
#endif
    free(p);
}

int32_t wlm_threadpool_size(const wlm_threadpool *p) { return p ? p->n_threads : 1; }

int32_t wlm_threadpool_running(const wlm_threadpool *p) {
    return p ? atomic_load(&((wlm_threadpool *)p)->running) : 0;
}

void wlm_pool_run(wlm_threadpool *p, wlm_pool_fn fn, void *arg, int32_t n_chunks) {
    if (n_chunks <= 0) return;
    if (!p || n_chunks == 1 || p->n_threads < 2 || atomic_load(&p->quit)) {
        for (int32_t i = 0; i < n_chunks; i++) fn(arg, i, n_chunks);
        return;
    }
    if (n_chunks > 0xffff) n_chunks = 0xffff; /* the claim word's fields; callers ask for few */
    const int32_t g = (int32_t)((uint32_t)atomic_load(&p->gen) + 1u);
    atomic_store(&p->fn, fn);
    atomic_store(&p->arg, arg);
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, claim_word(g, n_chunks, 0));
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers) > 0) pool_wake_all(&p->gen);
    atomic_fetch_add_explicit(&p->jobs, 1, memory_order_relaxed);
    if (!p->helpers_only) run_chunks(p, g, 0);
    while (atomic_load(&p->done) < n_chunks) cpu_relax();
}

void wlm_threadpool_stats(const wlm_threadpool *p, int64_t *jobs, int64_t *helper_chunks) {
    wlm_threadpool *q = (wlm_threadpool *)p;
    *jobs = q ? atomic_load(&q->jobs) : 0;
    *helper_chunks = q ? atomic_load(&q->helper_chunks) : 0;
}

void wlm_threadpool_helpers_only(wlm_threadpool *p, int on) {
    if (p) p->helpers_only = on;
}
