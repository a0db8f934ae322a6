/* The libzstd side of bench/zstd.py: the loop of crates/engine/examples/zstd_decode.rs
 * over libzstd, as volley's engine drove it before ruzstd (commit 5f81b4a^): a fresh
 * streaming decoder per response, fed the body in pieces, a 16 KiB output buffer per
 * step, each step's output counted.
 *
 * usage: zstd_libzstd FILE.zst SIZE PIECE MS  ->  "DECODES CPU_NS_PER_DECODE"
 * (the thread's CPU time, not the wall clock: on a shared machine the wall clock
 * counts the time others held the CPU too)
 *
 * The four functions are declared here, not taken from zstd.h, so only the runtime
 * library (libzstd1, always installed with the zstd tool) is needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { const void *src; size_t size; size_t pos; } ZSTD_inBuffer;
typedef struct { void *dst; size_t size; size_t pos; } ZSTD_outBuffer;
void *ZSTD_createDCtx(void);
size_t ZSTD_freeDCtx(void *);
size_t ZSTD_decompressStream(void *, ZSTD_outBuffer *, ZSTD_inBuffer *);
unsigned ZSTD_isError(size_t);

static double now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: zstd_libzstd FILE.zst SIZE PIECE MS\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *coded = malloc(len);
    if (fread(coded, 1, len, f) != (size_t)len) { perror("read"); return 1; }
    fclose(f);
    unsigned long long size = strtoull(argv[2], 0, 10);
    size_t piece = strtoul(argv[3], 0, 10);
    double budget = strtod(argv[4], 0) * 1e6;
    static unsigned char out[16 * 1024];
    unsigned long long done = 0;
    double start = now_ns(CLOCK_MONOTONIC), cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
    while (now_ns(CLOCK_MONOTONIC) - start < budget) {
        void *d = ZSTD_createDCtx();
        unsigned long long got = 0;
        size_t hint = 1;
        for (long at = 0; at < len; at += piece) {
            size_t n = (size_t)(len - at) < piece ? (size_t)(len - at) : piece;
            ZSTD_inBuffer in = { coded + at, n, 0 };
            /* Until the piece is taken and no output is left inside the decoder. */
            for (;;) {
                ZSTD_outBuffer o = { out, sizeof out, 0 };
                hint = ZSTD_decompressStream(d, &o, &in);
                if (ZSTD_isError(hint)) { fprintf(stderr, "decode failed\n"); return 1; }
                got += o.pos;
                if (in.pos == in.size && o.pos < o.size) break;
            }
        }
        ZSTD_freeDCtx(d);
        if (hint != 0 || got != size) { fprintf(stderr, "decoded %llu of %llu\n", got, size); return 1; }
        done++;
    }
    printf("%llu %.0f\n", done, (now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu) / done);
    return 0;
}
