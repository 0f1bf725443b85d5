/*
 * errors.h — internal: formatting an error message into a caller's buffer and returning the
 * status, shared by every reader (one definition, in model.c).
 */
#ifndef WASMLM_ERRORS_H
#define WASMLM_ERRORS_H

#include <stddef.h>

/* Writes the printf-style message to err (errlen bytes, truncated; nothing when err is NULL or
 * errlen 0) and returns `status`, for `return wlm_errorf(...)`. */
int wlm_errorf(char *err, size_t errlen, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
