/*
 * pool_malloc.h — counts heap calls made on the thread pool's helper threads, for the native
 * tests that run jobs on a pool (test_models.h's tm_check_threads, test_vision.c). A pool chunk
 * must not allocate (src/runtime/threadpool.h): the wasm modules' dlmalloc takes no lock, so two
 * threads inside it corrupt the heap — at random, and only in wasm, where no sanitizer looks.
 * Natively glibc's malloc is thread-safe and hides the mistake; this header makes it visible.
 *
 * It defines malloc, calloc, realloc, free, aligned_alloc and posix_memalign for the test
 * executable (they forward to glibc's __libc_* entry points) and, while armed, counts the calls
 * made by any thread other than the one that armed it. Use with wlm_threadpool_helpers_only(p, 1)
 * so that every chunk runs on a helper whatever the scheduler does:
 *
 *     pm_arm();  ... pool jobs ...  long n = pm_disarm();   // n must be 0
 *
 * Only in plain glibc builds: the sanitizers intercept these functions themselves, and wasm has
 * no helper threads in the C tests. Elsewhere PM_COUNTS is 0 and pm_disarm() returns 0.
 * Header-only; one translation unit per test executable.
 */
#ifndef WASMLM_TEST_POOL_MALLOC_H
#define WASMLM_TEST_POOL_MALLOC_H

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define PM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PM_SANITIZED 1
#endif

#if defined(__GLIBC__) && !defined(__EMSCRIPTEN__) && !defined(PM_SANITIZED)
#define PM_COUNTS 1
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

static _Atomic int pm_armed;
static _Atomic long pm_calls;
static pthread_t pm_owner;

static inline void pm_note(void) {
    if (atomic_load_explicit(&pm_armed, memory_order_relaxed) && !pthread_equal(pthread_self(), pm_owner))
        atomic_fetch_add(&pm_calls, 1);
}

void *malloc(size_t n) { pm_note(); return __libc_malloc(n); }
void *calloc(size_t n, size_t size) { pm_note(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { pm_note(); return __libc_realloc(p, n); }
void free(void *p) {
    if (p) pm_note();
    __libc_free(p);
}
void *aligned_alloc(size_t align, size_t n) { pm_note(); return __libc_memalign(align, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    pm_note();
    void *p = __libc_memalign(align, n);
    if (!p && n) return ENOMEM;
    *out = p;
    return 0;
}

/* Starts counting heap calls from threads other than this one. */
static inline void pm_arm(void) {
    pm_owner = pthread_self();
    atomic_store(&pm_calls, 0);
    atomic_store(&pm_armed, 1);
}
/* Stops counting; returns the calls counted since pm_arm. */
static inline long pm_disarm(void) {
    atomic_store(&pm_armed, 0);
    return atomic_load(&pm_calls);
}
#else
#define PM_COUNTS 0
static inline void pm_arm(void) {}
static inline long pm_disarm(void) { return 0; }
#endif

#endif
