/* Hidden acceptance tests for the b64 library (RFC 4648 base64). */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stdint.h>

#include "b64.h"

struct vec { const char *plain; const char *enc; };

static const struct vec RFC[] = {
    {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
};
#define NRFC (sizeof RFC / sizeof RFC[0])

static int dec(const char *s, int flags, unsigned char *out, size_t cap, size_t *len)
{
    return b64_decode(s, strlen(s), out, cap, flags, len);
}

/* ---------------------------------------------------------------- encode */

static void test_encode_rfc_vectors(void)
{
    size_t i;
    for (i = 0; i < NRFC; i++) {
        char out[32];
        size_t len = 999;
        CHECK_EQ_INT(b64_encode(RFC[i].plain, strlen(RFC[i].plain), out, sizeof out, 0, &len), B64_OK);
        CHECK(strcmp(out, RFC[i].enc) == 0);
        CHECK_EQ_INT(len, strlen(RFC[i].enc));
    }
}

static void test_encode_nopad(void)
{
    char out[16];
    size_t len;
    CHECK_EQ_INT(b64_encode("f", 1, out, sizeof out, B64_NOPAD, &len), B64_OK);
    CHECK(strcmp(out, "Zg") == 0 && len == 2);
    CHECK_EQ_INT(b64_encode("fo", 2, out, sizeof out, B64_NOPAD, &len), B64_OK);
    CHECK(strcmp(out, "Zm8") == 0 && len == 3);
    CHECK_EQ_INT(b64_encode("foo", 3, out, sizeof out, B64_NOPAD, &len), B64_OK);
    CHECK(strcmp(out, "Zm9v") == 0 && len == 4);
}

static void test_encode_urlsafe(void)
{
    const unsigned char raw[] = {0xfb, 0xff, 0xbf, 0xfb, 0xff};
    char out[16];
    CHECK_EQ_INT(b64_encode(raw, 5, out, sizeof out, 0, NULL), B64_OK);
    CHECK(strcmp(out, "+/+/+/8=") == 0);
    CHECK_EQ_INT(b64_encode(raw, 5, out, sizeof out, B64_URLSAFE, NULL), B64_OK);
    CHECK(strcmp(out, "-_-_-_8=") == 0);
    CHECK_EQ_INT(b64_encode(raw, 5, out, sizeof out, B64_URLSAFE | B64_NOPAD, NULL), B64_OK);
    CHECK(strcmp(out, "-_-_-_8") == 0);
}

static void test_encode_all_byte_values(void)
{
    unsigned char raw[256];
    char out[400];
    size_t i, len = 0;
    for (i = 0; i < 256; i++)
        raw[i] = (unsigned char)i;
    CHECK_EQ_INT(b64_encode(raw, 256, out, sizeof out, 0, &len), B64_OK);
    CHECK_EQ_INT(len, 344);
    CHECK(strncmp(out, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", 44) == 0);
    CHECK(strcmp(out + 340, "/w==") == 0);
}

static void test_encode_buffer_must_fit_terminator(void)
{
    char out[8];
    size_t len = 77;
    memset(out, 'X', sizeof out);
    CHECK_EQ_INT(b64_encode("foo", 3, out, 4, 0, &len), B64_ERR_BUFFER);
    CHECK_EQ_INT(len, 77);
    CHECK_EQ_INT(b64_encode("foo", 3, out, 5, 0, &len), B64_OK);
    CHECK(strcmp(out, "Zm9v") == 0 && len == 4);
    CHECK_EQ_INT(b64_encode("", 0, out, 0, 0, &len), B64_ERR_BUFFER);
    CHECK_EQ_INT(b64_encode("", 0, out, 1, 0, &len), B64_OK);
    CHECK(out[0] == '\0' && len == 0);
}

static void test_encode_argument_errors(void)
{
    char out[8];
    CHECK_EQ_INT(b64_encode("foo", 3, NULL, 8, 0, NULL), B64_ERR_ARG);
    CHECK_EQ_INT(b64_encode(NULL, 3, out, sizeof out, 0, NULL), B64_ERR_ARG);
    CHECK_EQ_INT(b64_encode("foo", 3, out, sizeof out, 0x80, NULL), B64_ERR_ARG);
    CHECK_EQ_INT(b64_encode(NULL, 0, out, sizeof out, 0, NULL), B64_OK);
    CHECK(out[0] == '\0');
}

static void test_encoded_len(void)
{
    CHECK_EQ_INT(b64_encoded_len(0, 0), 0);
    CHECK_EQ_INT(b64_encoded_len(1, 0), 4);
    CHECK_EQ_INT(b64_encoded_len(2, 0), 4);
    CHECK_EQ_INT(b64_encoded_len(3, 0), 4);
    CHECK_EQ_INT(b64_encoded_len(4, 0), 8);
    CHECK_EQ_INT(b64_encoded_len(1, B64_NOPAD), 2);
    CHECK_EQ_INT(b64_encoded_len(2, B64_NOPAD | B64_URLSAFE), 3);
    CHECK_EQ_INT(b64_encoded_len(3, B64_NOPAD), 4);
    CHECK_EQ_INT(b64_encoded_len(1000, 0), 1336);
    CHECK_EQ_INT(b64_encoded_len(SIZE_MAX, 0), 0);
    CHECK_EQ_INT(b64_encoded_len(SIZE_MAX, B64_NOPAD), 0);
}

static void test_decoded_max(void)
{
    CHECK_EQ_INT(b64_decoded_max(0), 0);
    CHECK_EQ_INT(b64_decoded_max(2), 3);
    CHECK_EQ_INT(b64_decoded_max(4), 3);
    CHECK_EQ_INT(b64_decoded_max(5), 6);
    CHECK_EQ_INT(b64_decoded_max(8), 6);
    CHECK(b64_decoded_max(SIZE_MAX) >= (SIZE_MAX / 4) * 3);
}

/* ---------------------------------------------------------------- decode */

static void test_decode_rfc_vectors(void)
{
    size_t i;
    for (i = 0; i < NRFC; i++) {
        unsigned char out[16];
        size_t len = 999;
        CHECK_EQ_INT(dec(RFC[i].enc, 0, out, sizeof out, &len), B64_OK);
        CHECK_EQ_INT(len, strlen(RFC[i].plain));
        CHECK_MEM(out, RFC[i].plain, len);
    }
}

static void test_decode_nopad(void)
{
    unsigned char out[8];
    size_t len;
    CHECK_EQ_INT(dec("Zg", B64_NOPAD, out, sizeof out, &len), B64_OK);
    CHECK(len == 1 && out[0] == 'f');
    CHECK_EQ_INT(dec("Zm8", B64_NOPAD, out, sizeof out, &len), B64_OK);
    CHECK(len == 2 && memcmp(out, "fo", 2) == 0);
    CHECK_EQ_INT(dec("Zm9vYmFy", B64_NOPAD, out, sizeof out, &len), B64_OK);
    CHECK(len == 6 && memcmp(out, "foobar", 6) == 0);
}

static void test_decode_urlsafe(void)
{
    const unsigned char want[] = {0xfb, 0xff, 0xbf, 0xfb, 0xff};
    unsigned char out[8];
    size_t len;
    CHECK_EQ_INT(dec("-_-_-_8=", B64_URLSAFE, out, sizeof out, &len), B64_OK);
    CHECK(len == 5);
    CHECK_MEM(out, want, 5);
    CHECK_EQ_INT(dec("-_-_-_8", B64_URLSAFE | B64_NOPAD, out, sizeof out, &len), B64_OK);
    CHECK(len == 5);
    CHECK_MEM(out, want, 5);
}

static void test_decode_alphabet_mismatch(void)
{
    unsigned char out[8];
    CHECK_EQ_INT(dec("-_-_", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("+/+/", B64_URLSAFE, out, sizeof out, NULL), B64_ERR_CHAR);
}

static void test_decode_padding_required_by_default(void)
{
    unsigned char out[8];
    CHECK_EQ_INT(dec("Zg", 0, out, sizeof out, NULL), B64_ERR_LENGTH);
    CHECK_EQ_INT(dec("Zm8", 0, out, sizeof out, NULL), B64_ERR_LENGTH);
    CHECK_EQ_INT(dec("Zm9vY", 0, out, sizeof out, NULL), B64_ERR_LENGTH);
}

static void test_decode_nopad_length_and_padding(void)
{
    unsigned char out[8];
    CHECK_EQ_INT(dec("Zm9vY", B64_NOPAD, out, sizeof out, NULL), B64_ERR_LENGTH);
    CHECK_EQ_INT(dec("Zg==", B64_NOPAD, out, sizeof out, NULL), B64_ERR_PADDING);
    CHECK_EQ_INT(dec("Zm8=", B64_NOPAD, out, sizeof out, NULL), B64_ERR_PADDING);
}

static void test_decode_invalid_characters(void)
{
    unsigned char out[16];
    CHECK_EQ_INT(dec("Zm9v!A==", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("Zm9 ", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("Zm9\n", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("Zm\xc3\xa9", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(b64_decode("Zm\0v", 4, out, sizeof out, 0, NULL), B64_ERR_CHAR);
}

static void test_decode_misplaced_padding(void)
{
    unsigned char out[16];
    CHECK_EQ_INT(dec("=Zm9", 0, out, sizeof out, NULL), B64_ERR_PADDING);
    CHECK_EQ_INT(dec("Zm=v", 0, out, sizeof out, NULL), B64_ERR_PADDING);
    CHECK_EQ_INT(dec("Z===", 0, out, sizeof out, NULL), B64_ERR_PADDING);
    CHECK_EQ_INT(dec("Zm9v====", 0, out, sizeof out, NULL), B64_ERR_PADDING);
    CHECK_EQ_INT(dec("Zg==Zm9v", 0, out, sizeof out, NULL), B64_ERR_PADDING);
}

static void test_decode_rejects_noncanonical_trailing_bits(void)
{
    unsigned char out[8];
    size_t len;
    CHECK_EQ_INT(dec("QQ==", 0, out, sizeof out, &len), B64_OK);
    CHECK(len == 1 && out[0] == 'A');
    CHECK_EQ_INT(dec("QR==", 0, out, sizeof out, NULL), B64_ERR_NONCANONICAL);
    CHECK_EQ_INT(dec("QUJ=", 0, out, sizeof out, NULL), B64_ERR_NONCANONICAL);
    CHECK_EQ_INT(dec("QR", B64_NOPAD, out, sizeof out, NULL), B64_ERR_NONCANONICAL);
}

static void test_decode_buffer_exact_size(void)
{
    unsigned char out[8];
    size_t len = 0;
    CHECK_EQ_INT(dec("Zm9vYmFy", 0, out, 5, &len), B64_ERR_BUFFER);
    CHECK_EQ_INT(dec("Zm9vYmFy", 0, out, 6, &len), B64_OK);
    CHECK_EQ_INT(len, 6);
    CHECK_EQ_INT(dec("Zm8=", 0, out, 2, &len), B64_OK);
    CHECK_EQ_INT(len, 2);
    CHECK_EQ_INT(dec("Zm8=", 0, out, 1, &len), B64_ERR_BUFFER);
}

static void test_decode_empty_and_null(void)
{
    unsigned char out[4];
    size_t len = 5;
    CHECK_EQ_INT(b64_decode(NULL, 0, NULL, 0, 0, &len), B64_OK);
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(b64_decode("", 0, out, sizeof out, B64_NOPAD, NULL), B64_OK);
    CHECK_EQ_INT(b64_decode(NULL, 4, out, sizeof out, 0, NULL), B64_ERR_ARG);
    CHECK_EQ_INT(b64_decode("Zm9v", 4, NULL, 3, 0, NULL), B64_ERR_ARG);
    CHECK_EQ_INT(b64_decode("Zm9v", 4, NULL, 0, 0, NULL), B64_ERR_BUFFER);
    CHECK_EQ_INT(b64_decode("Zm9v", 4, out, sizeof out, 0x40, NULL), B64_ERR_ARG);
}

static void test_decode_respects_explicit_length(void)
{
    unsigned char out[16];
    size_t len = 0;
    CHECK_EQ_INT(b64_decode("Zm9vYmFy!!", 4, out, sizeof out, 0, &len), B64_OK);
    CHECK(len == 3 && memcmp(out, "foo", 3) == 0);
}

static void test_decode_out_len_untouched_on_error(void)
{
    unsigned char out[8];
    size_t len = 12345;
    CHECK(dec("Zm9v!A==", 0, out, sizeof out, &len) != B64_OK);
    CHECK_EQ_INT(len, 12345);
    CHECK(dec("Zg", 0, out, sizeof out, &len) != B64_OK);
    CHECK_EQ_INT(len, 12345);
}

static void test_error_precedence(void)
{
    unsigned char out[8];
    /* length before characters; first offending character wins */
    CHECK_EQ_INT(dec("!!!", 0, out, sizeof out, NULL), B64_ERR_LENGTH);
    CHECK_EQ_INT(dec("!A=A", 0, out, sizeof out, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("=A!A", 0, out, sizeof out, NULL), B64_ERR_PADDING);
    /* validity before capacity */
    CHECK_EQ_INT(dec("Zm9!", 0, out, 0, NULL), B64_ERR_CHAR);
    CHECK_EQ_INT(dec("Zm9v=A==", 0, out, 1, NULL), B64_ERR_PADDING);
}

/* ---------------------------------------------------------------- misc */

static void test_round_trip_many_lengths(void)
{
    static const int modes[] = {0, B64_URLSAFE, B64_NOPAD, B64_URLSAFE | B64_NOPAD};
    unsigned char raw[300], back[300];
    char enc[420];
    uint32_t seed = 12345u;
    size_t n, m;
    for (n = 0; n < sizeof raw; n += 7) {
        for (m = 0; m < n; m++) {
            seed = seed * 1103515245u + 12345u;
            raw[m] = (unsigned char)(seed >> 16);
        }
        for (m = 0; m < 4; m++) {
            size_t elen = 0, dlen = 0;
            CHECK_EQ_INT(b64_encode(raw, n, enc, sizeof enc, modes[m], &elen), B64_OK);
            CHECK_EQ_INT(elen, b64_encoded_len(n, modes[m]));
            CHECK_EQ_INT(elen, strlen(enc));
            CHECK_EQ_INT(b64_decode(enc, elen, back, sizeof back, modes[m], &dlen), B64_OK);
            CHECK_EQ_INT(dlen, n);
            CHECK(dlen <= b64_decoded_max(elen));
            CHECK_MEM(back, raw, n);
        }
    }
}

static void test_strerror(void)
{
    const int codes[] = {B64_OK, B64_ERR_ARG, B64_ERR_BUFFER, B64_ERR_LENGTH,
                         B64_ERR_CHAR, B64_ERR_PADDING, B64_ERR_NONCANONICAL};
    size_t i, j, n = sizeof codes / sizeof codes[0];
    for (i = 0; i < n; i++) {
        const char *s = b64_strerror(codes[i]);
        CHECK(s != NULL && s[0] != '\0');
        for (j = 0; j < i; j++)
            CHECK(strcmp(s, b64_strerror(codes[j])) != 0);
    }
    CHECK(b64_strerror(42) != NULL);
    CHECK(b64_strerror(-1000) != NULL);
}

static void test_status_code_values(void)
{
    CHECK_EQ_INT(B64_OK, 0);
    CHECK_EQ_INT(B64_ERR_ARG, -1);
    CHECK_EQ_INT(B64_ERR_BUFFER, -2);
    CHECK_EQ_INT(B64_ERR_LENGTH, -3);
    CHECK_EQ_INT(B64_ERR_CHAR, -4);
    CHECK_EQ_INT(B64_ERR_PADDING, -5);
    CHECK_EQ_INT(B64_ERR_NONCANONICAL, -6);
    CHECK_EQ_INT(B64_URLSAFE, 1);
    CHECK_EQ_INT(B64_NOPAD, 2);
}

#define T(name) {#name, name}
static const struct test_case TESTS[] = {
    T(test_encode_rfc_vectors),
    T(test_encode_nopad),
    T(test_encode_urlsafe),
    T(test_encode_all_byte_values),
    T(test_encode_buffer_must_fit_terminator),
    T(test_encode_argument_errors),
    T(test_encoded_len),
    T(test_decoded_max),
    T(test_decode_rfc_vectors),
    T(test_decode_nopad),
    T(test_decode_urlsafe),
    T(test_decode_alphabet_mismatch),
    T(test_decode_padding_required_by_default),
    T(test_decode_nopad_length_and_padding),
    T(test_decode_invalid_characters),
    T(test_decode_misplaced_padding),
    T(test_decode_rejects_noncanonical_trailing_bits),
    T(test_decode_buffer_exact_size),
    T(test_decode_empty_and_null),
    T(test_decode_respects_explicit_length),
    T(test_decode_out_len_untouched_on_error),
    T(test_error_precedence),
    T(test_round_trip_many_lengths),
    T(test_strerror),
    T(test_status_code_values),
};

int main(void)
{
    return run_tests(TESTS, sizeof TESTS / sizeof TESTS[0]);
}
