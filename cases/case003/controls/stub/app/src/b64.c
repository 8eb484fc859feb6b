/* b64 (stub): every function exists with the right signature, none works. */
#include "b64.h"

size_t b64_encoded_len(size_t n, int flags) { (void)n; (void)flags; return 0; }
size_t b64_decoded_max(size_t n) { (void)n; return 0; }

int b64_encode(const void *src, size_t n, char *dst, size_t cap, int flags, size_t *out_len)
{
    (void)src; (void)n; (void)dst; (void)cap; (void)flags; (void)out_len;
    return B64_ERR_ARG;
}

int b64_decode(const char *src, size_t n, void *dst, size_t cap, int flags, size_t *out_len)
{
    (void)src; (void)n; (void)dst; (void)cap; (void)flags; (void)out_len;
    return B64_ERR_ARG;
}

const char *b64_strerror(int code) { (void)code; return ""; }
