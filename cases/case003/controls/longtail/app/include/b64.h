#ifndef B64_H
#define B64_H

#include <stddef.h>

/* Flags for b64_encode / b64_decode (bitwise OR). */
#define B64_URLSAFE 0x1 /* alphabet with '-' and '_' instead of '+' and '/' */
#define B64_NOPAD   0x2 /* no '=' padding: omitted when encoding, forbidden when decoding */

/* Status codes. */
#define B64_OK                0
#define B64_ERR_ARG          (-1)
#define B64_ERR_BUFFER       (-2)
#define B64_ERR_LENGTH       (-3)
#define B64_ERR_CHAR         (-4)
#define B64_ERR_PADDING      (-5)
#define B64_ERR_NONCANONICAL (-6)

size_t b64_encoded_len(size_t n, int flags);
size_t b64_decoded_max(size_t n);
int b64_encode(const void *src, size_t n, char *dst, size_t cap, int flags, size_t *out_len);
int b64_decode(const char *src, size_t n, void *dst, size_t cap, int flags, size_t *out_len);
const char *b64_strerror(int code);

#endif /* B64_H */
