/*
 * threadpool.h — internal side of the fork-join pool (threadpool.c): how the forward pass hands
 * a job of chunks to the pool. The public side (wlm_threadpool_new, _work, _free,
 * wlm_context_set_threadpool) is in wasmlm.h.
 */
#ifndef WASMLM_THREADPOOL_H
#define WASMLM_THREADPOOL_H

#include "wasmlm.h"

/* One chunk of a job: chunk `i` of `n`, run by whichever thread claims it. A chunk must not
 * call malloc, calloc, realloc or free: the wasm modules are linked without -pthread, so their
 * dlmalloc takes no lock, and two threads inside it corrupt the heap (found as a trap in a later
 * free, at random). Scratch a chunk needs is allocated by the submitter, one part per chunk
 * index (tests/c/pool_malloc.h counts allocations on helper threads in the native tests). */
typedef void (*wlm_pool_fn)(void *arg, int32_t i, int32_t n);

/* Runs fn(arg, i, n) for every i in [0, n_chunks) (n_chunks capped at 65535) on the pool's
 * threads, the caller included, and returns when all have finished. With p NULL, one thread, a
 * stopped pool or one chunk, the caller runs every chunk itself, in order. The caller never
 * blocks in a wait (it may be a browser's main thread): it spins until the last chunk is done. */
void wlm_pool_run(wlm_threadpool *p, wlm_pool_fn fn, void *arg, int32_t n_chunks);

/* Sets the quit flag and wakes the helpers; they return from wlm_threadpool_work. */
void wlm_threadpool_stop(wlm_threadpool *p);

/* Jobs handed to the helpers so far, and chunks the helpers (not the caller) ran: for tests
 * that must know the parallel path was taken. */
void wlm_threadpool_stats(const wlm_threadpool *p, int64_t *jobs, int64_t *helper_chunks);

/* Tests only: with `on`, the submitting thread runs no chunk itself and waits for the helpers,
 * so that every chunk of every parallel job is run by a helper whatever the scheduler does. It
 * hangs if no helper runs: native pools only. */
void wlm_threadpool_helpers_only(wlm_threadpool *p, int on);

#endif
