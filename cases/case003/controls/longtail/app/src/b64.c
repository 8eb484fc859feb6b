/* Base64 (RFC 4648) encoder and strict decoder. */
#include "b64.h"

#include <stdint.h>

static const char STD_ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL_ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

#define KNOWN_FLAGS (B64_URLSAFE | B64_NOPAD)

size_t b64_encoded_len(size_t n, int flags)
{
    size_t groups = n / 3, rest = n % 3, len;
    if (groups > (SIZE_MAX - 4) / 4)
        return 0;
    len = groups * 4;
    if (rest != 0)
        len += (flags & B64_NOPAD) ? rest + 1 : 4;
    return len;
}

size_t b64_decoded_max(size_t n)
{
    return (n / 4) * 3 + ((n % 4) ? 3 : 0);
}

int b64_encode(const void *src, size_t n, char *dst, size_t cap, int flags, size_t *out_len)
{
    const unsigned char *in = src;
    const char *abc;
    size_t need, i, o = 0;

    if ((flags & ~KNOWN_FLAGS) != 0 || dst == NULL || (src == NULL && n != 0))
        return B64_ERR_ARG;
    need = b64_encoded_len(n, flags);
    if (need == 0 && n != 0)
        return B64_ERR_BUFFER;
    if (cap < need + 1)
        return B64_ERR_BUFFER;
    abc = (flags & B64_URLSAFE) ? URL_ALPHABET : STD_ALPHABET;

    for (i = 0; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        dst[o++] = abc[(v >> 18) & 63];
        dst[o++] = abc[(v >> 12) & 63];
        dst[o++] = abc[(v >> 6) & 63];
        dst[o++] = abc[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        dst[o++] = abc[(v >> 18) & 63];
        dst[o++] = abc[(v >> 12) & 63];
        if (!(flags & B64_NOPAD)) {
            dst[o++] = '=';
            dst[o++] = '=';
        }
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8);
        dst[o++] = abc[(v >> 18) & 63];
        dst[o++] = abc[(v >> 12) & 63];
        dst[o++] = abc[(v >> 6) & 63];
        if (!(flags & B64_NOPAD))
            dst[o++] = '=';
    }
    dst[o] = '\0';
    if (out_len)
        *out_len = o;
    return B64_OK;
}

static int sextet(unsigned char c, int urlsafe)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (!urlsafe && c == '+') return 62;
    if (!urlsafe && c == '/') return 63;
    if (urlsafe && c == '-') return 62;
    if (urlsafe && c == '_') return 63;
    return -1;
}

int b64_decode(const char *src, size_t n, void *dst, size_t cap, int flags, size_t *out_len)
{
    unsigned char *out = dst;
    int urlsafe = (flags & B64_URLSAFE) != 0;
    int nopad = (flags & B64_NOPAD) != 0;
    size_t i, data, need, o = 0;
    uint32_t acc = 0;
    int bits = 0;

    if ((flags & ~KNOWN_FLAGS) != 0 || (src == NULL && n != 0) || (dst == NULL && cap != 0))
        return B64_ERR_ARG;
    if (nopad ? (n % 4 == 1) : (n % 4 != 0))
        return B64_ERR_LENGTH;

    /* Validate characters and padding, first offending position wins. */
    data = n;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '=') {
            if (nopad || i + 2 < n)
                return B64_ERR_PADDING;
            if (data == n)
                data = i;
        } else if (sextet(c, urlsafe) < 0) {
            return B64_ERR_CHAR;
        } else if (data != n) {
            return B64_ERR_PADDING; /* data after '=' */
        }
    }
    if (data % 4 == 1)
        return B64_ERR_PADDING; /* e.g. "QQQ=" is fine, "Q===" was caught above */

    /* Leftover bits of the final sextet are simply dropped below. */

    need = (data / 4) * 3 + (data % 4 ? data % 4 - 1 : 0);
    if (cap < need)
        return B64_ERR_BUFFER;

    for (i = 0; i < data; i++) {
        acc = (acc << 6) | (uint32_t)sextet((unsigned char)src[i], urlsafe);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)((acc >> bits) & 0xFF);
        }
    }
    if (out_len)
        *out_len = o;
    return B64_OK;
}

const char *b64_strerror(int code)
{
    switch (code) {
    case B64_OK: return "success";
    case B64_ERR_ARG: return "invalid argument";
    case B64_ERR_BUFFER: return "output buffer too small";
    case B64_ERR_LENGTH: return "invalid input length";
    case B64_ERR_CHAR: return "invalid character";
    case B64_ERR_PADDING: return "invalid padding";
    case B64_ERR_NONCANONICAL: return "non-canonical encoding";
    default: return "unknown error";
    }
}
