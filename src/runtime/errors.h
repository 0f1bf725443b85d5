/*
 * errors.h — internal: formatting an error message into a caller's buffer and returning the
 * status, shared by every reader (one definition, in model.c).
 */
#ifndef WASMLM_ERRORS_H
#define WASMLM_ERRORS_H

#include <stdarg.h>
#include <stddef.h>

/* Writes the printf-style message to err (errlen bytes, truncated; nothing when err is NULL or
 * errlen 0) and returns `status`, for `return wlm_errorf(...)`. */
int wlm_errorf(char *err, size_t errlen, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The same for text parsers, taking a va_list: prefixes the message with "<what> line L, column
 * C: " where L and C (1-based; C counts bytes) locate byte offset `at` (clamped to n) in
 * text[0..n). */
int wlm_verrorf_at(char *err, size_t errlen, int status, const char *what, const char *text,
                   size_t n, size_t at, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 0)))
#endif
    ;

#endif
