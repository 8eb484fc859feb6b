/* Minimal TAP test harness for the acceptance suite.
 *
 * Each test runs in its own child process (fork) with a time limit, so a
 * crash or hang in the code under test fails only that test. Output is a TAP
 * stream ("1..N", "ok K - name" / "not ok K - name") followed by a summary
 * line "# P passed, F failed". Exit status: 0 when every test passed, else 1.
 */
#ifndef ACCEPTANCE_HARNESS_H
#define ACCEPTANCE_HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*test_fn)(void);
struct test_case { const char *name; test_fn fn; };

#define TEST_TIME_LIMIT_SEC 10

#define CHECK(cond) do { \
    if (!(cond)) { \
        printf("#   check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        fflush(stdout); \
        _exit(1); \
    } \
} while (0)

#define CHECK_EQ_INT(got, want) do { \
    long long got_ = (long long)(got), want_ = (long long)(want); \
    if (got_ != want_) { \
        printf("#   check failed at %s:%d: %s == %s (got %lld, want %lld)\n", \
               __FILE__, __LINE__, #got, #want, got_, want_); \
        fflush(stdout); \
        _exit(1); \
    } \
} while (0)

#define CHECK_MEM(got, want, len) do { \
    if (memcmp((got), (want), (len)) != 0) { \
        printf("#   check failed at %s:%d: memory of %s differs from %s\n", \
               __FILE__, __LINE__, #got, #want); \
        fflush(stdout); \
        _exit(1); \
    } \
} while (0)

static int run_tests(const struct test_case *tests, size_t count)
{
    size_t i, passed = 0, failed = 0;
    printf("TAP version 13\n1..%zu\n", count);
    fflush(stdout);
    for (i = 0; i < count; i++) {
        int status = 0;
        pid_t pid = fork();
        if (pid < 0) {
            printf("not ok %zu - %s # fork failed\n", i + 1, tests[i].name);
            failed++;
            continue;
        }
        if (pid == 0) {
            alarm(TEST_TIME_LIMIT_SEC);
            tests[i].fn();
            fflush(stdout);
            _exit(0);
        }
        if (waitpid(pid, &status, 0) < 0)
            status = -1;
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("ok %zu - %s\n", i + 1, tests[i].name);
            passed++;
        } else if (status != -1 && WIFSIGNALED(status)) {
            printf("not ok %zu - %s # killed by signal %d\n", i + 1, tests[i].name, WTERMSIG(status));
            failed++;
        } else {
            printf("not ok %zu - %s\n", i + 1, tests[i].name);
            failed++;
        }
        fflush(stdout);
    }
    printf("# %zu passed, %zu failed\n", passed, failed);
    fflush(stdout);
    return failed == 0 ? 0 : 1;
}

#endif
